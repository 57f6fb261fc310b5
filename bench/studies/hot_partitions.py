"""Hot partitions at W = 16: the redistribution policies compared by trace-driven simulation.

``python -m bench.studies.hot_partitions --from docs/results/full-matrix \
    --out docs/results/hot-partitions``

The same simulation as the paper's Fig. 9 and ``docs/results/adaptive`` (the cost model and
its assumptions: ``bench.paper.simulate``'s docstring): per-partition costs measured in the
physical runs of ``--from``, replayed at W = 16 with 3 hot workers over a stream whose items
fall a share s (the skew) in the hot workers' partitions, through the real
``distributor.Engine`` with Table 1 (Dynamic LB STAL: threshold 0.5, M 1000, N 3, D 10 s,
miMLDC 0.3) and each policy in turn; Static STAL (no distributor) as the floor; and the
adaptive distributor (``--mode adaptive``, judged after every batch) with ``greedy`` and
``replicate`` (variants ``adaptive-greedy``, ``adaptive-replicate``).

Replicas (policy ``replicate``) are simulated as the app runs them: a partition
with k owners has its stream items split evenly among them (``owner_index``), so each owner
does 1/k of its join work; each owner builds the partition's index once (STAL) when it first
has items there; a new replica is shipped like a move (a batch with any move or new replica
pays the measured move time once: the app re-partitions its cached static data); the app
reports one PartitionLoad per (partition, owner). Bytes moved = the static bytes of every
partition for every owner it gains.

Scenarios: a **steady** stream per skew, a **moving** hot spot at skew 0.5 (half-way, the
items of the hot workers' partitions swap with those of workers 8-10,
``bench.paper.simulate.moving``), and **concentrated** hot spots (``CONCENTRATED``: the skewed
share in one partition, ``geops generate --hot-partitions 1``, at W = 16 and at W = 2).
Writes ``hot_partitions.csv.gz`` (one row per pipeline, scenario, skew, repeat and policy),
``hot_partitions_mldc.csv.gz`` (every period's MLDC), ``hot_partitions_summary.csv`` and
``hot_partitions.png`` (``summarise``).
"""

from __future__ import annotations

import argparse
import math
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

from bench.harness.csv_tables import gzip_beside, read_rows, write_csv
from bench.harness.plots import pyplot
from bench.paper import (
    ADAPTIVE,
    COST_MODE,
    DYNAMIC_LB_STAL,
    HOT_SPOT,
    HOT_WORKERS,
    PARTITIONER,
    PERIOD_S,
    PUBLICATIONS,
    SIMULATED_SKEWS,
    STATIC_STAL,
    WORKERS,
    CostModel,
    Log,
    WorkloadKey,
    Workloads,
    cost_models,
    models_by_workload,
    point_workload,
    scenario_trace,
    simulate_mode,
)
from config.choices import POLICIES
from schemas.assignment import owners_of

PIPELINES = ("sPS", "sPIS", "RIsPS")
MOVING_SKEW = 0.5
SCENARIOS = ("steady", "moving", "concentrated")
# concentrated hot spots (geops generate --hot-partitions K): (workers, hot workers, K, skew);
# W = 2 with 80 % of the items in one partition is the case run physically
CONCENTRATED = ((16, 3, 1, 0.3), (16, 3, 1, 0.5), (16, 3, 1, 0.7), (2, 1, *HOT_SPOT))
MIN_DURATION_S = 120.0
ADAPTIVE_POLICIES = ("greedy", "replicate")
VARIANTS = ("none", *POLICIES, *(f"adaptive-{p}" for p in ADAPTIVE_POLICIES))


def final_owners(run) -> tuple[int, int]:
    """(replicated partitions, owners in all) under the last command of ``run`` (0, 0: none)."""
    if not run.commands:
        return 0, 0
    last = run.commands[-1]
    owners = owners_of(last["assignment"], last["replicas"])
    return sum(len(o) > 1 for o in owners), sum(len(o) for o in owners)


def compare_policies(results_dir: Path, out_dir: Path, *, policies: tuple[str, ...] = tuple(
        POLICIES), pipelines: tuple[str, ...] = PIPELINES,
        skews: tuple[float, ...] = SIMULATED_SKEWS,
        moving_skew: float | None = MOVING_SKEW, workers: int = WORKERS,
        hot_workers: int = HOT_WORKERS, publications: int = PUBLICATIONS,
        min_duration_s: float = MIN_DURATION_S, period_s: float = PERIOD_S,
        scenarios: tuple[str, ...] = SCENARIOS,
        adaptive_policies: tuple[str, ...] = ADAPTIVE_POLICIES,
        concentrated: tuple[tuple[int, int, int, float], ...] = CONCENTRATED,
        log: Log = print) -> Path | None:
    """Simulate Static STAL and Dynamic LB STAL with every policy; see the module doc."""
    models: list[CostModel] = [m for m in cost_models(Path(results_dir), log)
                               if m.pipeline in pipelines]
    if not models:
        log("hot partitions: no cost model; nothing simulated")
        return None
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    workloads = Workloads()
    rows: list[dict[str, Any]] = []
    periods: list[dict[str, Any]] = []
    groups = models_by_workload(models)
    points: list[tuple[str, int, int, int | None, float]] = []
    if "steady" in scenarios:
        points += [("steady", workers, hot_workers, None, s) for s in skews]
    if "moving" in scenarios and moving_skew is not None:
        points.append(("moving", workers, hot_workers, None, moving_skew))
    if "concentrated" in scenarios:
        points += [("concentrated", w, h, k, s) for w, h, k, s in concentrated]
    for scenario, workers, hot_workers, hot_parts, skew in points:
        for (repeat, subs, parts), group in groups.items():
            workload = point_workload(workloads, WorkloadKey(
                repeat, subs, publications, workers, hot_workers, parts, PARTITIONER, skew,
                hot_parts), log)
            if workload is None:
                continue
            for model in group:
                trace = scenario_trace(workload, model, parts, scenario, workers=workers,
                                       hot_workers=hot_workers, period_s=period_s,
                                       min_duration_s=min_duration_s)
                runs = ([(COST_MODE, "none")] + [(DYNAMIC_LB_STAL, p) for p in policies]
                        + [(ADAPTIVE, p) for p in adaptive_policies])
                done = []
                for mode, policy in runs:
                    run = simulate_mode(trace, model, mode, workers=workers, period_s=period_s,
                                        policy="greedy" if policy == "none" else policy)
                    mldcs = [s["mldc"] for s in run.statuses if s["mldc"] is not None]
                    replicated, owners = final_owners(run)
                    rows.append({
                        "pipeline": model.pipeline, "scenario": scenario, "skew": skew,
                        "repeat": repeat, "mode": mode, "policy": policy,
                        "variant": _variant(mode, policy),
                        "throughput": run.throughput, "rebalances": len(run.commands),
                        "moved_partitions": run.moved_partitions,
                        "moved_bytes": run.moved_bytes,
                        "replicated_partitions": replicated, "owners": owners,
                        "publications": run.publications, "batches": len(run.makespans_ms),
                        "time_s": run.time_s, "move_s": run.move_ms / 1000,
                        "mldc_first": mldcs[0] if mldcs else math.nan,
                        "mldc_last": mldcs[-1] if mldcs else math.nan,
                        "mldc_max_after_first_command": _after_first(run),
                        "partitions": parts, "workers": workers, "hot_workers": hot_workers,
                        "hot_partitions": hot_parts or ""})
                    done.append(rows[-1])
                    periods += [{"pipeline": model.pipeline, "scenario": scenario, "skew": skew,
                                 "repeat": repeat, "variant": _variant(mode, policy),
                                 "period": s["period"],
                                 "time_s": s["time"] / 1000, "epoch": s["epoch"],
                                 "mldc": "" if s["mldc"] is None else s["mldc"],
                                 "decision": s["decision"]} for s in run.statuses]
                log(f"hot partitions: {model.pipeline} {scenario} W={workers} {skew} r{repeat}: "
                    + ", ".join(
                    f"{r['variant']} {r['throughput']:,.0f}/s MLDC {r['mldc_last']:.2f}"
                    for r in done))
    workloads.clear()
    path = out_dir / "hot_partitions.csv"
    write_csv(path, rows)
    mldc = out_dir / "hot_partitions_mldc.csv"
    write_csv(mldc, periods)
    gzip_beside(mldc)
    return gzip_beside(path)


def _variant(mode: str, policy: str) -> str:
    """``none`` (Static STAL), the policy (Dynamic LB STAL, Table 1) or ``adaptive-POLICY``."""
    return {COST_MODE: "none", DYNAMIC_LB_STAL: policy}.get(mode, f"adaptive-{policy}")


def _after_first(run) -> float:
    """The highest MLDC of the periods judged after the first command was applied (the
    balance the policy holds), NaN when there was no command."""
    if not run.commands:
        return math.nan
    first = run.commands[0]["epoch"]
    later = [s["mldc"] for s in run.statuses if s["epoch"] >= first and s["mldc"] is not None]
    return max(later) if later else math.nan


def summarise(out_dir: Path) -> Path:
    """``hot_partitions_summary.csv`` from ``hot_partitions.csv(.gz)``: per scenario, skew and
    variant (the policy; ``none`` = Static STAL; ``adaptive-POLICY``) over the pipelines and
    repeats, the mean throughput and its ratio to greedy's and to Static STAL's at the same
    point (mean, min), the final MLDC (mean, max), partitions and MB moved, replicated
    partitions at the end and rebalances; and a plot (throughput over greedy, and the largest
    final MLDC, per skew)."""
    plt = pyplot()
    out_dir = Path(out_dir)
    rows = read_rows(out_dir / "hot_partitions.csv")
    point = {(r["pipeline"], r["scenario"], r["workers"], r["skew"], r["repeat"],
              r["variant"]): r for r in rows}
    groups: dict[tuple[str, str, str, str], list] = defaultdict(list)
    for r in rows:
        groups[(r["scenario"], r["workers"], r["skew"], r["variant"])].append(r)
    summary = []
    for (scenario, workers, skew, policy), group in groups.items():
        over_greedy, over_static = ([
            float(r["throughput"]) / float(point[(r["pipeline"], scenario, workers, skew,
                                                  r["repeat"], base)]["throughput"])
            for r in group] for base in ("greedy", "none"))
        last = [float(r["mldc_last"]) for r in group]
        summary.append({
            "scenario": scenario, "workers": int(workers), "skew": float(skew), "variant": policy,
            "points": len(group),
            "throughput_mean": statistics.fmean(float(r["throughput"]) for r in group),
            "over_greedy_mean": statistics.fmean(over_greedy),
            "over_greedy_min": min(over_greedy),
            "over_static_mean": statistics.fmean(over_static),
            "mldc_last_mean": statistics.fmean(last), "mldc_last_max": max(last),
            "moved_partitions_mean": statistics.fmean(int(r["moved_partitions"])
                                                      for r in group),
            "moved_mb_mean": statistics.fmean(int(r["moved_bytes"]) for r in group) / 1e6,
            "replicated_mean": statistics.fmean(int(r["replicated_partitions"])
                                                for r in group),
            "rebalances_mean": statistics.fmean(int(r["rebalances"]) for r in group)})
    summary.sort(key=lambda r: (SCENARIOS.index(r["scenario"]), -r["workers"], r["skew"],
                                VARIANTS.index(r["variant"]) if r["variant"] in VARIANTS
                                else len(VARIANTS), r["variant"]))
    path = out_dir / "hot_partitions_summary.csv"
    write_csv(path, summary)
    steady = [r for r in summary if r["scenario"] == "steady"]
    if not steady:
        return path
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for policy in VARIANTS:
        mine = [r for r in steady if r["variant"] == policy]
        if not mine:
            continue
        label = STATIC_STAL if policy == "none" else policy
        style = "--" if policy in ("llfd", "minmig", "mixed") else "-"
        axes[0].plot([r["skew"] for r in mine], [r["over_greedy_mean"] for r in mine],
                     style, marker="o", label=label)
        axes[1].plot([r["skew"] for r in mine], [r["mldc_last_max"] for r in mine],
                     style, marker="o", label=label)
    axes[0].axhline(1.5, color="grey", lw=0.8, ls=":")
    axes[0].set(xlabel="skew (share of items on 3 of 16 workers)",
                ylabel="throughput / Dynamic LB STAL greedy (mean)",
                title="W = 16 simulation: throughput")
    axes[1].axhline(0.10, color="grey", lw=0.8, ls=":")
    axes[1].set(xlabel="skew", ylabel="final MLDC (largest over 9 points)", yscale="log",
                title="final MLDC")
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out_dir / "hot_partitions.png", dpi=110)
    plt.close(fig)
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.studies.hot_partitions",
                                     description=compare_policies.__doc__)
    parser.add_argument("--from", dest="source", type=Path, required=True,
                        help="results directory with the physical runs' CSVs (cost models)")
    parser.add_argument("--out", type=Path, required=True, help="where the CSVs go")
    parser.add_argument("--pipelines", nargs="*", default=list(PIPELINES))
    parser.add_argument("--policies", nargs="*", default=list(POLICIES))
    parser.add_argument("--adaptive-policies", nargs="*", default=list(ADAPTIVE_POLICIES))
    parser.add_argument("--skews", nargs="*", type=float, default=list(SIMULATED_SKEWS))
    parser.add_argument("--scenarios", nargs="*", default=list(SCENARIOS), choices=SCENARIOS)
    parser.add_argument("--no-moving", action="store_true", help="skip the moving hot spot")
    parser.add_argument("--summary-only", action="store_true",
                        help="only summarise an existing OUT/hot_partitions.csv")
    args = parser.parse_args(argv)
    if args.summary_only:
        summarise(args.out)
        return 0
    bad = [p for p in args.policies + args.adaptive_policies if p not in POLICIES]
    if bad:
        parser.error(f"--policies: unknown {bad}; known: {', '.join(POLICIES)}")
    path = compare_policies(args.source, args.out, policies=tuple(args.policies),
                            pipelines=tuple(args.pipelines), skews=tuple(args.skews),
                            moving_skew=None if args.no_moving else MOVING_SKEW,
                            scenarios=tuple(args.scenarios),
                            adaptive_policies=tuple(args.adaptive_policies))
    if path:
        summarise(args.out)
    return 0 if path else 1


if __name__ == "__main__":
    raise SystemExit(main())
