"""Per dynamic run at skew 0.9 and epoch: the busier worker's share of the items and of the
processing time (``loads.csv``).

Usage: ``python -m bench.analysis.shares DIR`` (e.g. ``docs/results/recheck-2026-11-24/scale-1.8``).
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from bench.analysis import print_lines
from bench.paper.rows import iter_rows


def shares(results_dir: Path) -> dict[tuple[str, str], tuple[float, float]]:
    """(busier worker's item share, its time share) per (run id, epoch)."""
    per: dict[tuple[str, str], dict[str, list[float]]] = defaultdict(
        lambda: defaultdict(lambda: [0.0, 0.0]))
    for r in iter_rows(results_dir / "loads.csv"):
        if r["skew"] != "0.9" or "Dynamic" not in r["mode"]:
            continue
        w = per[(r["run_id"], r["epoch"])][r["worker"]]
        w[0] += int(r["items"])
        w[1] += float(r["processing_ns"])
    out = {}
    for k, workers in sorted(per.items()):
        items = sum(v[0] for v in workers.values())
        time = sum(v[1] for v in workers.values())
        out[k] = (max(v[0] for v in workers.values()) / items,
                  max(v[1] for v in workers.values()) / time)
    return out


def lines(results_dir: Path) -> list[str]:
    return [f"{k} busier worker: items {items:.2f} time {time:.2f}"
            for k, (items, time) in shares(results_dir).items()]


def main(argv: list[str] | None = None) -> None:
    print_lines(lines, argv)


if __name__ == "__main__":
    main()
