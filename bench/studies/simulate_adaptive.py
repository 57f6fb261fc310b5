"""The adaptive distributor against Static STAL and Table 1's, simulated over the physical
runs' cost models (docs/results/adaptive): a steady stream per skew and one whose hot region
moves."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from bench.harness.csv_tables import gzip_beside, write_csv
from bench.paper import (
    ADAPTIVE,
    COST_MODE,
    DYNAMIC_LB_STAL,
    HOT_WORKERS,
    MIN_DURATION_S,
    PARTITIONER,
    PERIOD_S,
    PUBLICATIONS,
    STATIC_STAL,
    WORKERS,
    Log,
    WorkloadKey,
    Workloads,
    cost_models,
    ideal_time_s,
    models_by_workload,
    point_workload,
    scenario_trace,
    simulate_mode,
)

ADAPTIVE_MODES = (STATIC_STAL, DYNAMIC_LB_STAL, ADAPTIVE)
ADAPTIVE_SKEWS = (3 / 16, 0.25, 0.3, 0.5, 0.7)   # 3/16: the 3 hot workers' fair share
MOVING_SKEW = 0.5


def compare_adaptive(results_dir: Path, out_dir: Path, *, workers: int = WORKERS,
                     hot_workers: int = HOT_WORKERS, skews: tuple[float, ...] = ADAPTIVE_SKEWS,
                     moving_skew: float | None = MOVING_SKEW, publications: int = PUBLICATIONS,
                     min_duration_s: float = MIN_DURATION_S, period_s: float = PERIOD_S,
                     pipelines: tuple[str, ...] | None = None,
                     log: Log = print) -> Path | None:
    """Static STAL, the Table 1 distributor (Dynamic LB STAL) and the adaptive one over the
    cost models of ``results_dir``: a steady stream per skew, and a stream whose hot region
    moves half-way (``moving_skew``; None: none). Writes ``adaptive_simulation.csv`` (one row
    per pipeline, scenario, skew, repeat and mode, with the balanced ideal's time) and
    ``adaptive_decisions.csv.gz`` (every status of the two distributors) to ``out_dir``."""
    models = [m for m in cost_models(Path(results_dir), log)
              if pipelines is None or m.pipeline in pipelines]
    if not models:
        log("simulation: no cost model; nothing compared")
        return None
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    workloads = Workloads()
    rows: list[dict[str, Any]] = []
    decisions: list[dict[str, Any]] = []
    points = [("steady", s) for s in skews] + (
        [("moving", moving_skew)] if moving_skew is not None else [])
    groups = models_by_workload(models)
    for scenario, skew in points:
        for (repeat, subs, parts), group in groups.items():
            workload = point_workload(workloads, WorkloadKey(
                repeat, subs, publications, workers, hot_workers, parts, PARTITIONER, skew), log)
            if workload is None:
                continue
            for model in group:
                trace = scenario_trace(workload, model, parts, scenario, workers=workers,
                                       hot_workers=hot_workers, period_s=period_s,
                                       min_duration_s=min_duration_s)
                ideal = ideal_time_s(trace, model, workers)
                done = []
                for mode in ADAPTIVE_MODES:
                    run = simulate_mode(trace, model, mode, workers=workers, period_s=period_s)
                    mldcs = [s["mldc"] for s in run.statuses if s["mldc"] is not None]
                    rows.append({
                        "pipeline": model.pipeline, "scenario": scenario, "skew": skew,
                        "repeat": repeat, "mode": mode, "throughput": run.throughput,
                        "ideal_throughput": run.publications / ideal,
                        "rebalances": len(run.commands),
                        "moved_partitions": run.moved_partitions,
                        "publications": run.publications, "batches": len(run.makespans_ms),
                        "time_s": run.time_s, "move_s": run.move_ms / 1000,
                        "ideal_time_s": ideal,
                        "mldc_first": mldcs[0] if mldcs else math.nan,
                        "mldc_last": mldcs[-1] if mldcs else math.nan,
                        "workers": workers, "hot_workers": hot_workers})
                    done.append(rows[-1])
                    if mode != COST_MODE:
                        decisions += [{"pipeline": model.pipeline, "scenario": scenario,
                                       "skew": skew, "repeat": repeat, "mode": mode,
                                       "period": s["period"], "time_s": s["time"] / 1000,
                                       "epoch": s["epoch"], "decision": s["decision"],
                                       "mldc": "" if s["mldc"] is None else s["mldc"],
                                       "reason": s["reason"]} for s in run.statuses]
                log(f"simulation: {model.pipeline} {scenario} skew {skew:.3f} r{repeat}: "
                    + ", ".join(f"{r['mode']} {r['throughput']:,.0f}/s ({r['rebalances']} reb.)"
                                for r in done)
                    + f"; ideal {done[0]['ideal_throughput']:,.0f}/s")
    workloads.clear()
    path = out_dir / "adaptive_simulation.csv"
    write_csv(path, rows)
    decided = out_dir / "adaptive_decisions.csv"   # ~1 MB of reasons: stored gzipped
    write_csv(decided, decisions)
    gzip_beside(decided)
    return path


def main(argv: list[str] | None = None) -> int:
    """``python -m bench.studies.simulate_adaptive --from DIR --out DIR``: ``compare_adaptive``."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m bench.studies.simulate_adaptive",
                                     description=compare_adaptive.__doc__)
    parser.add_argument("--from", dest="source", type=Path, required=True,
                        help="results directory with the physical runs' CSVs (cost models)")
    parser.add_argument("--out", type=Path, required=True, help="where the CSVs go")
    parser.add_argument("--pipelines", nargs="*", default=None)
    args = parser.parse_args(argv)
    path = compare_adaptive(args.source, args.out,
                            pipelines=tuple(args.pipelines) if args.pipelines else None)
    return 0 if path else 1


if __name__ == "__main__":
    raise SystemExit(main())
