"""The Dynamic Distributor as a state machine with no I/O (Algorithm 1 of the paper).

A Kafka loop (or a trace replay) drives it::

    engine = Engine(Params(mode="dynamic"), make_policy("greedy"))
    engine.restore(cmd["epoch"], cmd["assignment"], cmd["replicas"])  # latest command, if any
    ... for each metrics record: engine.observe_batch(r) / engine.observe_load(r)
    ... every D seconds: result = engine.end_period(now_ms)
        produce result.status to the status topic, result.command (if any) to `control`

Modules. The epoch protocol (which epoch is in force, adopting a newer one, waiting for a
commanded one and re-synchronising) is ``distributor.epoch``; the two decision procedures of a
period are ``distributor.decisions``; the status and command records ``distributor.records``.
This module checks the input records and drives the three: it feeds the loads, asks for a
decision when a period ends and applies it. Epochs are Avro longs: an epoch of 2**63 - 1 is
refused in a restore and in the app's records, and loads whose sums in a period would not fit a
long are refused (``too large``); the status and commands the engine writes therefore always
encode.

Input never raises: ``observe_*`` return None when a record was used (or held: loads that come
before the first BatchSummary wait for it to tell P and W), else a reason starting with one of
the ``REJECT_*`` kinds, also counted in ``counters``.

The first period may close early (``first_period_due``), as soon as M items are in; every
condition of the paper still decides.

Replicas (RebalanceCommand v2). A partition may have several owners: the engine keeps the
owners of every partition (``owners``; ``assignment`` is the primary owners), sums the app's
per-(partition, worker) loads into partition loads and splits a replicated partition's load
evenly among its owners for the worker loads and MLDC (now and predicted), as the app's
routing (``schemas.assignment.owner_index``) does. A learnt epoch's owners are the workers
that reported each partition. Policies propose owners (``policies.propose_owners``); a
command carries them in ``assignment`` and ``replicas`` (``schemas.assignment.command_fields``)
and lists a move for every owner a partition gains, from its old primary.

A real-time app (``geops app --mode real-time``: BatchSummary ``join`` "real-time") has no
static partitions to move: every task holds the whole static side, reported as partition 0 of
every worker, and reads the publications partitions of its index. The engine then reports the
MLDC over the loads the tasks reported and never commands (``decisions.decide_real_time``,
``real_time``); epochs play no part (the app runs epoch 0 and reads no command). A summary of
the other kind switches back, learning the shape anew.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from distributor.adaptive import AdaptiveModel, Batch, field_number
from distributor.decisions import Outcome, Situation, decide, decide_adaptive, decide_real_time
from distributor.epoch import LAST_EPOCH, Epochs, last_epoch_reason
from distributor.errors import ShapeError
from distributor.loads import LONG_MAX, EpochLoads
from distributor.params import DEFAULTS, Params
from distributor.policies import Policy, make_policy
from distributor.records import PeriodResult
from distributor.validate import batch_problem, load_problem, move_problem
from schemas.assignment import (
    Owners,
    assignment_problem,
    command_fields,
    initial_assignment,
    owners_of,
    replicas_problem,
)

REJECT_MALFORMED = "malformed"          # missing field or wrong type: a producer bug
REJECT_FOREIGN = "foreign app"          # another app_id than the one this engine balances
REJECT_UNKNOWN_SHAPE = "unknown shape"  # P and W not known yet and too many loads held
REJECT_OUT_OF_RANGE = "out of range"    # partition or worker id outside 0..P-1 / 0..W-1
REJECT_SHAPE_MISMATCH = "shape mismatch"  # BatchSummary with another P or W
REJECT_STALE = "stale epoch"            # measured under an older assignment: expected
REJECT_DUPLICATE = "duplicate"          # the same (batch, partition, worker) again
REJECT_INVALID = "invalid restore"      # restore() with an unusable epoch or assignment
REJECT_TOO_LARGE = "too large"          # counts whose sums in the period overflow an Avro long
REAL_TIME_JOIN = "real-time"            # BatchSummary.join of a real-time app's task
# The app writes a batch's loads before its BatchSummary, so the loads of the very first batch
# arrive before P and W are known: they are held (up to this many) and counted once it comes.
MAX_HELD_LOADS = 100_000


class Engine:
    """Monitoring, detection and redistribution for one app's static partitions."""

    def __init__(self, params: Params | None = None, policy: Policy | None = None, *,
                 partitions: int | None = None, workers: int | None = None, app_id: str = ""):
        self.params = params or Params()
        self.policy = policy or make_policy(DEFAULTS["policy"])
        self.app_id = app_id
        self.partitions: int | None = None
        self.workers: int | None = None
        self.counters: dict[str, int] = {}
        self._epochs = Epochs()
        self._period = 0              # the period now open; end_period closes it
        self._total_items = 0
        self._loads: EpochLoads | None = None
        self._costs: list[float] = []
        self._held: list[Any] = []    # loads that came before the first BatchSummary
        self._judged = False          # a period with items has been closed
        # mode adaptive: the cost model, the loads of each batch not yet finished (batch ->
        # partition -> (worker, ns, items)), and whether a batch finished since the last period
        self._model: AdaptiveModel | None = None
        self._pending: dict[int, dict[int, tuple[set[int], int, int]]] = {}
        self._due = False
        self.real_time = False        # the app runs in real time: observed, never commanded
        if partitions is not None or workers is not None:
            if partitions is None or workers is None or partitions < 1 or workers < 1:
                raise ShapeError(f"give both partitions and workers (>= 1), got "
                                 f"P={partitions}, W={workers}")
            self._set_shape(partitions, workers)

    @classmethod
    def from_settings(cls, settings: Mapping[str, Any], **kwargs: Any) -> Engine:
        """An engine from the ``[distributor]`` config table (Table 1, metric, mode, policy)."""
        return cls(Params.from_settings(settings),
                   make_policy(settings.get("policy", DEFAULTS["policy"])), **kwargs)

    @property
    def epoch(self) -> int:
        """The epoch in force (or commanded and awaited)."""
        return self._epochs.epoch

    @property
    def highest_epoch(self) -> int:
        """The highest epoch seen; the next command gets this + 1 (above ``epoch`` after a
        resync)."""
        return self._epochs.highest

    @property
    def assignment(self) -> list[int] | None:
        """The assignment of ``epoch``; None while it is unknown (being learnt)."""
        known = self._known_owners()
        return None if known is None else [o[0] for o in known]

    @property
    def owners(self) -> list[Owners] | None:
        """Every partition's owners in ``epoch`` (primary first); None while unknown."""
        known = self._known_owners()
        return None if known is None else list(known)

    @property
    def awaiting(self) -> bool:
        """True while the engine waits for the app to report ``epoch``."""
        return self._epochs.awaiting

    @property
    def period_items(self) -> int:
        """Items counted in the open period (0 before P and W are known)."""
        return 0 if self._loads is None else self._loads.period_items

    @property
    def adaptive(self) -> bool:
        """True in mode adaptive: a decision at every batch boundary (``decision_due``)."""
        return self.params.mode == "adaptive"

    @property
    def decision_due(self) -> bool:
        """Mode adaptive: a batch of the app finished since the last ``end_period``; the caller
        closes a period now (the adaptive decision has no wall-clock period D)."""
        return self._due

    @property
    def first_period_due(self) -> bool:
        """True when the first period may close now, before its full D: ``first_period`` is
        ``min-items``, no period with items was judged and nothing changed the assignment yet,
        and at least M items (and at least one) are in. Callers close it at a batch boundary."""
        return (not self.adaptive and self.params.first_period == "min-items"
                and not self._judged
                and self._epochs.changed_at is None and not self._epochs.awaiting
                and self._loads is not None
                and self._loads.period_items >= max(1, self.params.min_items))

    # -- input --------------------------------------------------------------------------------

    def restore(self, epoch: Any, assignment: Sequence[int] | None = None,
                replicas: Sequence[Mapping[str, Any]] = ()) -> str | None:
        """Resume from the latest command (epoch, assignment and replicas) or from an epoch
        alone.

        Returns None when restored, else why not; never moves the epoch backwards.
        """
        if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < 0:
            return self._reject(REJECT_INVALID, f"epoch {epoch!r} is not an integer >= 0")
        if epoch >= LAST_EPOCH:
            return self._reject(REJECT_INVALID, last_epoch_reason(epoch))
        if epoch < self._epochs.epoch:
            return self._reject(REJECT_INVALID,
                                f"epoch {epoch} is older than {self._epochs.epoch}")
        values = None
        if assignment is not None:
            values = list(assignment) if isinstance(assignment, list | tuple) else []
            if not values or any(isinstance(w, bool) or not isinstance(w, int) for w in values):
                return self._reject(REJECT_INVALID, "assignment must be a non-empty list of "
                                    "worker ids")
            problem = assignment_problem(values, self.partitions or len(values),
                                         self.workers or max(values) + 1)
            if problem is None:
                try:
                    named = [int(w) for r in replicas or () for w in r["workers"]]
                except (KeyError, TypeError, ValueError):
                    return self._reject(REJECT_INVALID, "replicas must be a list of "
                                        "{partition, workers} records")
                problem = replicas_problem(values, list(replicas or ()),
                                           self.workers or 1 + max([*values, *named]))
            if problem:
                return self._reject(REJECT_INVALID, problem)
            if self.partitions is None:
                self.partitions = len(values)
        self._change_epoch(epoch, None if values is None else owners_of(values, replicas or ()))
        self._epochs.awaiting = True
        return None

    def observe_batch(self, summary: Any) -> str | None:
        """Learn P and W and the app's epoch from a BatchSummary record."""
        problem = batch_problem(summary)
        if problem:
            return self._reject(REJECT_MALFORMED, f"BatchSummary: {problem}")
        if self.app_id and summary["app_id"] != self.app_id:
            return self._reject(REJECT_FOREIGN, f"app {summary['app_id']!r}")
        if summary["epoch"] >= LAST_EPOCH:
            return self._reject(REJECT_OUT_OF_RANGE, f"BatchSummary: "
                                f"{last_epoch_reason(summary['epoch'])}")
        if (summary.get("join") == REAL_TIME_JOIN) != self.real_time:
            self._switch_kind(summary)
        if self.real_time:
            return self._observe_real_time(summary)
        shape = (summary["partitions"], summary["workers"])
        if self.workers is not None and shape != (self.partitions, self.workers):
            if not self._reshaped(summary):
                return self._reject(REJECT_SHAPE_MISMATCH, f"app reports P={shape[0]}, "
                                    f"W={shape[1]}; balancing P={self.partitions}, "
                                    f"W={self.workers}")
            return None  # its loads were of the old shape; the next batch is the first
        learnt = self.workers is None
        if learnt:
            self._set_shape(*shape)   # drops a restored assignment that does not fit
        stale = self._see_epoch(summary["epoch"])
        if learnt:
            held, self._held = self._held, []
            for record in held:
                self.observe_load(record)  # a rejection is counted like any other
        if stale:
            self._epochs.note_reported(summary["epoch"])
            # mode adaptive: a batch ended all the same, so the wait for the commanded epoch is
            # counted (and may end in a resync) in batches
            self._due = self._due or (self._model is not None and self._epochs.awaiting)
            return self._reject(REJECT_STALE, f"batch of epoch {summary['epoch']}, "
                                f"in force {self._epochs.epoch}")
        self._count("batches")
        if self._model is not None:
            self._finish_batch(summary)
        return None

    def _switch_kind(self, summary: Any) -> None:
        """The app is (again, or no longer) a real-time one: forget the shape and the loads
        of the other kind; the summary teaches the shape anew (loads held for want of a shape
        are its own)."""
        self.real_time = summary.get("join") == REAL_TIME_JOIN
        self._count("real-time app" if self.real_time else "micro-batch app")
        self.partitions = self.workers = None
        self._loads = None
        self._pending.clear()

    def _observe_real_time(self, summary: Any) -> str | None:
        """A real-time task's summary: learn (or relearn, after a restart with other
        workers) P and W, then count the loads held for it. Epochs are not followed."""
        shape = (summary["partitions"], summary["workers"])
        if shape != (self.partitions, self.workers):
            self._set_shape(*shape)
            held, self._held = self._held, []
            for record in held:
                self.observe_load(record)
        self._count("batches")
        return None

    def _reshaped(self, summary: Any) -> bool:
        """Adopt the app's new number of workers (its executors were lost or came back) when
        it comes with a newer epoch (the app takes the next one; or the one we commanded and
        await, when both chose it at once; or the one just adopted from its loads): the app
        chose the owners, so they are learnt from its loads. Another P, or no newer epoch, is
        a different or late app."""
        epoch, epochs = summary["epoch"], self._epochs
        # the batch's loads come first, so its epoch may be adopted from them already
        chosen = epoch == epochs.epoch and (epochs.awaiting or epoch == epochs.adopted)
        if summary["partitions"] != self.partitions or not (epoch > epochs.epoch or chosen):
            return False
        self._count("reshaped")
        epochs.owners = None
        self._set_shape(self.partitions, summary["workers"])
        self._change_epoch(summary["epoch"], None)
        epochs.awaiting = False
        return True

    def observe_move(self, report: Any) -> str | None:
        """Learn what moving static data costs from a MoveReport record (mode adaptive; the
        other modes only check and count it)."""
        problem = move_problem(report)
        if problem:
            return self._reject(REJECT_MALFORMED, f"MoveReport: {problem}")
        if self.app_id and report["app_id"] != self.app_id:
            return self._reject(REJECT_FOREIGN, f"app {report['app_id']!r}")
        self._count("move reports")
        if self._model is not None:
            self._model.observe_move(report["partitions_moved"], report["bytes"],
                                     field_number(report["duration_ms"]))
        return None

    def observe_load(self, record: Any) -> str | None:
        """Count one PartitionLoad record towards the current period, or say why not."""
        problem = load_problem(record)
        if problem:
            return self._reject(REJECT_MALFORMED, f"PartitionLoad: {problem}")
        if self.app_id and record["app_id"] != self.app_id:
            return self._reject(REJECT_FOREIGN, f"app {record['app_id']!r}")
        if self._loads is None or self.partitions is None or self.workers is None:
            if len(self._held) >= MAX_HELD_LOADS:
                return self._reject(REJECT_UNKNOWN_SHAPE, f"no BatchSummary yet: P and W "
                                    f"unknown and {MAX_HELD_LOADS} loads held already")
            self._held.append(record)
            self._count("held")
            return None
        p, w = record["partition"], record["worker"]
        if not 0 <= p < self.partitions:
            return self._reject(REJECT_OUT_OF_RANGE,
                                f"partition {p} outside 0..{self.partitions - 1}")
        if not 0 <= w < self.workers:
            return self._reject(REJECT_OUT_OF_RANGE, f"worker {w} outside 0..{self.workers - 1}")
        if record["epoch"] >= LAST_EPOCH:
            return self._reject(REJECT_OUT_OF_RANGE, last_epoch_reason(record["epoch"]))
        if self.real_time:
            return self._count_load(record)
        if self._see_epoch(record["epoch"]):
            self._epochs.note_reported(record["epoch"], p, w)
            return self._reject(REJECT_STALE, f"load of epoch {record['epoch']}, "
                                f"in force {self._epochs.epoch}")
        why = self._count_load(record)
        if why is not None:
            return why
        self._costs[p] = max(self._costs[p], float(record.get("static_bytes", 0)))
        if self._model is not None:
            seen = self._pending.setdefault(record["batch_id"], {}).get(p, (set(), 0, 0))
            self._pending[record["batch_id"]][p] = (
                seen[0] | {w}, seen[1] + record["processing_ns"], seen[2] + record["items"])
            self._model.costs.note_partition(p, record.get("static_bytes", 0),
                                             record.get("build_ns", 0))
        owners = self._epochs.owners
        if owners is not None and not self._epochs.learnt and w not in owners[p]:
            self._count("location mismatch")
        return None

    def _count_load(self, record: Any) -> str | None:
        """Add a checked load of the epoch in force to the period, or say why not."""
        assert self._loads is not None
        p, w = record["partition"], record["worker"]
        too_large = self._loads.overflow(p, record["items"], record["processing_ns"])
        if too_large:
            return self._reject(REJECT_TOO_LARGE, too_large)
        if not self._loads.add(record["batch_id"], p, w, record["items"],
                               record["processing_ns"]):
            return self._reject(REJECT_DUPLICATE, f"batch {record['batch_id']} partition {p} "
                                f"worker {w} seen before")
        self._total_items += record["items"]
        if self._total_items > LONG_MAX:   # a statistic: saturate rather than refuse loads
            self._total_items = LONG_MAX
            self._count("total items saturated")
        self._count("loads")
        return None

    # -- the period ---------------------------------------------------------------------------

    def end_period(self, now_ms: int) -> PeriodResult:
        """Close the current period: judge its loads and maybe command a redistribution."""
        situation = Situation(now_ms, self._period, self.params, self.policy, self.app_id,
                              self._epochs, self.partitions, self.workers, self._loads,
                              self._known_owners(), self._costs, self._total_items)
        if self.real_time and self._loads is not None:
            outcome = decide_real_time(situation)
        elif self.adaptive:
            outcome = decide_adaptive(situation, self._model)
        else:
            outcome = decide(situation)
        result = self._apply(outcome)
        self._due = False
        self._period += 1
        return result

    def _apply(self, outcome: Outcome) -> PeriodResult:
        """Carry out a period's decision: command, resync, or go on to the next period."""
        self._judged = self._judged or outcome.judged
        if outcome.decision == "rebalance":
            assert outcome.command is not None and outcome.proposal is not None
            self._change_epoch(outcome.command["epoch"], outcome.proposal)
            self._epochs.awaiting = True
        elif outcome.decision == "resync":
            self._resync()
        elif outcome.next_period:
            assert self._loads is not None
            self._loads.next_period()
        return PeriodResult(outcome.status, outcome.command)

    def _finish_batch(self, summary: dict[str, Any]) -> None:
        """Mode adaptive: the BatchSummary ends its batch; hand the batch to the model."""
        assert self._model is not None and self.partitions is not None
        assert self.workers is not None
        batch_id = summary["batch_id"]
        parts = self._pending.pop(batch_id, {})
        for old in [b for b in self._pending if b < batch_id]:  # lost: never finished
            del self._pending[old]
        known = self._known_owners()
        owners = [tuple(sorted(parts[p][0])) if p in parts else (known[p] if known else (0,))
                  for p in range(self.partitions)]
        batch = Batch(batch_id, summary["epoch"],
                      tuple(float(parts[p][1]) if p in parts else 0.0
                            for p in range(self.partitions)),
                      tuple(owners), self.workers, sum(v[2] for v in parts.values()),
                      field_number(summary.get("duration_ms")),
                      field_number(summary.get("join_stage_ms")))
        if self._model.add(batch, summary.get("join") if isinstance(summary.get("join"), str)
                           else None):
            self._due = True

    def _resync(self) -> None:
        """Go back to the newest epoch the app reports, keeping the highest epoch seen."""
        epochs = self._epochs
        owners = epochs.resync_owners(self.partitions)
        self._count("resyncs")
        self._change_epoch(epochs.reported, owners)
        epochs.learnt = owners is not None

    # -- helpers ------------------------------------------------------------------------------

    def _reject(self, kind: str, detail: str) -> str:
        self._count(kind)
        return f"{kind}: {detail}"

    def _count(self, key: str) -> None:
        self.counters[key] = self.counters.get(key, 0) + 1

    def _set_shape(self, partitions: int, workers: int) -> None:
        self.partitions, self.workers = partitions, workers
        self._loads = EpochLoads(partitions)
        self._costs = [0.0] * partitions
        if self.adaptive:
            p = self.params
            self._model = AdaptiveModel(partitions, workers, min_saving=p.min_saving,
                                        safety_margin=p.safety_margin,
                                        stability_tolerance=p.stability_tolerance)
        epochs = self._epochs
        if epochs.owners is not None and self._owners_problem(epochs.owners, partitions, workers):
            epochs.owners = None   # the app cannot run it either; learn what it runs
            self._count("restored assignment dropped")
        if epochs.owners is None and epochs.epoch == 0:
            epochs.owners = [(w,) for w in initial_assignment(partitions, workers)]

    @staticmethod
    def _owners_problem(owners: Sequence[Owners], partitions: int, workers: int) -> str | None:
        assignment = [o[0] for o in owners]
        return assignment_problem(assignment, partitions, workers) or replicas_problem(
            assignment, command_fields(owners)[1], workers)

    def _change_epoch(self, epoch: int, owners: Sequence[Owners] | None) -> None:
        """Make ``epoch`` the one in force; start over the loads and the cool-down."""
        shape = (None if self.workers is None or self.partitions is None
                 else (self.partitions, self.workers))
        self._epochs.change(epoch, owners, self._period, shape)
        if self._loads is not None:
            self._loads.reset()
        if self._model is not None:
            self._model.new_epoch()
        self._pending.clear()

    def _see_epoch(self, epoch: int) -> bool:
        """Track the epoch the app reports; True when the record is of an older epoch."""
        epochs = self._epochs
        if epoch > epochs.epoch:
            self._count("adopted epochs")
            self._change_epoch(epoch, None)
            epochs.adopted = epoch
        elif epoch == epochs.epoch:
            epochs.awaiting = False
        return epoch < epochs.epoch

    def _known_owners(self) -> list[Owners] | None:
        """The owners in force (``Epochs.known_owners``)."""
        return self._epochs.known_owners(self._loads, self.partitions)
