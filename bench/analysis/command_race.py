"""Per dynamic run at skew 0.9: how long after the app's batch 0 ended the distributor's first
command was decided (its status time), against when the app started batch 1 (where it polls
the control topic), and which batch ran the new epoch first.

Usage: ``python -m bench.analysis.command_race DIR`` (a results directory; the re-check's
``read-whole/command_race.txt`` is its output for ``docs/results/recheck-2026-11-24/read-whole``).
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from bench.analysis import print_lines
from bench.paper.rows import Row, read_rows


def command_race(results_dir: Path) -> list[str]:
    """One line per dynamic run at skew 0.9 that commanded a rebalance, by run id."""
    batches: dict[str, list[Row]] = defaultdict(list)
    for r in read_rows(results_dir / "batches.csv"):
        batches[r["run_id"]].append(r)
    decided: dict[str, int] = {}
    for r in read_rows(results_dir / "status.csv"):
        if r["decision"] == "rebalance":
            decided.setdefault(r["run_id"], int(r["time_ms"]))
    out = []
    for rid, rows in sorted(batches.items()):
        if "Dynamic" not in rid or "-s90-" not in rid or rid not in decided:
            continue
        rows.sort(key=lambda x: int(x["batch_id"]))
        end0 = int(rows[0]["end_ms"])
        first = next(int(x["batch_id"]) for x in rows if x["epoch"] != "0")
        out.append(f"{rid:28s} command +{decided[rid] - end0:4d} ms, batch 1 starts "
                   f"+{int(rows[1]['start_ms']) - end0:4d} ms after batch 0 ends; new epoch from "
                   f"batch {first}; batch 1 {float(rows[1]['duration_ms']):,.0f} ms, batch 2 "
                   f"{float(rows[2]['duration_ms']):,.0f} ms")
    return out


def main(argv: list[str] | None = None) -> None:
    print_lines(command_race, argv)


if __name__ == "__main__":
    main()
