"""The Dynamic Distributor: watches partition loads, computes MLDC, commands rebalances.

Pure decision logic (no Kafka): ``Engine`` is the state machine a service loop or a trace
replay drives; ``policies`` holds the pluggable redistribution policies.
"""

from distributor.engine import Engine
from distributor.mldc import assignment_mldc, load_distances, mldc, worker_loads
from distributor.params import Params
from distributor.policies import POLICIES, GreedyPolicy, Policy, make_policy
from distributor.records import PeriodResult
from distributor.replay import ReplayResult, replay

__all__ = [
    "POLICIES",
    "Engine",
    "GreedyPolicy",
    "Params",
    "PeriodResult",
    "Policy",
    "ReplayResult",
    "assignment_mldc",
    "load_distances",
    "make_policy",
    "mldc",
    "replay",
    "worker_loads",
]
