"""The distributor's two decision procedures, one per period: Table 1 and the cost model.

``decide`` is Algorithm 1 of the paper (modes dynamic and observe): the period's per-worker
loads and MLDC, the policy's proposal and its predicted MLDC, and the four conditions of
Table 1 (``distributor.detection``). ``decide_adaptive`` (mode adaptive) asks the cost model
(``distributor.adaptive``) whether the proposal's saving pays for the move. Both only read the
engine's state at the period's end (a ``Situation``) and say what to do (an ``Outcome``); the
engine applies it, so a decision can be read apart from the state it changes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from distributor.adaptive import AdaptiveModel
from distributor.detection import Verdict, judge
from distributor.epoch import LAST_EPOCH, Epochs, last_epoch_reason
from distributor.loads import EpochLoads
from distributor.mldc import mldc, owner_loads, owners_mldc
from distributor.params import Params
from distributor.policies import Policy, propose_owners
from distributor.records import command_record, proposal_note, status_record
from schemas.assignment import Owners

NO_SHAPE = "no BatchSummary yet: P and W unknown"
# Why a real-time app (BatchSummary.join "real-time") is observed and never commanded. Its
# tasks each hold the whole static side (one partition that every worker owns) and task i reads
# the publications partitions p with p % W == i: no assignment of static partitions changes
# what a task does, and the app reads no command.
REAL_TIME_WHY = ("a real-time app: each of its W tasks holds every subscription and reads the "
                 "publications partitions p with p % W == its index, so an assignment of static "
                 "partitions would change nothing and the app reads no command; its tasks' "
                 "loads and their MLDC are reported, never acted on")


@dataclass(frozen=True)
class Situation:
    """What a period's decision reads: the engine's state when the period closes."""

    now_ms: int
    period: int
    params: Params
    policy: Policy
    app_id: str
    epochs: Epochs
    partitions: int | None
    workers: int | None
    loads: EpochLoads | None          # None while P and W are unknown
    owners: list[Owners] | None       # the owners in force, None while unknown
    costs: Sequence[float]            # per partition, the static bytes a move ships
    total_items: int

    def status(self, per_worker: list[float], items: int, current: float | None,
               predicted: float | None, verdict: Verdict, decision: str,
               reason: str) -> dict[str, Any]:
        """The period's DistributorStatus."""
        return status_record(now_ms=self.now_ms, period=self.period, epoch=self.epochs.epoch,
                             params=self.params, total_items=self.total_items,
                             per_worker=per_worker, items=items, current=current,
                             predicted=predicted, verdict=verdict, decision=decision,
                             reason=reason)

    def command(self, old: Sequence[Owners], new: Sequence[Owners], before: float,
                predicted: float) -> dict[str, Any]:
        """A RebalanceCommand to ``new`` under the next epoch never used."""
        return command_record(now_ms=self.now_ms, epoch=self.epochs.highest + 1,
                              params=self.params, policy=self.policy.name, app_id=self.app_id,
                              old=old, new=new, before=before, predicted=predicted)

    def waiting(self) -> tuple[str, str]:
        """While awaiting an epoch: ``waiting`` or ``resync``, and why."""
        return self.epochs.waiting(self.period, self.params.resync_periods, self.partitions)


@dataclass(frozen=True)
class Outcome:
    """A period's decision and what the engine does next: with ``rebalance`` it commands
    ``proposal`` (``command``), with ``resync`` it goes back to the epoch the app reports,
    else it starts the next period of its loads (when ``next_period``)."""

    status: dict[str, Any]
    decision: str
    proposal: Sequence[Owners] | None = None
    command: dict[str, Any] | None = None
    judged: bool = False              # a period with items was judged
    next_period: bool = True


def decide(s: Situation) -> Outcome:
    """Modes dynamic and observe: judge the period's loads by the conditions of Table 1."""
    loads = s.loads
    if loads is None or s.workers is None:
        status = s.status([], 0, None, None,
                          judge(s.params, None, None, 0, s.epochs.since(s.period)),
                          "waiting", NO_SHAPE)
        return Outcome(status, "waiting", next_period=False)
    assignment = s.owners
    partition_loads = loads.loads(s.params.metric)
    locations = assignment or [loads.owners(p) or (0,) for p in range(len(partition_loads))]
    per_worker = owner_loads(partition_loads, locations, s.workers)
    current = mldc(per_worker)
    proposal = predicted = None
    if current is not None and assignment is not None and not s.epochs.awaiting:
        proposal = propose_owners(s.policy, partition_loads, assignment, s.workers, s.costs)
        predicted = owners_mldc(partition_loads, proposal, s.workers)
    verdict = judge(s.params, current, predicted, loads.period_items, s.epochs.since(s.period))
    judged = loads.period_items > 0
    if s.epochs.awaiting:
        decision, reason = s.waiting()
    elif assignment is None:
        decision = "none"
        reason = (f"assignment of epoch {s.epochs.epoch} not fully known yet "
                  f"({len(loads.locations)} of {s.partitions} partitions seen); "
                  f"{verdict.reason}")
    elif verdict.rebalance and s.params.mode != "observe" and s.epochs.highest >= LAST_EPOCH:
        decision = "none"
        reason = f"all conditions held, but {last_epoch_reason(s.epochs.highest)}"
    elif verdict.rebalance:
        decision = "observe" if s.params.mode == "observe" else "rebalance"
        reason = f"all conditions held: {verdict.reason}"
    else:
        decision, reason = "none", verdict.reason
    if proposal is not None and assignment is not None and proposal != assignment:
        reason += "; " + proposal_note(s.policy.name, assignment, proposal)
    status = s.status(per_worker, loads.period_items, current, predicted, verdict, decision,
                      reason)
    if decision != "rebalance":
        return Outcome(status, decision, judged=judged)
    assert assignment is not None and proposal is not None and current is not None
    assert predicted is not None
    command = s.command(assignment, proposal, current, predicted)
    return Outcome(status, decision, proposal, command, judged)


def decide_real_time(s: Situation) -> Outcome:
    """A real-time app, in every mode: the MLDC over the loads each task reported (not the
    owners' even shares of the one replicated partition that every task holds), judged by the
    conditions of Table 1 for the record, with decision ``none`` and no command
    (``REAL_TIME_WHY``)."""
    loads = s.loads
    assert loads is not None and s.workers is not None
    per_worker = loads.reported_by_worker(s.params.metric, s.workers)
    current = mldc(per_worker)
    verdict = judge(s.params, current, None, loads.period_items, s.epochs.since(s.period))
    shown = "n/a" if current is None else f"{current:.3f}"
    reason = (f"real-time app: MLDC {shown} over its {s.workers} tasks ({s.params.metric}, "
              f"threshold {s.params.threshold}); nothing to command: every task holds the "
              f"whole static side and the publications partitions stay with task p % "
              f"{s.workers}")
    status = s.status(per_worker, loads.period_items, current, None, verdict, "none", reason)
    return Outcome(status, "none", judged=loads.period_items > 0)


def decide_adaptive(s: Situation, model: AdaptiveModel | None) -> Outcome:
    """Mode adaptive: judge the batches so far with the cost model (distributor.adaptive).

    The status's Table 1 fields carry the adaptive conditions: ``threshold`` is
    ``min_saving``, ``over_threshold`` the saving is worth it, ``enough_items`` the
    estimate is confident (two batches of the pattern at least), ``cooled_down`` the
    assignment in force has settled, ``improves_enough`` the saving over the horizon pays
    for the move; ``worker_loads`` are mean processing ns per batch of the current pattern.
    """
    loads = s.loads
    if loads is None or model is None or s.workers is None:
        verdict = Verdict(False, False, False, None, "no BatchSummary yet")
        return Outcome(s.status([], 0, None, None, verdict, "waiting", NO_SHAPE), "waiting",
                       next_period=False)
    items = loads.period_items
    assignment = s.owners
    if s.epochs.awaiting:
        decision, reason = s.waiting()
        verdict = Verdict(False, items > 0, False, None, reason)
        return Outcome(s.status([], items, None, None, verdict, decision, reason), decision)
    if assignment is None:
        reason = (f"assignment of epoch {s.epochs.epoch} not fully known yet "
                  f"({len(loads.locations)} of {s.partitions} partitions seen)")
        verdict = Verdict(False, False, False, None, reason)
        return Outcome(s.status([], items, None, None, verdict, "none", reason), "none")
    assessed = model.assess(assignment, s.policy)
    verdict = Verdict(assessed.worth, assessed.confident, assessed.settled, assessed.pays,
                      assessed.reason)
    if assessed.rebalance and s.epochs.highest >= LAST_EPOCH:
        decision, reason = "none", (f"all conditions held, but "
                                    f"{last_epoch_reason(s.epochs.highest)}")
    elif assessed.rebalance:
        decision, reason = "rebalance", f"all conditions held: {assessed.reason}"
    else:
        decision, reason = "none", assessed.reason
    status = s.status(assessed.per_worker, items, assessed.mldc, assessed.mldc_predicted,
                      verdict, decision, reason)
    status["threshold"] = float(s.params.min_saving)
    if decision != "rebalance":
        return Outcome(status, decision, judged=items > 0)
    assert assessed.mldc is not None and assessed.mldc_predicted is not None
    command = s.command(assignment, assessed.proposal, assessed.mldc, assessed.mldc_predicted)
    command["reason"] = (f"adaptive: {assessed.reason}; by policy {s.policy.name}")
    return Outcome(status, decision, assessed.proposal, command, items > 0)
