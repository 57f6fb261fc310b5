"""The Dynamic Distributor as a state machine with no I/O (Algorithm 1 of the paper).

A Kafka loop (or a trace replay) drives it::

    engine = Engine(Params(mode="dynamic"), make_policy("greedy"))
    engine.restore(cmd["epoch"], cmd["assignment"], cmd["replicas"])  # latest command, if any
    ... for each metrics record: engine.observe_batch(r) / engine.observe_load(r)
    ... every D seconds: result = engine.end_period(now_ms)
        produce result.status to the status topic, result.command (if any) to `control`

Epochs. The engine judges only the loads of the assignment epoch in force; records of older
epochs are counted and ignored. After it commands epoch e+1 it waits (decision ``waiting``)
until the app reports e+1. If the app reports an epoch newer than the engine's (another
distributor, or a restart that could not read the control topic), the engine adopts it and
learns that epoch's assignment from the ``worker`` of the records. The next command's epoch is
always one more than the highest epoch seen, so an epoch is never reused. A restore, an adoption
and a command all start the N-period cool-down.

The engine never waits forever. When the app has not reported an awaited epoch (commanded, or
restored from the control topic) within ``resync_periods`` periods but does report an older one
(it rejected the command, e.g. a forged one with workers it does not have, or never received
it), the period's decision is ``resync``: the engine goes back to the newest epoch the app
reports, with the assignment its records show (learnt from their ``worker`` if not every
partition reported yet), and judges that epoch's loads again; its next command still gets an
epoch above every epoch seen, so the app, which applies only newer epochs, accepts it. Epochs
are Avro longs: an epoch of 2**63 - 1 leaves no room for a newer command, so it is refused in a
restore and in the app's records, and loads whose sums in a period would not fit a long are
refused (``too large``); the status and commands the engine writes therefore always encode.

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
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from distributor.adaptive import AdaptiveModel, Batch, number
from distributor.detection import Verdict, judge
from distributor.loads import LONG_MAX, EpochLoads
from distributor.mldc import mldc, owner_loads, owners_mldc
from distributor.params import DEFAULTS, Params
from distributor.policies import Policy, added_owners, make_policy, propose_owners
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
# The last epoch an Avro long holds: no command can follow it, so no input may bring it.
LAST_EPOCH = LONG_MAX
# The app writes a batch's loads before its BatchSummary, so the loads of the very first batch
# arrive before P and W are known: they are held (up to this many) and counted once it comes.
MAX_HELD_LOADS = 100_000


@dataclass(frozen=True)
class PeriodResult:
    """What one period produced: a DistributorStatus and maybe a RebalanceCommand (dicts)."""

    status: dict[str, Any]
    command: dict[str, Any] | None = None


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
        self._epoch = 0
        self._highest = 0             # the highest epoch restored, adopted or commanded
        self._adopted: int | None = None  # the last epoch adopted from the app's records
        self._owners: list[Owners] | None = None   # per partition, primary first
        self._learnt = False          # owners learnt from the loads (not commanded/restored)
        # While awaiting: the newest older epoch the app still reports, and where its loads put
        # each partition (partition -> workers); what a resync goes back to.
        self._reported: int | None = None
        self._reported_locations: dict[int, set[int]] = {}
        self._awaiting = False        # commanded or restored an epoch the app has not reported
        self._changed_at: int | None = None  # period of the last assignment change
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
        if partitions is not None or workers is not None:
            if partitions is None or workers is None or partitions < 1 or workers < 1:
                raise ValueError(f"give both partitions and workers (>= 1), got "
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
        return self._epoch

    @property
    def highest_epoch(self) -> int:
        """The highest epoch seen; the next command gets this + 1 (above ``epoch`` after a
        resync)."""
        return self._highest

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
        return self._awaiting

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
                and self._changed_at is None and not self._awaiting
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
            return self._reject(REJECT_INVALID, self._last_epoch(epoch))
        if epoch < self._epoch:
            return self._reject(REJECT_INVALID, f"epoch {epoch} is older than {self._epoch}")
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
        self._awaiting = True
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
                                f"{self._last_epoch(summary['epoch'])}")
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
            self._note_reported(summary["epoch"])
            # mode adaptive: a batch ended all the same, so the wait for the commanded epoch is
            # counted (and may end in a resync) in batches
            self._due = self._due or (self._model is not None and self._awaiting)
            return self._reject(REJECT_STALE, f"batch of epoch {summary['epoch']}, "
                                f"in force {self._epoch}")
        self._count("batches")
        if self._model is not None:
            self._finish_batch(summary)
        return None

    def _reshaped(self, summary: Any) -> bool:
        """Adopt the app's new number of workers (its executors were lost or came back) when
        it comes with a newer epoch (the app takes the next one; or the one we commanded and
        await, when both chose it at once; or the one just adopted from its loads): the app
        chose the owners, so they are learnt from its loads. Another P, or no newer epoch, is
        a different or late app."""
        epoch = summary["epoch"]
        # the batch's loads come first, so its epoch may be adopted from them already
        chosen = epoch == self._epoch and (self._awaiting or epoch == self._adopted)
        if summary["partitions"] != self.partitions or not (epoch > self._epoch or chosen):
            return False
        self._count("reshaped")
        self._owners = None
        self._set_shape(self.partitions, summary["workers"])
        self._change_epoch(summary["epoch"], None)
        self._awaiting = False
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
                                     number(report["duration_ms"]))
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
            return self._reject(REJECT_OUT_OF_RANGE, self._last_epoch(record["epoch"]))
        if self._see_epoch(record["epoch"]):
            self._note_reported(record["epoch"], p, w)
            return self._reject(REJECT_STALE, f"load of epoch {record['epoch']}, "
                                f"in force {self._epoch}")
        too_large = self._loads.overflow(p, record["items"], record["processing_ns"])
        if too_large:
            return self._reject(REJECT_TOO_LARGE, too_large)
        if not self._loads.add(record["batch_id"], p, w, record["items"],
                               record["processing_ns"]):
            return self._reject(REJECT_DUPLICATE, f"batch {record['batch_id']} partition {p} "
                                f"worker {w} seen before")
        self._costs[p] = max(self._costs[p], float(record.get("static_bytes", 0)))
        if self._model is not None:
            seen = self._pending.setdefault(record["batch_id"], {}).get(p, (set(), 0, 0))
            self._pending[record["batch_id"]][p] = (
                seen[0] | {w}, seen[1] + record["processing_ns"], seen[2] + record["items"])
            self._model.costs.note_partition(p, record.get("static_bytes", 0),
                                             record.get("build_ns", 0))
        if self._owners is not None and not self._learnt and w not in self._owners[p]:
            self._count("location mismatch")
        self._total_items += record["items"]
        if self._total_items > LONG_MAX:   # a statistic: saturate rather than refuse loads
            self._total_items = LONG_MAX
            self._count("total items saturated")
        self._count("loads")
        return None

    # -- the period ---------------------------------------------------------------------------

    def end_period(self, now_ms: int) -> PeriodResult:
        """Close the current period: judge its loads and maybe command a redistribution."""
        if self.adaptive:
            result = self._close_adaptive(now_ms, self._period)
        else:
            result = self._close(now_ms, self._period)
        self._due = False
        self._period += 1
        return result

    def _close(self, now_ms: int, period: int) -> PeriodResult:
        loads = self._loads
        if loads is None or self.workers is None:
            status = self._status(now_ms, period, [], 0, None, None,
                                  judge(self.params, None, None, 0, self._since(period)),
                                  "waiting", "no BatchSummary yet: P and W unknown")
            return PeriodResult(status)
        assignment = self._known_owners()
        partition_loads = loads.loads(self.params.metric)
        locations = assignment or [loads.owners(p) or (0,) for p in range(len(partition_loads))]
        per_worker = owner_loads(partition_loads, locations, self.workers)
        current = mldc(per_worker)
        proposal = predicted = None
        if current is not None and assignment is not None and not self._awaiting:
            proposal = propose_owners(self.policy, partition_loads, assignment, self.workers,
                                      self._costs)
            predicted = owners_mldc(partition_loads, proposal, self.workers)
        verdict = judge(self.params, current, predicted, loads.period_items, self._since(period))
        self._judged = self._judged or loads.period_items > 0
        if self._awaiting:
            decision, reason = self._waiting(period)
        elif assignment is None:
            decision = "none"
            reason = (f"assignment of epoch {self._epoch} not fully known yet "
                      f"({len(loads.locations)} of {self.partitions} partitions seen); "
                      f"{verdict.reason}")
        elif verdict.rebalance and self.params.mode != "observe" and self._highest >= LAST_EPOCH:
            decision = "none"
            reason = f"all conditions held, but {self._last_epoch(self._highest)}"
        elif verdict.rebalance:
            decision = "observe" if self.params.mode == "observe" else "rebalance"
            reason = f"all conditions held: {verdict.reason}"
        else:
            decision, reason = "none", verdict.reason
        if proposal is not None and assignment is not None and proposal != assignment:
            reason += "; " + self._proposal_note(assignment, proposal)
        status = self._status(now_ms, period, per_worker, loads.period_items, current,
                              predicted, verdict, decision, reason)
        command = None
        if decision == "rebalance":
            assert assignment is not None and proposal is not None and current is not None
            assert predicted is not None
            command = self._command(now_ms, assignment, proposal, current, predicted)
            self._change_epoch(command["epoch"], proposal)
            self._awaiting = True
        elif decision == "resync":
            self._resync()
        else:
            loads.next_period()
        return PeriodResult(status, command)

    def _close_adaptive(self, now_ms: int, period: int) -> PeriodResult:
        """Mode adaptive: judge the batches so far with the cost model (distributor.adaptive).

        The status's Table 1 fields carry the adaptive conditions: ``threshold`` is
        ``min_saving``, ``over_threshold`` the saving is worth it, ``enough_items`` the
        estimate is confident (two batches of the pattern at least), ``cooled_down`` the
        assignment in force has settled, ``improves_enough`` the saving over the horizon pays
        for the move; ``worker_loads`` are mean processing ns per batch of the current pattern.
        """
        loads, model = self._loads, self._model
        if loads is None or model is None or self.workers is None:
            verdict = Verdict(False, False, False, None, "no BatchSummary yet")
            return PeriodResult(self._status(now_ms, period, [], 0, None, None, verdict,
                                             "waiting", "no BatchSummary yet: P and W unknown"))
        items = loads.period_items
        assignment = self._known_owners()
        if self._awaiting:
            decision, reason = self._waiting(period)
            verdict = Verdict(False, items > 0, False, None, reason)
            status = self._status(now_ms, period, [], items, None, None, verdict, decision,
                                  reason)
            if decision == "resync":
                self._resync()
            else:
                loads.next_period()
            return PeriodResult(status)
        if assignment is None:
            reason = (f"assignment of epoch {self._epoch} not fully known yet "
                      f"({len(loads.locations)} of {self.partitions} partitions seen)")
            verdict = Verdict(False, False, False, None, reason)
            loads.next_period()
            return PeriodResult(self._status(now_ms, period, [], items, None, None, verdict,
                                             "none", reason))
        judged = model.assess(assignment, self.policy)
        verdict = Verdict(judged.worth, judged.confident, judged.settled, judged.pays,
                          judged.reason)
        self._judged = self._judged or items > 0
        if judged.rebalance and self._highest >= LAST_EPOCH:
            decision, reason = "none", (f"all conditions held, but "
                                        f"{self._last_epoch(self._highest)}")
        elif judged.rebalance:
            decision, reason = "rebalance", f"all conditions held: {judged.reason}"
        else:
            decision, reason = "none", judged.reason
        status = self._status(now_ms, period, judged.per_worker, items, judged.mldc,
                              judged.mldc_predicted, verdict, decision, reason)
        status["threshold"] = float(self.params.min_saving)
        if decision != "rebalance":
            loads.next_period()
            return PeriodResult(status)
        assert judged.mldc is not None and judged.mldc_predicted is not None
        command = self._command(now_ms, assignment, judged.proposal, judged.mldc,
                                judged.mldc_predicted)
        command["reason"] = (f"adaptive: {judged.reason}; by policy {self.policy.name}")
        self._change_epoch(command["epoch"], judged.proposal)
        self._awaiting = True
        return PeriodResult(status, command)

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
                      number(summary.get("duration_ms")), number(summary.get("join_stage_ms")))
        if self._model.add(batch, summary.get("join") if isinstance(summary.get("join"), str)
                           else None):
            self._due = True

    def _waiting(self, period: int) -> tuple[str, str]:
        """The decision while awaiting ``epoch``: go on waiting, or resync once it took too
        long and the app reports an older epoch to go back to."""
        since = self._since(period) or 0
        limit = self.params.resync_periods
        waiting = f"the app has not reported epoch {self._epoch} for {since} period(s)"
        if since < limit:
            return "waiting", (f"waiting for the app to report epoch {self._epoch} ({since} "
                               f"period(s) so far; re-synchronising after {limit})")
        if self._reported is None:
            return "waiting", (f"{waiting} and reports no other epoch either: nothing to "
                               f"re-synchronise with; still waiting")
        assert self.partitions is not None
        seen = len(self._reported_locations)
        known = ("its assignment as the loads show it" if seen == self.partitions else
                 f"its assignment to be learnt from its loads ({seen} of {self.partitions} "
                 f"partitions seen)")
        return "resync", (f"{waiting} (limit {limit}; did it reject the command?) but reports "
                          f"epoch {self._reported}: re-synchronised with epoch {self._reported} "
                          f"and {known}; the next command gets epoch {self._highest + 1}")

    def _resync(self) -> None:
        """Go back to the newest epoch the app reports, keeping the highest epoch seen."""
        assert self._reported is not None and self.partitions is not None
        where = self._reported_locations
        owners = ([tuple(sorted(where[p])) for p in range(self.partitions)]
                  if len(where) == self.partitions else None)
        self._count("resyncs")
        self._change_epoch(self._reported, owners)
        self._learnt = owners is not None

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
        if self._owners is not None and self._owners_problem(self._owners, partitions, workers):
            self._owners = None   # the app cannot run it either; learn what it runs
            self._count("restored assignment dropped")
        if self._owners is None and self._epoch == 0:
            self._owners = [(w,) for w in initial_assignment(partitions, workers)]

    @staticmethod
    def _owners_problem(owners: Sequence[Owners], partitions: int, workers: int) -> str | None:
        assignment = [o[0] for o in owners]
        return assignment_problem(assignment, partitions, workers) or replicas_problem(
            assignment, command_fields(owners)[1], workers)

    def _change_epoch(self, epoch: int, owners: Sequence[Owners] | None) -> None:
        """Make ``epoch`` the one in force; start over the loads and the cool-down."""
        self._epoch = epoch
        self._highest = max(self._highest, epoch)
        self._owners = None if owners is None else [tuple(o) for o in owners]
        self._learnt = False
        self._reported, self._reported_locations = None, {}
        if owners is None and epoch == 0 and self.workers is not None:
            assert self.partitions is not None
            self._owners = [(w,) for w in initial_assignment(self.partitions, self.workers)]
        if self._loads is not None:
            self._loads.reset()
        if self._model is not None:
            self._model.new_epoch()
        self._pending.clear()
        self._awaiting = False
        self._changed_at = self._period

    def _see_epoch(self, epoch: int) -> bool:
        """Track the epoch the app reports; True when the record is of an older epoch."""
        if epoch > self._epoch:
            self._count("adopted epochs")
            self._change_epoch(epoch, None)
            self._adopted = epoch
        elif epoch == self._epoch:
            self._awaiting = False
        return epoch < self._epoch

    def _note_reported(self, epoch: int, partition: int | None = None,
                       worker: int | None = None) -> None:
        """While awaiting, remember the newest older epoch the app reports and, from its loads,
        which worker runs each partition."""
        if not self._awaiting:
            return
        if self._reported is None or epoch > self._reported:
            self._reported, self._reported_locations = epoch, {}
        if epoch == self._reported and partition is not None and worker is not None:
            self._reported_locations.setdefault(partition, set()).add(worker)

    @staticmethod
    def _last_epoch(epoch: int) -> str:
        return (f"epoch {epoch} is the last (or beyond the last) an Avro long holds: no newer "
                f"command could follow it")

    def _known_owners(self) -> list[Owners] | None:
        """The owners in force, completing learnt ones once every partition reported (a
        partition reported by several workers in this epoch is replicated); learnt owners
        follow the loads as more workers report."""
        loads = self._loads
        if loads is not None and (self._owners is None or self._learnt) and (
                len(loads.reporters) == self.partitions):
            self._owners = [loads.owners(p) for p in range(self.partitions)]
            self._learnt = True
        return self._owners

    def _since(self, period: int) -> int | None:
        return None if self._changed_at is None else period - self._changed_at

    def _status(self, now_ms: int, period: int, per_worker: list[float], items: int,
                current: float | None, predicted: float | None, verdict: Verdict, decision: str,
                reason: str) -> dict[str, Any]:
        return {
            "time": now_ms,
            "period": period,
            "epoch": self._epoch,
            "metric": self.params.metric,
            "mode": self.params.mode,
            "worker_loads": per_worker,
            "items": items,
            "total_items": self._total_items,
            "mldc": current,
            "mldc_predicted": predicted,
            "threshold": float(self.params.threshold),
            "over_threshold": verdict.over_threshold,
            "enough_items": verdict.enough_items,
            "cooled_down": verdict.cooled_down,
            "improves_enough": verdict.improves_enough,
            "decision": decision,
            "reason": reason,
        }

    def _proposal_note(self, old: Sequence[Owners], new: Sequence[Owners]) -> str:
        """What the policy's proposal changes: owners added, partitions replicated."""
        added = added_owners(old, new)
        replicated = sum(1 for o in new if len(o) > 1)
        return (f"policy {self.policy.name} proposes {len(added)} owner(s) added (moves and "
                f"new replicas), {replicated} partition(s) replicated")

    def _command(self, now_ms: int, old: Sequence[Owners], new: Sequence[Owners],
                 before: float, predicted: float) -> dict[str, Any]:
        moves = added_owners(old, new)
        assignment, replicas = command_fields(new)
        dropped = sum(1 for a, b in zip(old, new, strict=True) for w in a if w not in b)
        copies = sum(len(r["workers"]) for r in replicas)
        shape = (f" ({len(replicas)} partition(s) replicated on {copies} owners, {dropped} "
                 f"owner(s) dropped)" if replicas or dropped else "")
        return {
            "epoch": self._highest + 1,
            "assignment": assignment,
            "moves": [{"partition": p, "from_worker": a, "to_worker": b} for p, a, b in moves],
            "mldc_before": before,
            "mldc_predicted": predicted,
            "metric": self.params.metric,
            "reason": (f"MLDC {before:.3f} > threshold {self.params.threshold}; predicted "
                       f"{predicted:.3f} after {len(moves)} move(s){shape} by policy "
                       f"{self.policy.name}"),
            "time": now_ms,
            "app_id": self.app_id,
            "replicas": replicas,
        }
