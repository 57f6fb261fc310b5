"""Replay per-period partition loads through the real engine, for trace-driven simulation.

The replay plays the app's part: each period it reports one batch (a BatchSummary and one
PartitionLoad per partition and owner, under the epoch and owners it runs: a replicated
partition's items and time are split evenly among its owners, the remainder to the first ones)
and then closes the period. A command issued at the end of period k is applied from period
k+1 on. Because the records go through ``Engine.observe_*``, the simulation uses exactly the
live decision logic.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from distributor.engine import Engine
from distributor.errors import ReplayInputError
from distributor.params import Params
from distributor.policies import Policy
from schemas.assignment import initial_assignment, owners_of


@dataclass(frozen=True)
class ReplayResult:
    """Per period: the status and the assignment the app ran; and every command issued."""

    statuses: list[dict[str, Any]]
    assignments: list[list[int]]
    commands: list[dict[str, Any]]
    owners: list[list[tuple[int, ...]]] | None = None   # per period, when asked for

    @property
    def mldc(self) -> list[float | None]:
        """MLDC of each period (None when the period had no load of the epoch in force)."""
        return [s["mldc"] for s in self.statuses]


def replay(items: Sequence[Sequence[int]], processing_ns: Sequence[Sequence[int]] | None = None,
           *, workers: int, params: Params | None = None, policy: Policy | None = None,
           period_ms: int = 10_000, app_id: str = "replay") -> ReplayResult:
    """Run ``items[k][p]`` (and ``processing_ns[k][p]``, needed for LB) period by period.

    Starts from the initial assignment at epoch 0 with P = ``len(items[0])``. Without
    ``params``, the Table 1 distributor (mode dynamic): mode adaptive is asked after every
    batch, which a replay by period does not do.
    """
    params = params or Params(mode="dynamic")
    if params.metric == "LB" and processing_ns is None:
        raise ReplayInputError("metric LB needs processing_ns")
    if processing_ns is not None and len(processing_ns) != len(items):
        raise ReplayInputError(f"{len(items)} periods of items, {len(processing_ns)} of "
                               "processing_ns")
    if not items:
        return ReplayResult([], [], [])
    partitions = len(items[0])
    engine = Engine(params, policy, app_id=app_id)
    epoch, assignment = 0, initial_assignment(partitions, workers)
    owners = [(w,) for w in assignment]
    owned: list[list[tuple[int, ...]]] = []
    statuses: list[dict[str, Any]] = []
    assignments: list[list[int]] = []
    commands: list[dict[str, Any]] = []
    for k, period_items in enumerate(items):
        if len(period_items) != partitions:
            raise ReplayInputError(f"period {k} has {len(period_items)} partitions, expected "
                                   f"{partitions}")
        now = (k + 1) * period_ms
        if commands and commands[-1]["epoch"] > epoch:
            epoch, assignment = commands[-1]["epoch"], list(commands[-1]["assignment"])
            owners = owners_of(assignment, commands[-1].get("replicas", []))
        engine.observe_batch({"app_id": app_id, "batch_id": k, "epoch": epoch,
                              "workers": workers, "partitions": partitions})
        for p in range(partitions):
            ns = 0 if processing_ns is None else int(processing_ns[k][p])
            n, items_p = len(owners[p]), int(period_items[p])
            for i, w in enumerate(owners[p]):
                problem = engine.observe_load({
                    "app_id": app_id, "batch_id": k, "epoch": epoch, "partition": p,
                    "worker": w, "items": items_p // n + (i < items_p % n),
                    "processing_ns": ns // n + (i < ns % n), "time": now})
                if problem:
                    raise ReplayInputError(f"period {k}, partition {p}: {problem}")
        result = engine.end_period(now)
        statuses.append(result.status)
        assignments.append(list(assignment))
        owned.append(list(owners))
        if result.command is not None:
            commands.append(result.command)
    return ReplayResult(statuses, assignments, commands, owned)
