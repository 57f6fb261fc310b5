"""The decoder A/B's numbers, from this directory's CSVs (run from the repository's root):
throughput one-pass / frozen per mode and Dynamic LB STAL / Static STAL per side, per repeat
and as ratio of means; then each run's steady-state milliseconds per 1,000 records outside the
join stage and in it (bench.paper.breakdown)."""

from collections import defaultdict
from pathlib import Path
from statistics import mean

from bench.paper.breakdown import run_breakdown
from bench.paper.figures import read_rows

D = Path("docs/results/ab-decode-2026-11-25")
SIDES = ("frozen-f2e4a7f", "onepass-233dc98")
PIPELINES = ("sPIS", "RIsPS")
MODES = ("Static STAL", "Dynamic LB STAL")


def key(row: dict[str, str]) -> tuple[str, str, int]:
    return row["pipeline"], row["mode"], int(row["repeat"])


def joined(values) -> str:
    return " · ".join(values)


def main() -> None:
    tp = [{key(r): float(r["throughput"]) for r in read_rows(D / side / "runs.csv")} for side in SIDES]
    split = []
    for side in SIDES:
        runs = defaultdict(list)
        for b in read_rows(D / side / "batches.csv"):
            runs[key(b)].append(b)
        split.append({k: run_breakdown(v) for k, v in runs.items()})
    for p in PIPELINES:
        reps = sorted({k[2] for k in tp[0] if k[0] == p} & {k[2] for k in tp[1] if k[0] == p})
        for m in MODES:
            a, b = ([t[p, m, r] for r in reps] for t in tp)
            print(f"{p} {m}: frozen {joined(f'{x:,.0f}' for x in a)} | one-pass "
                  f"{joined(f'{x:,.0f}' for x in b)} pub/s | one-pass/frozen "
                  f"{joined(f'{y / x:.2f}' for x, y in zip(a, b, strict=True))}, ratio of means "
                  f"{mean(b) / mean(a):.3f}")
        for side, t in zip(SIDES, tp, strict=True):
            lb, st = ([t[p, m, r] for r in reps] for m in reversed(MODES))
            print(f"{p} {side}: Dynamic LB STAL / Static STAL "
                  f"{joined(f'{x / y:.2f}' for x, y in zip(lb, st, strict=True))}, ratio of means "
                  f"{mean(lb) / mean(st):.3f}")
        for m in MODES:
            for column, name in (("outside_ms_per_k", "outside the join"),
                                 ("join_ms_per_k", "join stage")):
                a, b = ([s[p, m, r][column] for r in reps] for s in split)
                print(f"{p} {m}, {name}, ms per 1,000 records: frozen "
                      f"{joined(f'{x:.1f}' for x in a)} | one-pass {joined(f'{x:.1f}' for x in b)}"
                      f" | means {mean(a):.1f} -> {mean(b):.1f} ({mean(b) - mean(a):+.1f})")


if __name__ == "__main__":
    main()
