"""Per dynamic run at skew 0.9: when epoch 1 starts, the mean batch time before and after it,
the Static STAL run of the same repeat, and the throughput ratio of the two.

Usage: ``python -m bench.analysis.epochs DIR`` (e.g. ``docs/results/recheck-2026-11-24/scale-1.8``).
"""

from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path

from bench.analysis import print_lines
from bench.paper.plan import DYNAMIC_LB_STAL, STATIC_STAL, mode_key
from bench.paper.rows import Row, read_rows


def _mean_ms(rows: list[Row]) -> float:
    return sum(float(x["duration_ms"]) for x in rows) / max(len(rows), 1)


def epochs(results_dir: Path) -> list[str]:
    """One line per Dynamic run at skew 0.9 that has batches, by run id."""
    batches: dict[str, list[Row]] = defaultdict(list)
    for r in read_rows(results_dir / "batches.csv"):
        batches[r["run_id"]].append(r)
    runs = {r["run_id"]: r for r in read_rows(results_dir / "runs.csv")}
    out = []
    for rid, rows in sorted(batches.items()):
        run = runs[rid]
        if run["skew"] != "0.9" or "Dynamic" not in run["mode"]:
            continue
        rows.sort(key=lambda x: int(x["batch_id"]))
        t0, tend = int(rows[0]["start_ms"]), int(rows[-1]["end_ms"])
        later = [x for x in rows if x["epoch"] != "0"]
        epoch0 = [x for x in rows if x["epoch"] == "0"]
        static_id = rid.replace(mode_key(DYNAMIC_LB_STAL), mode_key(STATIC_STAL))
        static, after = _mean_ms(batches.get(static_id, [])), _mean_ms(later)
        at = (int(later[0]["start_ms"]) - t0) / 1000 if later else math.nan
        out.append(f"{rid:32s} epoch1 at {at:5.1f} s of {(tend - t0) / 1000:5.1f} s; batches "
                   f"before {len(epoch0)} of {len(rows)}; mean ms {_mean_ms(epoch0):,.0f} -> "
                   f"{after:,.0f}; static {static:,.0f}; static/after {static / after:.2f}; thr "
                   f"ratio {float(run['throughput']) / float(runs[static_id]['throughput']):.2f}")
    return out


def main(argv: list[str] | None = None) -> None:
    print_lines(epochs, argv)


if __name__ == "__main__":
    main()
