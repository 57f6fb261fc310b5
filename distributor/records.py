"""The records a distributor period writes: a DistributorStatus and maybe a RebalanceCommand.

Both are dicts the service encodes with the Avro schemas (``schemas``); every number in them
comes from records the engine checked, so they always encode.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from distributor.detection import Verdict
from distributor.params import Params
from distributor.policies import added_owners
from schemas.assignment import Owners, command_fields


@dataclass(frozen=True)
class PeriodResult:
    """What one period produced: a DistributorStatus and maybe a RebalanceCommand (dicts)."""

    status: dict[str, Any]
    command: dict[str, Any] | None = None


def status_record(*, now_ms: int, period: int, epoch: int, params: Params, total_items: int,
                  per_worker: list[float], items: int, current: float | None,
                  predicted: float | None, verdict: Verdict, decision: str,
                  reason: str) -> dict[str, Any]:
    """A DistributorStatus: the period's loads, MLDC, conditions and decision."""
    return {
        "time": now_ms,
        "period": period,
        "epoch": epoch,
        "metric": params.metric,
        "mode": params.mode,
        "worker_loads": per_worker,
        "items": items,
        "total_items": total_items,
        "mldc": current,
        "mldc_predicted": predicted,
        "threshold": float(params.threshold),
        "over_threshold": verdict.over_threshold,
        "enough_items": verdict.enough_items,
        "cooled_down": verdict.cooled_down,
        "improves_enough": verdict.improves_enough,
        "decision": decision,
        "reason": reason,
    }


def proposal_note(policy: str, old: Sequence[Owners], new: Sequence[Owners]) -> str:
    """What the policy's proposal changes: owners added, partitions replicated."""
    added = added_owners(old, new)
    replicated = sum(1 for o in new if len(o) > 1)
    return (f"policy {policy} proposes {len(added)} owner(s) added (moves and "
            f"new replicas), {replicated} partition(s) replicated")


def command_record(*, now_ms: int, epoch: int, params: Params, policy: str, app_id: str,
                   old: Sequence[Owners], new: Sequence[Owners], before: float,
                   predicted: float) -> dict[str, Any]:
    """A RebalanceCommand from ``old`` to ``new`` owners under ``epoch``: a move for every
    owner a partition gains, and the replicated partitions' owners."""
    moves = added_owners(old, new)
    assignment, replicas = command_fields(new)
    dropped = sum(1 for a, b in zip(old, new, strict=True) for w in a if w not in b)
    copies = sum(len(r["workers"]) for r in replicas)
    shape = (f" ({len(replicas)} partition(s) replicated on {copies} owners, {dropped} "
             f"owner(s) dropped)" if replicas or dropped else "")
    return {
        "epoch": epoch,
        "assignment": assignment,
        "moves": [{"partition": p, "from_worker": a, "to_worker": b} for p, a, b in moves],
        "mldc_before": before,
        "mldc_predicted": predicted,
        "metric": params.metric,
        "reason": (f"MLDC {before:.3f} > threshold {params.threshold}; predicted "
                   f"{predicted:.3f} after {len(moves)} move(s){shape} by policy "
                   f"{policy}"),
        "time": now_ms,
        "app_id": app_id,
        "replicas": replicas,
    }
