"""One micro-batch: apply control, route, join, match, merge, write matches and metrics.

Runs on the driver as the ``foreachBatch`` function. All spatial work happens in tasks
(``app.batch.tasks``); the driver merges partial results with NumPy and writes the outputs.
Matches and metrics are in Kafka before the function returns, so Spark only commits the batch's
offsets after its output: at-least-once (a replayed batch writes the same records again), or
exactly-once (one transaction per batch; a replayed batch whose transaction committed is not
written again): ``app.batch.output``.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import numpy as np
from pyspark import RDD
from pyspark.serializers import BatchedSerializer, CPickleSerializer
from pyspark.sql import DataFrame

from app.batch.collect import Collected
from app.batch.output import AtLeastOnce, ExactlyOnce, TasksWritten, batch_output
from app.batch.parts import KafkaSide, RunnerSettings, StaticParts
from app.batch.task_output import TaskOutput
from app.batch.tasks import (
    JoinContext,
    RouteContext,
    decode_route_rows,
    join,
    read_decode_route,
    read_route_join,
    warm_indexes,
)
from app.events.positions import bucket_records, position_hits
from app.faults import KillPoint
from app.joins import JOIN_MODES
from app.metrics import latency_summary, layout_record
from app.read.offsetlog import batch_end_offsets, batch_start_offsets, lost_ranges
from app.read.ranges import BatchRanges
from app.static.broadcasts import ChangeBroadcasts
from app.static.side import by_worker
from app.static.snapshot_writer import Changed
from geops.strategies import merge
from kafkaio.errors import Aborted, DataLoss, KafkaOutage
from kafkaio.lease import LeaseKeeper
from schemas import codec
from schemas.assignment import Owners, command_fields, moves_between, owners_for_workers
from schemas.match_encoder import encode_matches

log = logging.getLogger("geops.app")

EXPECTED_FAILURES = {"KafkaOutage": KafkaOutage, "DataLoss": DataLoss}
# Pending subscription deltas (each broadcast once, ``app.static.broadcasts``) are what every
# matcher built from a payload (STRL: every batch) catches up with; past ``fold_bytes`` (and a
# tenth of the static side), or once one has waited FOLD_AGE_BATCHES, they are folded into the
# partitions' payloads. A fold leaves the newest REBASE_KEEP_CHANGES pending under STAL: a
# worker's tasks run in whichever Python process is free, and a resident matcher that already
# applied a change must not rebuild because it was folded. Past REBASE_ROUTER_DELTAS changes
# the replicated router is sent anew (its deltas are applied once per process, so they cost
# little while pending; a new router over every subscription costs seconds at 1M).
FOLD_AGE_BATCHES = 20
# An aborted transaction (exactly-once) leaves nothing of the batch visible; its output, still
# in memory, is written again up to this many times before the batch fails.
WRITE_ATTEMPTS = 3
REBASE_KEEP_CHANGES = 3
REBASE_ROUTER_DELTAS = 64
# A PartitionLayout (where the static partitions lie, for maps) goes out at start and again after
# the first batch this long since the last, so a reader of the last minutes of metrics finds one.
LAYOUT_EVERY_S = 30.0
# The columns of Spark's Kafka source a read task takes, in the order of ``app.read.ranges.Record``.
READ_COLUMNS = ("topic", "partition", "offset", "key", "value")


@dataclass
class BatchState:
    """What changes from batch to batch. ``owners``: every owner of each partition (several
    for a replicated one, the primary first); ``assignment``: the primary owners."""

    epoch: int
    owners: list[Owners]
    last_input: float = field(default_factory=time.monotonic)
    # when Kafka last answered the query (monotonic): the query's status showed it not waiting
    # for offsets; a query the connector failed for Kafka's silence counts the outage from here
    kafka_answered: float = field(default_factory=time.monotonic)
    batches: int = 0
    records: int = 0
    busy: bool = False

    @property
    def assignment(self) -> list[int]:
        return [o[0] for o in self.owners]

    def replicas(self) -> dict[int, Owners]:
        """The partitions owned by more than one worker: pid -> owners."""
        return {p: o for p, o in enumerate(self.owners) if len(o) > 1}


class BatchRunner:
    """The foreachBatch function of the app's streaming query."""

    def __init__(self, settings: RunnerSettings, kafka: KafkaSide, side: StaticParts,
                 state: BatchState, workers: int):
        self.settings = settings
        self.kafka = kafka
        self.side = side
        self.state = state
        self.workers = workers  # the join workers now (``_follow_workers`` changes them)
        self.wrote_positions = False  # whether a batch wrote positions (app.events.positions)
        self.clock = 0  # the latest event time of a position seen (app.events.positions)
        # how the batch being written was read: in one stage, or in two by whom (the log line)
        self._stages = ""
        self._changed_in: dict[int, int] = {}  # subscription change seq -> the batch it came in
        self.sc = side.static.sc
        self.shipped = ChangeBroadcasts(self.sc)  # the pending changes, once each
        self.disjoint = (side.live.disjoint_ids() if side.live is not None
                         else side.strategy.disjoint_ids())
        self.partitions = side.strategy.num_partitions
        self.output: AtLeastOnce | ExactlyOnce | None = None  # ``start_output``
        self.lease: LeaseKeeper | None = None  # checked before each batch's output
        self.codec = codec()
        self._kill = KillPoint.from_env()
        self._layout_sent: float | None = None  # time.monotonic() of the last PartitionLayout
        # the assignment the app chose itself (``_follow_workers``), until a batch wrote it
        self._announce: dict[str, Any] | None = None
        self._read_columns: Any = None  # Java Seq of READ_COLUMNS (``_kafka_rows``)

    def start_output(self, lease: LeaseKeeper | None = None) -> None:
        """Open the batches' output, once this process may write (a standby: once it holds
        the lease): under exactly-once its ``init_transactions`` fences the producer of any
        older process of this app. ``lease``: checked before each batch's output."""
        settings, kafka = self.settings, self.kafka
        self.lease = lease
        self.output = batch_output(settings.delivery, kafka.conf, settings.outage_limit,
                                   app_id=settings.app_id, checkpoint=settings.checkpoint,
                                   publications=kafka.topics.publications,
                                   outputs=(kafka.topics.matches, kafka.topics.metrics))

    def __call__(self, df: DataFrame, batch_id: int) -> None:
        """Process batch ``batch_id``, the Kafka records ``df`` of Spark's connector."""
        self.state.busy = True
        try:
            self._run(batch_id, df)
        finally:
            self.state.busy = False

    def _apply_control(self, batch_id: int) -> dict[str, Any] | None:
        """Apply a new command; its MoveReport, which goes out with the batch's output."""
        cmd = self.kafka.control.poll(self.state.epoch)
        if cmd is None:
            return None
        return self._adopt(batch_id, cmd.owners, cmd.epoch)

    def _follow_workers(self, batch_id: int) -> dict[str, Any] | None:
        """When executors were lost or came back, run as many workers as they carry
        (``app.batch.workers``): the partitions of dropped workers go to those left, or some move
        to workers added, under a new epoch. The new assignment goes to the control topic with
        the output of the next batch written (so a restarted app or distributor resumes it),
        its MoveReport with this batch's metrics."""
        if self.side.follow is None:
            return None
        workers = self.side.follow.now(self.workers)
        if workers == self.workers:
            return None
        state = self.state
        old = list(state.owners)
        owners = owners_for_workers(old, workers, self.side.static.sizes + 1)
        epoch = state.epoch + 1
        log.warning("batch %d: the executors now carry %d join worker(s), not %d; epoch %d "
                    "moves the partitions of the workers dropped or to those added",
                    batch_id, workers, self.workers, epoch)
        self.workers = workers
        self.kafka.control.workers = workers
        moved = self._adopt(batch_id, owners, epoch, workers)
        assignment, replicas = command_fields(owners)
        command = {"epoch": epoch, "assignment": assignment,
                   "moves": [{"partition": p, "from_worker": a, "to_worker": b}
                             for p, a, b in moves_between([o[0] for o in old], assignment)],
                   "mldc_before": math.nan, "mldc_predicted": math.nan, "metric": "",
                   "reason": f"the app's executors now carry {workers} join worker(s)",
                   "time": _now_ms(), "app_id": self.settings.app_id, "replicas": replicas}
        self._announce = command
        return moved

    def _adopt(self, batch_id: int, owners: Sequence[Owners], epoch: int,
               workers: int | None = None) -> dict[str, Any]:
        """Put ``owners`` in force from this batch; the MoveReport of the change."""
        move = self.side.static.apply(owners, epoch, workers)
        self.state.epoch = epoch
        self.state.owners = list(owners)
        replicated = self.state.replicas()
        log.info("epoch %d in force from batch %d: %d partitions moved or replicated (%d "
                 "bytes, %.0f ms), %d copies dropped; %s", epoch, batch_id,
                 len(move.partitions), move.bytes, move.duration_ms, len(move.dropped),
                 f"replicated {_owners_text(replicated)}" if replicated else "no replicas")
        return {"app_id": self.settings.app_id, "batch_id": batch_id, "epoch": epoch,
                "partitions_moved": move.partitions, "bytes": move.bytes,
                "duration_ms": move.duration_ms, "time": _now_ms()}

    def warm_up(self) -> tuple[int, float]:
        """Before the query starts: fork the executors' Python processes, load the matching
        code and the router in them and build every resident index
        (``app.batch.tasks.warm_indexes``), so the first publications wait for none of it. (indexes
        built, seconds)"""
        t0 = time.perf_counter()
        copies = max(1, self.sc.defaultParallelism)
        static = self.side.static
        ctx = JoinContext(self.side.strategy.name, self.settings.join_mode, static.residency(),
                          tuple(static.base_seq))
        spread = (self.side.static.for_batch()
                  .flatMap(lambda kv: [(kv[0] * copies + c, kv[1]) for c in range(copies)])
                  .partitionBy(self.workers * copies, by_worker))
        built = sum(spread.mapPartitionsWithIndex(
            partial(warm_indexes, ctx, self.side.router, copies)).collect())
        return built, time.perf_counter() - t0

    def _apply_subscriptions(self, batch_id: int) -> None:
        """The subscription changes recorded for this batch, applied incrementally."""
        if self.kafka.feed is None or self.side.live is None:
            return
        t0 = time.perf_counter()
        change = self.kafka.feed.changes(batch_id)
        if not change:
            return
        t1 = time.perf_counter()
        result = self.side.live.apply(change.upserts, change.deletes)
        if self.side.fences is not None:
            self.side.fences.apply(change.upserts.ids, change.detect, change.deletes,
                                   change.upserts.geoms)
        self.shipped.publish(self.side.live.seq, result)
        self.disjoint = self.side.live.disjoint_ids()
        if self.side.snapshots is not None:  # queued: the writer's thread does the work
            self.side.snapshots.changed(Changed(change.upserts, change.detect, change.deletes,
                                                result.partitions,
                                                dict(self.kafka.feed.position)))
        t2 = time.perf_counter()
        self._changed_in[self.side.live.seq] = batch_id
        log.info("batch %d: subscriptions %d added, %d updated, %d removed (%d partitions "
                 "changed; %d live; read %.0f ms, applied %.0f ms)", batch_id, result.added,
                 result.updated, result.removed, len(result.partitions), len(self.side.live),
                 (t1 - t0) * 1e3, (t2 - t1) * 1e3)

    def _fold(self, batch_id: int) -> None:
        """Fold pending subscription changes into the static side when they have grown past
        the limit, or have waited ``FOLD_AGE_BATCHES``: every batch pays for what is pending
        (STRL applies it to every partition it builds), also when no new change comes."""
        live = self.side.live
        if live is None:
            return
        limit = max(self.settings.fold_bytes, self.side.static.total_bytes // 10)
        waited = batch_id - min((self._changed_in[d.seq] for ds in live.pending.values()
                                 for d in ds), default=batch_id)  # by the oldest pending
        if live.pending_bytes() > limit:
            keep = REBASE_KEEP_CHANGES if JOIN_MODES[self.settings.join_mode].resident else 0
            upto, why = live.fold_point(keep, limit // 2), "over the limit"
        elif waited >= FOLD_AGE_BATCHES:
            upto, why = live.seq, f"pending for {waited} batches"
        else:
            upto = None
        if upto is not None:
            t0 = time.perf_counter()
            deltas = live.rebase(upto)
            self.side.static.rebase(deltas, upto)
            log.info("batch %d: %d partitions folded (subscription changes up to %d, %s) in "
                     "%.0f ms", batch_id, len(deltas), upto, why,
                     (time.perf_counter() - t0) * 1e3)
        if len(live.router_pending) > REBASE_ROUTER_DELTAS:
            old_router = self.side.router
            self.side.router = self.sc.broadcast(live.router())
            live.router_pending.clear()
            old_router.unpersist()
        pending = {d.seq for ds in live.pending.values() for d in ds}
        self._changed_in = {q: b for q, b in self._changed_in.items() if q in pending}

    def _run(self, batch_id: int, df: DataFrame) -> None:
        started = _now_ms()
        t0 = time.perf_counter()
        written = self.output.written(batch_id)
        # a batch whose output a restart finds committed is not written again: no new epoch
        follow = None if written else self._follow_workers(batch_id)
        moved = [m for m in (follow, self._apply_control(batch_id)) if m is not None]
        self._apply_subscriptions(batch_id)
        self._fold(batch_id)
        state = self.state
        if written:  # run again after a crash that followed its transaction's commit
            log.info("batch %d: its output was committed to Kafka before a restart; not "
                     "written again", batch_id)
            state.last_input = time.monotonic()
            return
        live = self.side.live
        if live is not None:  # the changes folded away are no longer needed by any task
            self.shipped.retire(live.pending, live.router_pending)
        # with the tasks writing: what they committed before a restart, then written by the
        # driver but for that (``app.batch.output``)
        before = (self.output.tasks_written(batch_id)
                  if self.settings.output_from == "tasks" else None)
        task_out = (self._task_output(batch_id, started)
                    if self.settings.output_from == "tasks" and before is None else None)
        route_ctx = RouteContext(self.side.router, tuple(state.assignment), self.workers,
                                 len(self.disjoint) > 0, self.kafka.topics.dead_letter,
                                 self.kafka.conf, self.settings.app_id,
                                 self.shipped.for_router(live.router_pending)
                                 if live is not None else (),
                                 state.replicas(), spans=task_out is not None)
        seqs, changes = self.shipped.for_join(live.pending) if live is not None else ({}, {})
        static = self.side.static
        join_ctx = JoinContext(self.side.strategy.name, self.settings.join_mode,
                               static.residency(), tuple(static.base_seq), seqs, changes,
                               output=task_out)
        self._report_lost(batch_id)
        ranges = self._direct_ranges(batch_id)
        if ranges is not None and self._in_one_stage(ranges):  # read in the join tasks
            self._stages = "one stage"
            job = self.side.static.for_batch().mapPartitionsWithIndex(
                partial(read_route_join, route_ctx, join_ctx, ranges))
        else:
            # At most one read task per core: a task costs more than reading a range.
            cores = self.sc.defaultParallelism
            # the app's read tasks (app.read.ranges)
            if ranges is not None and self.settings.direct_read:
                parts = ranges.split(cores) or [ranges]  # (no offsets: one task reads none)
                self._stages = "two stages, read directly"
                read = (self.sc.parallelize(range(len(parts)), len(parts))
                        .mapPartitionsWithIndex(partial(read_decode_route, route_ctx, parts)))
            else:
                read = self._kafka_rows(df)
                self._stages = "two stages, read by the connector"
                if read.getNumPartitions() > cores:
                    read = read.coalesce(cores)
                read = read.mapPartitions(partial(decode_route_rows, route_ctx))
            stream = read.partitionBy(self.workers, by_worker)
            job = (self.side.static.for_batch().union(stream)
                   .mapPartitionsWithIndex(partial(join, join_ctx)))
        out = job.collect()
        job_ms = (time.perf_counter() - t0) * 1000
        for attempt in range(1, WRITE_ATTEMPTS + 1):
            try:
                self._write(batch_id, started, t0, job_ms, out, moved, before)
                return
            except Aborted as exc:  # nothing of it is visible: write it again
                if attempt == WRITE_ATTEMPTS:
                    raise
                log.warning("batch %d: %s; writing it again (attempt %d of %d)", batch_id, exc,
                            attempt + 1, WRITE_ATTEMPTS)
            except Exception as exc:  # fenced: another process has taken the app over
                if self.lease is not None and "fenced" in str(exc).lower():
                    self.lease.check(force=True)  # ends the process when it was so
                raise

    def _task_output(self, batch_id: int, started: int) -> TaskOutput:
        """What the join tasks need to write batch ``batch_id``'s matches themselves; their
        loads and the driver's carry the batch's start time (``started``, ms)."""
        out = self.output
        exactly_once = isinstance(out, ExactlyOnce)
        return TaskOutput(self.settings.delivery, dict(self.kafka.conf),
                          self.settings.outage_limit, out.txn_id if exactly_once else "",
                          out.query if exactly_once else "", batch_id, self.state.epoch,
                          self.settings.app_id, self.kafka.topics.matches,
                          self.kafka.topics.metrics, np.asarray(self.disjoint, np.int64),
                          started)

    def _direct_ranges(self, batch_id: int) -> BatchRanges | None:
        """The batch's offset ranges when the app's tasks may read them themselves
        (``app.read.ranges``), in one stage or in read tasks: offsets that must all exist
        (``--on-data-loss fail``), a start Spark recorded and no partition planned to end
        below its start (a log that came back shorter: the connector names the loss)."""
        settings = self.settings
        if settings.on_data_loss != "fail" or not (settings.one_stage_records
                                                   or settings.direct_read):
            return None
        start = batch_start_offsets(self.settings.checkpoint, batch_id)
        end = batch_end_offsets(self.settings.checkpoint, batch_id)
        if not start or lost_ranges(start, end):
            return None
        return BatchRanges(self.kafka.topics.publications, {int(p): o for p, o in start.items()},
                           {int(p): o for p, o in end.items()}, dict(self.kafka.conf),
                           self.settings.outage_limit)

    def _in_one_stage(self, ranges: BatchRanges) -> bool:
        """Whether a batch runs in one stage: at most ``one_stage_records`` offsets, static
        partitions resident with their owners (STAL; under STRL the static side crosses a
        shuffle anyway)."""
        return (self.settings.one_stage_records > 0 and JOIN_MODES[self.settings.join_mode].resident
                and ranges.records <= self.settings.one_stage_records)

    def _kafka_rows(self, df: DataFrame) -> RDD:
        """The batch's Kafka records as rows of ``READ_COLUMNS`` (what ``decode_route_rows``
        takes), in two py4j calls: ``df.select(*names).rdd`` made many (a lookup and a call per
        column, a list built element by element), a visible part of a batch's driver work
        (``docs/results/live/costs``)."""
        if self._read_columns is None:  # the same unresolved columns serve every batch
            functions = self.sc._jvm.org.apache.spark.sql.functions
            self._read_columns = self.sc._jvm.PythonUtils.toSeq(
                [functions.col(name) for name in READ_COLUMNS])
        return RDD(df._jdf.select(self._read_columns).javaToPython(), self.sc,
                   BatchedSerializer(CPickleSerializer()))

    def _report_lost(self, batch_id: int) -> None:
        """With ``--on-data-loss continue`` the connector skips the offsets of a partition that
        came back shorter than the checkpoint had read (``failOnDataLoss=false``): name each
        such range in the log and on the dead-letter topic."""
        if self.settings.on_data_loss != "continue":
            return
        topic = self.kafka.topics.publications
        lost = lost_ranges(batch_start_offsets(self.settings.checkpoint, batch_id),
                           batch_end_offsets(self.settings.checkpoint, batch_id))
        now = _now_ms()
        for partition, end, start in lost:
            reason = (f"data loss: {topic}[{partition}] now ends at {end} but the query had "
                      f"read to {start}: the topic was deleted and created again, or "
                      f"truncated; offsets {end}..{start} of the old log and those below "
                      f"{end} of the new one are skipped (--on-data-loss continue)")
            log.warning("%s", reason)
            record = {"topic": topic, "partition": partition, "offset": end, "reason": reason,
                      "key": None, "payload": None, "time": now, "app_id": self.settings.app_id}
            self.output.open(batch_id).send(self.kafka.topics.dead_letter,
                                            self.codec.encode("DeadLetter", record))

    # long: the batch's write protocol in the order it must run, between its fault-injection
    # points (before-write, mid-write, after-commit) that the exactly-once tests kill at
    def _write(self, batch_id: int, started: int, t0: float, job_ms: float,
               out: list[tuple], moved: Sequence[dict[str, Any]] = (),
               before: TasksWritten | None = None) -> None:
        self._kill("before-write", batch_id)
        if self.lease is not None:  # a process that lost the lease ends here, unwritten
            self.lease.check()
        state = self.state
        if self._announce is not None:
            self.output.open(batch_id).send(
                self.kafka.topics.control,
                self.codec.encode("RebalanceCommand", self._announce),
                key=self.settings.app_id.encode())
        for report in moved:
            self._send_metric(batch_id, "MoveReport", report)
        got = Collected.of(out, state.owners)
        loads, positions, records, dead = got.loads, got.positions, got.records, got.dead
        self.side.static.measured(got.sizes)
        t_write = time.perf_counter()
        keys, ids, times = _unique_keys(got.known_keys, got.known_ids, got.known_times)
        mkeys, offsets, sub_ids = merge(keys if len(self.disjoint) else np.empty(0, np.int64),
                                        got.partials, self.disjoint)
        match_ms = _now_ms()
        if before is not None:  # the publications its tasks answered before a restart
            mkeys, offsets, sub_ids = _without(mkeys, offsets, sub_ids, before.keys)
        pos = np.searchsorted(keys, mkeys)
        pub_ids, pub_times = ids[pos], times[pos]
        matches = self.kafka.topics.matches
        values = encode_matches(pub_ids, offsets, sub_ids, pub_times, match_ms, batch_id,
                                self.settings.app_id)
        out = self.output.open(batch_id)
        out.send_many(matches, values, [str(pid).encode() for pid in pub_ids.tolist()])
        # (the whole table waits for the first positions: an object's state changes only at
        # its positions)
        fences = self.side.fences if self.side.fences is not None and (
            positions or self.side.fences.changed) else None
        if fences is not None:
            hits = position_hits(positions, mkeys, offsets, sub_ids, fences.ids)
            self.clock = max(self.clock, int(hits.event_ms.max(initial=0)))
            for key, record in bucket_records(self.settings.app_id, batch_id, match_ms, hits,
                                              fences, self.clock):
                out.send(self.kafka.topics.positions, self.codec.encode("ObjectPositions", record),
                         key=key)
        # one time for all of a batch's loads, whoever writes them
        now = started if self.settings.output_from == "tasks" else _now_ms()
        for held, load in loads.items():
            if held in got.written_loads or (before is not None and held[1] in before.workers):
                continue  # written by the task that measured it
            self._send_metric(batch_id, "PartitionLoad",
                              load.record(self.settings.app_id, batch_id, state.epoch, now))
        mean, p50, p99 = latency_summary(np.concatenate(
            [match_ms - pub_times, *got.task_latencies]))
        items = sum(load.items for load in loads.values())
        out.flush()
        self._kill("mid-write", batch_id)
        write_ms = (time.perf_counter() - t_write) * 1000
        ended = _now_ms()
        self._send_metric(batch_id, "BatchSummary", {
            "app_id": self.settings.app_id, "batch_id": batch_id, "epoch": state.epoch,
            "strategy": self.side.strategy.name, "join": self.settings.join_mode,
            "workers": self.workers,
            "partitions": self.partitions, "records": records, "dead_letters": dead,
            "items": items, "matched_publications": len(mkeys) + got.task_matched,
            "start_time": started,
            "end_time": ended, "duration_ms": (time.perf_counter() - t0) * 1000,
            "join_stage_ms": got.busiest_ns / 1e6, "job_ms": job_ms, "write_ms": write_ms,
            "latency_mean_ms": mean,
            "latency_p50_ms": p50, "latency_p99_ms": p99,
            "source_end_offsets": batch_end_offsets(self.settings.checkpoint, batch_id),
            "subscription_offsets": (self.kafka.feed.offsets() if self.kafka.feed is not None
                                     else {}),
            "replicas": command_fields(state.owners)[1]}, self.output.headers(batch_id))
        if self._layout_sent is None or time.monotonic() - self._layout_sent >= LAYOUT_EVERY_S:
            self.send_layout(batch_id)
        self.output.finish(batch_id)
        if fences is not None:
            fences.written()
            self.wrote_positions = True
        self._announce = None
        self._kill("after-commit", batch_id)
        state.batches += 1
        state.records += records
        if records:
            state.last_input = time.monotonic()
        log.info("batch %d epoch %d: %d records, %d items, %d matched%s, %d dead letters, "
                 "%s, %.0f ms", batch_id, state.epoch, records, items,
                 len(mkeys) + got.task_matched,
                 f" ({got.task_matched} written by the tasks)" if got.task_latencies else "",
                 dead, self._stages,
                 (time.perf_counter() - t0) * 1000)

    def send_layout(self, batch_id: int) -> None:
        """Put a PartitionLayout on the metrics topic with batch ``batch_id``'s output: the cells
        of the static partitions and their subscriptions now (what a map of the load draws;
        nothing else reads it)."""
        sizes = (self.side.live.partition_sizes() if self.side.live is not None
                 else self.side.strategy.partition_sizes())
        self._send_metric(batch_id, "PartitionLayout",
                          layout_record(self.settings.app_id, self.side.strategy, self.workers,
                                        sizes, _now_ms()))
        self._layout_sent = time.monotonic()

    def close(self, abandon: bool = False) -> None:
        """Release the producer; ``abandon`` after a failed query: what is still queued belongs
        to the failed batch, which Spark runs again from the checkpoint, so do not wait (an
        open transaction is aborted); then stop keeping the lease."""
        if self.output is not None:
            self.output.close(abandon)
        if self.lease is not None:
            self.lease.close()

    def _send_metric(self, batch_id: int, name: str, record: dict[str, Any],
                     headers: list | None = None) -> None:
        self.output.open(batch_id).send(self.kafka.topics.metrics, self.codec.encode(name, record),
                                        key=self.settings.app_id.encode(), headers=headers)


def _without(keys: np.ndarray, offsets: np.ndarray, sub_ids: np.ndarray, drop: np.ndarray
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The CSR matches (``keys``, ``offsets``, ``sub_ids``) but those of the keys ``drop``."""
    keep = ~np.isin(keys, drop)
    lengths = np.diff(offsets)[keep]
    new = np.zeros(len(lengths) + 1, np.int64)
    np.cumsum(lengths, out=new[1:])
    return keys[keep], new, sub_ids[np.repeat(keep, np.diff(offsets))]


def _unique_keys(keys: list[np.ndarray], ids: list[np.ndarray], times: list[np.ndarray]
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sorted unique publication keys with their ids and event times."""
    if not keys:
        empty = np.empty(0, np.int64)
        return empty, empty, empty
    k = np.concatenate(keys)
    uniq, first = np.unique(k, return_index=True)
    return uniq, np.concatenate(ids)[first], np.concatenate(times)[first]


def _owners_text(replicas: dict[int, Owners]) -> str:
    """``p3 [0, 1], p7 [1, 0]``: replicated partitions with their owners."""
    return ", ".join(f"p{p} {list(o)}" for p, o in sorted(replicas.items()))


def _now_ms() -> int:
    return int(time.time() * 1000)
