"""What runs inside Spark tasks: decode + route on the stream side, join + match per worker.

Records crossing the shuffle are keyed by target worker; what each kind holds is in
``app.records``.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from itertools import chain
from typing import Any

import numpy as np
import shapely

from app.batch.answers import LocalAnswers, item_workers, span_records
from app.batch.task_output import write_matches
from app.faults import fail_task_once
from app.joins import JOIN_MODES
from app.read.ranges import BatchRanges, Record, read_rows
from app.records import (
    Busy,
    Items,
    Matched,
    PartitionLoad,
    Payloads,
    Positions,
    Presence,
    ReadStats,
    Shared,
    StaticPartition,
    Unrouted,
)
from geops.model import geometry_problems
from schemas import codec
from schemas.assignment import owner_index
from schemas.publication_decoder import decode_publications

# (topic partition, offset) -> one int64 key per publication, unique within a batch and stable
# across replays of the same offsets.
KEY_PARTITION_SHIFT = 40


@dataclass(frozen=True)
class RouteContext:
    """What a stream-side task needs; pickled into the task closure (keep it small)."""

    router: Any                 # Broadcast of the strategy's router
    assignment: tuple[int, ...]  # the (primary) owner of each partition
    workers: int
    with_presence: bool
    dead_letter_topic: str
    kafka_conf: dict[str, str] = field(default_factory=dict)
    app_id: str = ""
    # broadcasts of the replicated index's pending subscription changes (RIhPS/RIsPS; a
    # ``churn.RouterDelta`` each, oldest first; ``app.static.broadcasts``)
    router_deltas: tuple = ()
    # Partitions owned by more than one worker: pid -> every owner, the primary first. Their
    # items are split among the owners by publication key (schemas.assignment.owner_index).
    replicas: dict[int, tuple[int, ...]] = field(default_factory=dict)
    # whether this task sends the bad records it finds to the dead-letter topic (of the tasks
    # that each decode the whole batch, ``read_route_join``, only worker 0's does)
    dead_letters: bool = True
    # the one worker whose items this task keeps (a join task that reads its batch itself):
    # the router then looks for that worker's partitions' items only; None: every worker's
    keep_worker: int | None = None
    # whether the tasks write their own matches: then each routes over every partition and
    # tells each worker which of its publications are shared (``app.batch.answers``)
    spans: bool = False


@dataclass(frozen=True)
class JoinContext:
    """What a join task needs: which static partitions it owns and how to key their memo."""

    strategy: str
    join: str                               # a name of config.choices.JOINS
    # per (partition, owner): (static version, epoch the owner has held it since); a replicated
    # partition has one entry per owner, each of which holds (STAL) its own copy
    residency: dict[tuple[int, int], tuple[int, int]]
    base_seq: tuple[int, ...] = ()          # per partition: last change in its payload
    # per partition the numbers of the changes since its payload, and per number the broadcast
    # of that change's deltas (``app.static.broadcasts``)
    deltas: dict[int, tuple[int, ...]] = field(default_factory=dict)
    changes: dict[int, Any] = field(default_factory=dict)
    # with the tasks writing their own matches: what they need to (``app.batch.task_output``)
    output: Any = None

    def folded_seq(self, pid: int) -> int:
        """The last subscription change folded into partition ``pid``'s payload."""
        return self.base_seq[pid] if self.base_seq else 0


def publication_key(kafka_partition: np.ndarray, offset: np.ndarray) -> np.ndarray:
    """int64 keys of publications from their Kafka partitions and offsets."""
    return (kafka_partition << KEY_PARTITION_SHIFT) | offset


def decode_route_rows(ctx: RouteContext, rows: Iterable[Any]) -> Iterator[tuple[int, tuple]]:
    """Decode and route one read task's Kafka rows (topic, partition, offset, key, value, in
    that order, as the batch selects them from Spark's connector; see ``decode_route``)."""
    return decode_route(ctx, [Record(*row) for row in rows])


def read_decode_route(ctx: RouteContext, parts: Sequence[BatchRanges], index: int,
                      _: Iterable[Any]) -> Iterator[tuple[int, tuple]]:
    """Read task ``index`` of a large batch (``app.read.ranges``): read part ``index`` of the
    batch's offset ranges, then decode and route it (``decode_route``)."""
    return decode_route(ctx, read_rows(parts[index]))


def decode_route(ctx: RouteContext, rows: Iterable[Any]) -> Iterator[tuple[int, tuple]]:
    """Decode publications, dead-letter the bad ones, route the rest to (worker, partition).

    ``rows`` need ``topic``, ``partition``, ``offset``, ``key`` and ``value`` attributes. The
    whole task's records are decoded in one pass (``schemas.publication_decoder``).
    """
    rows = rows if isinstance(rows, list) else list(rows)
    count = len(rows)
    pubs = decode_publications([row.value for row in rows])
    dead: list[tuple[Any, str]] = [(rows[i], reason) for i, reason in pubs.errors]
    decoded = np.flatnonzero(pubs.ok)
    partitions = np.fromiter((row.partition for row in rows), np.int64, count)
    offsets = np.fromiter((row.offset for row in rows), np.int64, count)
    keys = publication_key(partitions[decoded], offsets[decoded])
    ids, wkbs, times = pubs.ids, pubs.geometries, pubs.event_times
    good = np.ones(len(keys), bool)
    if len(keys):
        geoms = shapely.from_wkb(wkbs, on_invalid="ignore")
        for i, problem in enumerate(geometry_problems(geoms)):
            if problem is not None:
                good[i] = False
                reason = "unreadable WKB geometry" if problem == "missing geometry" else problem
                dead.append((rows[decoded[i]], reason))
    if dead and ctx.dead_letters:
        _dead_letter(ctx, dead)
    yield 0, ReadStats(count, len(dead))
    if not good.any():
        return
    idx = np.flatnonzero(good)
    objects = pubs.object_ids[idx]
    moving = np.flatnonzero(objects != None)  # noqa: E711 - elementwise, on an object array
    if len(moving):
        from geops.events import position_points  # pyproj: only where objects move

        at = idx[moving]
        yield 0, Positions(keys[at], ids[at], objects[moving], times[at],
                           position_points(geoms[at]))
    key_arr = keys[idx]
    id_arr = ids[idx]
    time_arr = times[idx]
    wkb_arr = wkbs[idx]
    geoms = geoms[idx]
    assignment = ctx.assignment
    replicas = ctx.replicas
    kept = None if ctx.keep_worker is None or ctx.spans else np.array(
        [p for p, owner in enumerate(assignment) if ctx.keep_worker in replicas.get(p, (owner,))],
        np.int32)
    routed = ctx.router.value.route(geoms, tuple(b.value for b in ctx.router_deltas), kept)
    for pid, items in routed.by_partition():
        owners = replicas.get(pid)
        if owners is None:
            yield assignment[pid], _items(pid, items, key_arr, id_arr, wkb_arr, time_arr)
            continue
        # A replicated partition: each item goes to one owner, chosen by its publication key
        # (a replayed batch splits the same way); the owners' partial results are disjoint.
        which = owner_index(key_arr[items.pub_index], len(owners))
        for j, worker in enumerate(owners):
            rows_ = np.flatnonzero(which == j)
            if len(rows_):
                yield worker, _items(pid, items.take(rows_), key_arr, id_arr, wkb_arr, time_arr)
    if ctx.spans:
        yield from span_records(routed.pub_index,
                                item_workers(routed.partition, key_arr[routed.pub_index],
                                             assignment, replicas),
                                key_arr, id_arr, time_arr, moving, ctx.workers,
                                ctx.with_presence)
    elif ctx.with_presence:
        target = key_arr % ctx.workers
        for w in np.unique(target):
            sel = target == w
            yield int(w), Presence(key_arr[sel], id_arr[sel], time_arr[sel])


def _items(pid: int, items: Any, keys: np.ndarray, ids: np.ndarray, wkbs: np.ndarray,
           times: np.ndarray) -> Items:
    """The stream record of ``items`` (a ``Routed`` of one partition), column-wise."""
    rows = items.pub_index
    return Items(pid, keys[rows], ids[rows], wkbs[rows], times[rows], items.cand_offsets,
                 items.cand_ids)


def _dead_letter(ctx: RouteContext, dead: list[tuple[Any, str]]) -> None:
    """Send undecodable/invalid records with their reason; flushed before the task ends."""
    from kafkaio.sender import Sender

    c = codec()
    sender = Sender(ctx.kafka_conf)
    now = int(time.time() * 1000)
    for row, reason in dead:
        sender.send(ctx.dead_letter_topic, c.encode("DeadLetter", {
            "topic": row.topic, "partition": row.partition, "offset": row.offset,
            "reason": reason, "key": row.key, "payload": row.value, "time": now,
            "app_id": ctx.app_id,
        }), key=row.key)
    sender.flush()


# Static partitions resident in this Python worker process (STAL), keyed by (partition, owner):
# (static version, residency epoch) -> matcher. A partition that moves (or gains an owner) gets
# a new residency epoch on its new owner, which builds it again; each owner of a replicated
# partition holds its own copy, as each would on its own executor. Stale entries (an old
# residency, a replica removed) are dropped when seen.
_RESIDENT: dict[tuple[int, int], tuple[tuple[int, int], Any]] = {}


def resident_partitions() -> dict[tuple[int, int], tuple[int, int]]:
    """What this process holds ((partition, owner) -> residency key); for tests and
    diagnostics."""
    return {held: key for held, (key, _) in _RESIDENT.items()}


@dataclass
class _Chunks:
    keys: list[np.ndarray] = field(default_factory=list)
    ids: list[np.ndarray] = field(default_factory=list)
    wkbs: list[np.ndarray] = field(default_factory=list)
    times: list[np.ndarray] = field(default_factory=list)
    offsets: list[np.ndarray] = field(default_factory=list)
    cands: list[np.ndarray] = field(default_factory=list)

    def add(self, items: Items) -> None:
        self.keys.append(items.keys)
        self.ids.append(items.ids)
        self.wkbs.append(items.wkbs)
        self.times.append(items.event_ms)
        if items.cand_offsets is not None:
            self.offsets.append(items.cand_offsets)
            self.cands.append(items.cand_ids)

    def columns(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, Any, Any]:
        keys = np.concatenate(self.keys)
        ids = np.concatenate(self.ids)
        wkbs = np.concatenate(self.wkbs)
        times = np.concatenate(self.times)
        if not self.offsets:
            return keys, ids, wkbs, times, None, None
        lengths = np.concatenate([np.diff(o) for o in self.offsets])
        offsets = np.zeros(len(lengths) + 1, np.int64)
        np.cumsum(lengths, out=offsets[1:])
        return keys, ids, wkbs, times, offsets, np.concatenate(self.cands)


def _held_index(ctx: JoinContext, pid: int, worker: int) -> Any:
    """The index this process holds for (partition, owner) if it is of the current residency
    and up to the changes folded into its payload (one that missed some is built again), or
    None."""
    held = _RESIDENT.get((pid, worker))
    if held is not None and held[0] == ctx.residency.get((pid, worker)) and (
            held[1].applied >= ctx.folded_seq(pid)):
        return held[1]
    return None


def _build_index(ctx: JoinContext, pid: int, worker: int, payload: bytes, keep: bool) -> Any:
    """The index of a partition's payload, current up to its payload's changes; ``keep``: hold
    it in this process for its residency (STAL)."""
    from geops.strategies import load_partition

    matcher = load_partition(ctx.strategy, payload)
    matcher.applied = ctx.folded_seq(pid)
    if keep:
        _RESIDENT[(pid, worker)] = (ctx.residency[(pid, worker)], matcher)
    return matcher


def _match_partition(ctx: JoinContext, worker: int, pid: int, chunk: _Chunks,
                     payloads: dict[int, bytes]) -> tuple[np.ndarray, np.ndarray, np.ndarray,
                                                          Any, PartitionLoad]:
    """Match partition ``pid``'s items with its index (held, or built from its payload):
    (keys, ids, event times, partial matches, load)."""
    from app.static.broadcasts import pending_deltas
    from geops.strategies.churn import apply_deltas

    resident = JOIN_MODES[ctx.join].resident
    # Load is this thread's CPU time (GEOS runs in it too): on a shared machine the wall
    # clock also counts waiting for a core, which is no property of the partition and made
    # one batch's per-partition costs swing by up to +-50 %.
    t0 = time.thread_time_ns()
    builds = shipped = build_ns = 0
    matcher = _held_index(ctx, pid, worker) if resident else None
    if matcher is None:
        payload = payloads.get(pid)
        if payload is None or (pid, worker) not in ctx.residency:
            raise RuntimeError(f"static partition {pid} is not on worker {worker}: the "
                               f"stream was routed with another assignment")
        matcher = _build_index(ctx, pid, worker, payload, keep=resident)
        builds = 1
        build_ns = time.thread_time_ns() - t0
        if not resident:
            shipped = len(payload)
    if pid in ctx.deltas:  # subscription changes since the payload, applied in place
        todo = pending_deltas(ctx.changes, ctx.deltas[pid], pid, matcher.applied)
        matcher.applied = apply_deltas(matcher, todo, matcher.applied)
    keys, ids, wkbs, times, offsets, cands = chunk.columns()
    geoms = shapely.from_wkb(wkbs)
    partial = matcher.match(keys, geoms, offsets, cands)
    ns = time.thread_time_ns() - t0
    if resident:
        ns -= build_ns  # a one-off of the residency, not load of this batch's items
    return keys, ids, times, partial, PartitionLoad(
        pid, worker, len(keys), ns, partial.candidates, len(partial.keys), builds, shipped,
        build_ns)


def join(ctx: JoinContext, worker: int, records: Iterable[tuple[int, tuple]]
         ) -> Iterator[tuple]:
    """Join the stream items of this worker with its static partitions and match them; with
    ``ctx.output``, write the matches of the publications this worker answers alone
    (``app.batch.answers``) and hand the driver only the shared ones."""
    started = time.perf_counter_ns()
    payloads: dict[int, bytes] = {}
    chunks: dict[int, _Chunks] = defaultdict(_Chunks)
    answers = LocalAnswers() if ctx.output is not None else None
    unrouted: list[Unrouted] = []
    for _, rec in records:
        if isinstance(rec, Items):
            chunks[rec.partition].add(rec)
        elif isinstance(rec, StaticPartition):
            payloads[rec.partition] = rec.payload
        elif isinstance(rec, Shared) and answers is not None:
            answers.add_shared(rec)
        elif isinstance(rec, Unrouted):
            unrouted.append(rec)
        else:
            yield rec
    loads: list[PartitionLoad] = []
    for pid in sorted(chunks):
        keys, ids, times, partial, load = _match_partition(ctx, worker, pid, chunks[pid],
                                                           payloads)
        if answers is None:
            matched = np.unique(partial.keys)
            order = np.argsort(keys, kind="stable")
            pos = order[np.searchsorted(keys, matched, sorter=order)]
            yield Matched(pid, partial, matched, ids[pos], times[pos])
        else:
            shared = answers.split(pid, partial, keys, ids, times)
            if shared is not None:
                yield shared
        loads.append(load)
        yield load
    if JOIN_MODES[ctx.join].resident:
        for held in [h for h, (k, _) in _RESIDENT.items() if k != ctx.residency.get(h)]:
            del _RESIDENT[held]
    yield Payloads(worker, {pid: len(data) for pid, data in payloads.items()})
    if answers is not None and loads:  # its last load carries the exactly-once marker
        for rec in unrouted:
            answers.add_unrouted(rec)
        keys, ids, times, offsets, sub_ids = answers.answers(ctx.output.disjoint)
        yield write_matches(ctx.output, worker, keys, ids, times, offsets, sub_ids, loads)
    else:  # nothing to carry a marker: the driver answers them
        yield from (Presence(*rec) for rec in unrouted)
    if chunks:  # a test's injected failure, after the task's work (app.faults)
        fail_task_once()
    yield Busy(worker, time.perf_counter_ns() - started)


def read_route_join(route_ctx: RouteContext, join_ctx: JoinContext, ranges: BatchRanges,
                    worker: int, records: Iterable[tuple[int, Any]]) -> Iterator[tuple]:
    """A small batch in one stage (``app.read.ranges``): read the batch's ranges, decode all of
    them, route them to the partitions of ``worker`` and join those items with its static
    ``records``. The batch's ``ReadStats`` (and its dead letters) come from worker 0's task
    alone."""
    ctx = replace(route_ctx, dead_letters=route_ctx.dead_letters and worker == 0,
                  keep_worker=worker)
    mine = ((w, rec) for w, rec in decode_route(ctx, read_rows(ranges)) if w == worker)
    yield from join(join_ctx, worker, chain(records, mine))


def warm_indexes(ctx: JoinContext, router: Any, copies: int, index: int,
                 records: Iterable[tuple[int, Any]]) -> Iterator[int]:
    """Before the query starts, load the ``router`` broadcast and build the resident indexes
    (STAL) of worker ``index // copies`` in this Python process, so the first batches find
    them; yields how many indexes it built.

    Tasks run in whichever of the executor's Python processes is free, so each worker's
    static records come as ``copies`` tasks (as many as cores) that run at once, one in each
    process: every process then holds what any join task it is given will need.
    """
    worker = index // copies
    built = 0
    router.value  # noqa: B018 - a broadcast loads on first access, once per process
    if JOIN_MODES[ctx.join].resident:
        for _, rec in records:
            if not isinstance(rec, StaticPartition):
                continue
            if ((rec.partition, worker) not in ctx.residency
                    or _held_index(ctx, rec.partition, worker) is not None):
                continue
            _build_index(ctx, rec.partition, worker, rec.payload, keep=True)
            built += 1
    yield built
