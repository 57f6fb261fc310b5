"""The one-pass decoder A/B's numbers (``docs/results/ab-decode-2026-11-25/``, kept in git
history): throughput one-pass / frozen per mode and Dynamic LB STAL / Static STAL per side, per
repeat and as ratio of means; then each run's steady-state milliseconds per 1,000 records
outside the join stage and in it (``bench.paper.breakdown``).

Usage: ``python -m bench.studies.ab_decode [DIR]`` (default: that directory). The A/B was
superseded by the gains page and left the tree; both sides' files are in git history at
``417aaa7``:
``mkdir -p /tmp/ab && git archive 417aaa7 docs/results/ab-decode-2026-11-25 | tar -x -C /tmp/ab``,
then pass ``/tmp/ab/docs/results/ab-decode-2026-11-25``.
"""

from __future__ import annotations

import sys
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from statistics import mean

from bench.harness.csv_tables import Row, read_rows
from bench.paper import DYNAMIC_LB_STAL, STATIC_STAL, run_breakdown

DIR = Path("docs/results/ab-decode-2026-11-25")
HISTORY = "417aaa7"  # the last commit whose tree holds both sides in DIR
SIDES = ("frozen-f2e4a7f", "onepass-233dc98")
PIPELINES = ("sPIS", "RIsPS")
MODES = (STATIC_STAL, DYNAMIC_LB_STAL)

Key = tuple[str, str, int]


def key(row: Row) -> Key:
    return row["pipeline"], row["mode"], int(row["repeat"])


def joined(values: Iterable[str]) -> str:
    return " · ".join(values)


def report(directory: Path = DIR, sides: tuple[str, str] = SIDES) -> list[str]:
    """The lines ``main`` prints for the two sides' results directories in ``directory``."""
    tp = [{key(r): float(r["throughput"]) for r in read_rows(directory / side / "runs.csv")}
          for side in sides]
    split = []
    for side in sides:
        runs: dict[Key, list[Row]] = defaultdict(list)
        for b in read_rows(directory / side / "batches.csv"):
            runs[key(b)].append(b)
        split.append({k: run_breakdown(v) for k, v in runs.items()})
    out = []
    for p in PIPELINES:
        reps = sorted({k[2] for k in tp[0] if k[0] == p} & {k[2] for k in tp[1] if k[0] == p})
        for m in MODES:
            a, b = ([t[p, m, r] for r in reps] for t in tp)
            out.append(f"{p} {m}: frozen {joined(f'{x:,.0f}' for x in a)} | one-pass "
                       f"{joined(f'{x:,.0f}' for x in b)} pub/s | one-pass/frozen "
                       f"{joined(f'{y / x:.2f}' for x, y in zip(a, b, strict=True))}, ratio of "
                       f"means {mean(b) / mean(a):.3f}")
        for side, t in zip(sides, tp, strict=True):
            lb, st = ([t[p, m, r] for r in reps] for m in reversed(MODES))
            out.append(f"{p} {side}: {DYNAMIC_LB_STAL} / {STATIC_STAL} "
                       f"{joined(f'{x / y:.2f}' for x, y in zip(lb, st, strict=True))}, ratio of "
                       f"means {mean(lb) / mean(st):.3f}")
        for m in MODES:
            for column, name in (("outside_ms_per_k", "outside the join"),
                                 ("join_ms_per_k", "join stage")):
                a, b = ([s[p, m, r][column] for r in reps] for s in split)
                out.append(f"{p} {m}, {name}, ms per 1,000 records: frozen "
                           f"{joined(f'{x:.1f}' for x in a)} | one-pass "
                           f"{joined(f'{x:.1f}' for x in b)} | means {mean(a):.1f} -> "
                           f"{mean(b):.1f} ({mean(b) - mean(a):+.1f})")
    return out


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if len(args) > 1:
        raise SystemExit("usage: python -m bench.studies.ab_decode [DIR]")
    directory = Path(args[0]) if args else DIR
    missing = [side for side in SIDES if not (directory / side).is_dir()]
    if missing:
        raise SystemExit(f"no {', '.join(missing)} in {directory}; both sides are "
                         f"in git history: mkdir -p /tmp/ab && git archive {HISTORY} {DIR} | "
                         f"tar -x -C /tmp/ab, then python -m bench.studies.ab_decode "
                         f"/tmp/ab/{DIR}")
    print("\n".join(report(directory)))


if __name__ == "__main__":
    main()
