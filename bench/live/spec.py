"""What `geops bench live` is asked to run: the command line's choices."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from bench.harness.environment import BenchEnv
from geops.model import Relation
from geops.workload.generate import DEFAULT_POINT_SHARE


@dataclass(frozen=True)
class LiveSpec(BenchEnv):
    """Everything the command line chose."""

    out: Path
    scenario: str = "steady"             # steady | rebalance | moving
    soak: float | None = None            # seconds, or None
    subscriptions: int = 10_000
    pool: int = 20_000
    seed: int = 5
    point_share: float = DEFAULT_POINT_SHARE  # of the publications
    relation: Relation | None = None          # of every subscription; None: a mix
    step_s: float = 20.0
    start_rate: float = 500.0
    bisections: int = 3
    max_lag_s: float = 5.0
    max_growth_s: float = 1.0
    max_rate: float | None = None        # skip the search
    backlog: int = 60_000                # steady: publications drained for the ratio; 0: none
    levels: tuple[float, ...] = (0.5, 0.7, 0.9)
    rates: tuple[float, ...] = ()        # steady: fixed rates offered after the levels
    idle_s: float = 0.0                  # steady: CPU of the idle app measured this long
    duration_s: float = 60.0
    trigger_sweep: tuple[str, ...] = ()
    skew: float = 0.9
    hot_workers: int = 1
    shifts: int = 2                      # moving: times the hot spot moves
    distributor_mode: str = "adaptive"   # moving: adaptive | dynamic
    modes: tuple[str, ...] = ()          # steady: the app's modes run in turn, side by side

    @property
    def monitor_interval(self) -> float:
        return min(1.0, self.step_s / 8)
