"""`geops bench paper`: the paper's evaluation (six modes, four pipelines, skew) on this machine.

The modules are the command's own: ``plan`` (the runs and their sizes), ``workloads``,
``runner`` and ``collect`` (one physical run), ``evaluation`` and ``redistribution`` (the
plan, resumable), ``simulate`` with ``simulate_costs`` and ``simulate_sweep`` (Fig. 9 at the
paper's scale), ``results``, ``breakdown``, ``verdicts``, ``figures`` and ``paper_report``.

What the studies of ``bench.studies`` use of it is this package's public surface, imported
from ``bench.paper`` itself and never from its modules: the names of the modes, the simulator
(its cost models, workloads and the constants of the paper's scale) and the breakdown of a
gain. Those are the paper's definitions; a study that measured them again would drift from the
figures.
"""

from bench.paper.breakdown import run_breakdown
from bench.paper.plan import ADAPTIVE, DYNAMIC_LB_STAL, HOT_SPOT, REPLICATE, STATIC_STAL
from bench.paper.simulate import (
    COST_MODE,
    HOT_WORKERS,
    MIN_DURATION_S,
    PARTITIONER,
    PERIOD_S,
    PUBLICATIONS,
    WORKERS,
    CostModel,
    Log,
    ideal_time_s,
    scenario_trace,
    simulate_mode,
)
from bench.paper.simulate import SKEWS as SIMULATED_SKEWS
from bench.paper.simulate_costs import cost_models, models_by_workload
from bench.paper.simulate_sweep import point_workload
from bench.paper.workloads import WorkloadKey, Workloads

__all__ = [
    "ADAPTIVE", "COST_MODE", "DYNAMIC_LB_STAL", "HOT_SPOT", "HOT_WORKERS", "MIN_DURATION_S",
    "PARTITIONER", "PERIOD_S", "PUBLICATIONS", "REPLICATE", "SIMULATED_SKEWS", "STATIC_STAL",
    "WORKERS", "CostModel", "Log", "WorkloadKey", "Workloads", "cost_models", "ideal_time_s",
    "models_by_workload", "point_workload", "run_breakdown", "scenario_trace", "simulate_mode",
]
