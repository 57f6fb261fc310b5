"""The subscriptions topic read once, at start, by the executors: the driver gets envelopes.

A task per slice of the topic (``RECORDS_PER_TASK`` offsets at most) reads its records straight
from Kafka, keeps the last record per subscription id in the slice, checks the geometries and
the distance fences (``geops.fences.fence_problems``: the same rules as ``geops subscribe``)
and returns two things: a **summary** the driver collects (per id: offset, whether the record
is a live subscription, a tombstone or unusable, its envelope and relation; and the records to
dead-letter), and the slice's live subscriptions as a partition payload
(``geops.strategies.payload``), which stays cached on the executors for the static build
(``app.static.build``). The driver merges the summaries: across slices the record at the
highest (topic partition, offset) of an id wins, exactly as compaction would leave the topic; a
tombstone deletes, and so does an unusable geometry or fence (it can no longer match).

So the subscriptions are decoded once, in parallel, and the driver holds ~42 bytes per
subscription (``geops.model.Envelopes``): at a million subscriptions it read and decoded every
record itself before (~17 s, 1.5 GB).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import shapely

from geops.model import (
    ROAMING_KINDS,
    DetectKind,
    Envelopes,
    Relation,
    Subscriptions,
    geometries_from_wkb,
)
from geops.roam_spec import roam_record_problem
from geops.strategies import payload

# Records read by one task; a topic partition longer than this is read by several tasks.
RECORDS_PER_TASK = 100_000

Slice = tuple[int, int, int]  # (topic partition, first offset, end offset)

LIVE, TOMBSTONE, UNUSABLE = 0, 1, 2  # the state of an id's last record


@dataclass(frozen=True)
class TopicRange:
    """The offsets of the subscriptions topic the set is read from: up to ``ends``."""

    kafka_conf: dict[str, str]
    topic: str
    ends: dict[int, int]        # {topic partition: end offset}
    outage_limit: float = 300.0

    def slices(self, per_task: int = RECORDS_PER_TASK) -> list[Slice]:
        """The offset ranges the read tasks take, at most ``per_task`` offsets each."""
        return [(p, start, min(start + per_task, end))
                for p, end in sorted(self.ends.items()) for start in range(0, end, per_task)]


@dataclass(frozen=True)
class DeadRecord:
    """A subscription record that cannot be used, and why (for the dead-letter topic).
    ``sid``: the subscription whose last record it is, when it only counts if it stays the
    last (an unusable geometry); None when it is dead whatever follows (undecodable)."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    reason: str
    sid: int | None = None


@dataclass
class SliceSummary:
    """What the driver needs of one slice: per id its last record in the slice."""

    index: int
    partition: int
    records: int = 0
    tombstones: int = 0
    ids: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    offsets: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    state: np.ndarray = field(default_factory=lambda: np.empty(0, np.int8))
    envelopes: Envelopes | None = None  # row for row with ``ids`` (NaN where not live)
    # row for row with ``ids``: the ``DetectKind`` bit mask of a live fence, else 0
    detect: np.ndarray = field(default_factory=lambda: np.empty(0, np.uint8))
    dead: list[DeadRecord] = field(default_factory=list)


def scan_records(index: int, partition: int, messages: Iterable[Any]
                 ) -> tuple[SliceSummary, Subscriptions]:
    """The summary of one slice's records (Kafka messages of one topic partition, in offset
    order) and its live subscriptions, sorted by id."""
    from schemas.publication_decoder import decode_subscriptions

    msgs = list(messages)
    out = SliceSummary(index, partition, records=len(msgs))
    values = [m.value() for m in msgs]
    tomb = np.array([v is None for v in values], bool)
    out.tombstones = int(tomb.sum())
    sid = np.zeros(len(msgs), np.int64)
    usable = np.zeros(len(msgs), bool)   # a record that says something about its id
    for i in np.flatnonzero(tomb).tolist():
        try:
            sid[i], usable[i] = int(msgs[i].key()), True
        except (TypeError, ValueError):
            out.dead.append(_dead(msgs[i], f"tombstone whose key {msgs[i].key()!r} is not a "
                                           f"subscription id"))
    records = np.flatnonzero(~tomb)
    decoded = decode_subscriptions([values[i] for i in records.tolist()])
    for i, reason in decoded.errors:
        out.dead.append(_dead(msgs[records[i]], reason))
    good = records[decoded.ok]
    sid[good], usable[good] = decoded.ids, True
    wkbs = np.empty(len(msgs), object)
    wkbs[good] = decoded.geometries
    relations = np.zeros(len(msgs), np.int8)
    relations[good] = decoded.relations
    detect = np.zeros(len(msgs), np.uint8)
    detect[good] = decoded.detect
    distance = np.full(len(msgs), np.nan)
    distance[good] = decoded.distance_m
    has_distance = np.zeros(len(msgs), bool)
    has_distance[good] = decoded.has_distance
    # per id its last record in the slice (messages come in offset order)
    rows = np.flatnonzero(usable)[::-1]
    ids, first = np.unique(sid[rows], return_index=True)
    last = rows[first]
    out.ids = ids
    out.offsets = np.array([msgs[i].offset() for i in last.tolist()], np.int64)
    out.state = np.where(tomb[last], TOMBSTONE, LIVE).astype(np.int8)
    relations = relations[last]
    live = np.flatnonzero(out.state == LIVE)
    geoms = np.full(len(ids), None, object)
    if len(live):
        geoms[live], problems = geometries_from_wkb(wkbs[last[live]].tolist())
        for i, problem in zip(live.tolist(), problems, strict=True):
            if problem:
                out.state[i] = UNUSABLE
                geoms[i] = None
                out.dead.append(_dead(msgs[last[i]], f"subscription {ids[i]}: {problem}",
                                      int(ids[i])))
    detect = detect[last]
    _refuse_bad_roams(out, msgs, last, detect, good, decoded.roams)
    fenced = np.flatnonzero((out.state == LIVE) & has_distance[last])
    if len(fenced):
        from geops.fences import fence_shapes  # pyproj, loaded only for distance fences

        rows = last[fenced]
        shapes, problems = fence_shapes(ids[fenced], geoms[fenced], detect[fenced],
                                        distance[rows], has_distance[rows])
        geoms[fenced] = shapes
        for i, problem in zip(fenced.tolist(), problems, strict=True):
            if problem:
                out.state[i] = UNUSABLE
                out.dead.append(_dead(msgs[last[i]], problem, int(ids[i])))
    # a fence is matched by its shape: the publications it intersects (``geops.events``)
    # (the kinds of fixed fences only: a roaming fence matches as a plain subscription, and
    # the events query computes fixed fences' events, ``geops.roam``)
    detect = DetectKind.fixed(detect)
    relations[(out.state == LIVE) & (detect != 0)] = Relation.INTERSECTS
    out.detect = np.where(out.state == LIVE, detect, 0).astype(np.uint8)
    ok = out.state == LIVE
    bounds = np.full((len(ids), 4), np.nan)
    if ok.any():
        bounds[ok] = shapely.bounds(geoms[ok])
    out.envelopes = Envelopes(ids, bounds, shapely.get_type_id(geoms) == 0, relations)
    return out, Subscriptions(ids[ok], geoms[ok], relations[ok])


def _refuse_bad_roams(out: SliceSummary, msgs: list[Any], last: np.ndarray, detect: np.ndarray,
                      good: np.ndarray, decoded_roams: np.ndarray) -> None:
    """Make unusable, with a dead letter naming the subscription and the field, each live
    record (the ``last`` of each id; ``decoded_roams`` those of the records ``good``) whose
    roam makes no roaming fence (``geops.roam_spec.roam_record_problem``): the stream does
    not compute roaming events yet, but takes only what it will."""
    roams = np.full(len(msgs), None, object)
    roams[good] = decoded_roams
    roams = roams[last]
    asks = np.flatnonzero((out.state == LIVE) & (
        ((detect & ROAMING_KINDS) > 0) | np.array([r is not None for r in roams], bool)))
    for i in asks.tolist():
        problem = roam_record_problem(int(out.ids[i]), int(detect[i]), roams[i])
        if problem:
            out.state[i] = UNUSABLE
            out.dead.append(_dead(msgs[last[i]], problem, int(out.ids[i])))


def _dead(msg: Any, reason: str, sid: int | None = None) -> DeadRecord:
    return DeadRecord(msg.topic(), msg.partition(), msg.offset(), msg.key(), msg.value(), reason,
                      sid)


def scan_slice(source: TopicRange, index: int, part: Slice) -> tuple[int, SliceSummary, bytes]:
    """(slice index, summary, payload) of one slice, read from Kafka (on an executor)."""
    from kafkaio.offsets import read_between

    p, start, end = part
    summary, subs = scan_records(
        index, p, read_between(source.kafka_conf, source.topic, {p: start}, {p: end},
                               source.outage_limit))
    return index, summary, payload.encode(subs)


@dataclass
class SubscriptionSet:
    """The live subscriptions as of a ``TopicRange``, as the driver holds them."""

    envelopes: Envelopes                 # the live ones, sorted by id
    stale: dict[int, np.ndarray]         # slice index -> ids of its live rows a later record
    #                                      replaced (they leave the slice's payload)
    dead: list[DeadRecord]               # to dead-letter
    deleted: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    #                                      ids whose last record deletes them (a tombstone,
    #                                      an unusable geometry), sorted
    records: int = 0
    tombstones: int = 0
    skipped: int = 0
    # row for row with ``envelopes``: the ``DetectKind`` bit mask of each (0: no fence)
    detect: np.ndarray = field(default_factory=lambda: np.empty(0, np.uint8))


def merge_summaries(summaries: Iterable[SliceSummary]) -> SubscriptionSet:
    """The set the slices make together: per id the record at the highest (topic partition,
    offset) wins."""
    parts = sorted(summaries, key=lambda s: s.index)
    dead = [d for s in parts for d in s.dead if d.sid is None]
    records = sum(s.records for s in parts)
    tombstones = sum(s.tombstones for s in parts)
    parts = [s for s in parts if len(s.ids)]
    if not parts:
        return SubscriptionSet(Envelopes(np.empty(0, np.int64), np.empty((0, 4)),
                                         np.empty(0, bool), np.empty(0, np.int8)),
                               {}, dead, records=records, tombstones=tombstones,
                               skipped=len(dead))
    ids = np.concatenate([s.ids for s in parts])
    where = np.concatenate([np.full(len(s.ids), s.partition, np.int64) for s in parts])
    offsets = np.concatenate([s.offsets for s in parts])
    slice_of = np.concatenate([np.full(len(s.ids), s.index, np.int64) for s in parts])
    state = np.concatenate([s.state for s in parts])
    order = np.lexsort((offsets, where, ids))
    last = np.r_[ids[order][1:] != ids[order][:-1], True]
    winner = np.zeros(len(ids), bool)
    winner[order[last]] = True
    won = {(int(where[i]), int(offsets[i])) for i in np.flatnonzero(winner & (state == UNUSABLE))}
    dead += [d for s in parts for d in s.dead
             if d.sid is not None and (d.partition, d.offset) in won]
    live = np.flatnonzero(winner & (state == LIVE))
    envelopes = Envelopes(
        np.concatenate([s.envelopes.ids for s in parts]),
        np.concatenate([s.envelopes.bounds for s in parts]),
        np.concatenate([s.envelopes.points for s in parts]),
        np.concatenate([s.envelopes.relations for s in parts]))
    live = live[np.argsort(ids[live], kind="stable")]
    replaced = np.flatnonzero(~winner & (state == LIVE))
    stale = {int(k): np.sort(ids[replaced[slice_of[replaced] == k]])
             for k in np.unique(slice_of[replaced]).tolist()}
    deleted = np.sort(ids[winner & (state != LIVE)])
    detect = np.concatenate([s.detect for s in parts])
    return SubscriptionSet(envelopes.take(live), stale, dead, deleted, records, tombstones,
                           len(dead), detect[live])


def read_change(messages: Iterable[Any]) -> tuple[SubscriptionSet, Subscriptions]:
    """What records of any topic partitions say (the driver reads each batch's few this
    way): the set they make (with ``deleted``) and the live subscriptions with their shapes,
    sorted by id. The same rules as the start-up scan, on the same code."""
    by_partition: dict[int, list[Any]] = {}
    for msg in messages:
        by_partition.setdefault(msg.partition(), []).append(msg)
    scanned = [scan_records(i, p, msgs) for i, (p, msgs) in enumerate(sorted(by_partition.items()))]
    found = merge_summaries([summary for summary, _ in scanned])
    subs = Subscriptions.concat([without_stale(part, found.stale.get(summary.index))
                                 for summary, part in scanned])
    return found, subs.take(np.argsort(subs.ids, kind="stable"))


class Scan:
    """The subscriptions topic scanned by the executors (one Spark job): the driver's
    ``SubscriptionSet``, and the slices' payloads cached on the executors until ``release``."""

    def __init__(self, sc: Any, source: TopicRange):
        from pyspark import StorageLevel

        slices = source.slices()
        self.rdd = (sc.parallelize(list(enumerate(slices)), max(1, len(slices)))
                    .map(lambda item: scan_slice(source, *item))
                    .persist(StorageLevel.MEMORY_AND_DISK))
        self.set = merge_summaries(self.rdd.map(lambda s: s[1]).collect())

    def payloads(self) -> Any:
        """RDD of (slice index, payload of the slice's live subscriptions)."""
        return self.rdd.map(lambda s: (s[0], s[2]))

    def cross_shapes(self) -> dict[int, bytes]:
        """Id -> WKB of the shape (its distance fence, or its geometry) of every live fence
        that asks for cross, from the cached slices (a Spark job, only when there is one):
        the events query tests the objects' tracks against them."""
        found = self.set
        if len(found.detect) != len(found.envelopes.ids):
            return {}
        asks = found.envelopes.ids[(found.detect & int(DetectKind.CROSS)) > 0]
        if not len(asks):
            return {}
        stale = found.stale

        def pick(slices: Iterable[tuple[int, bytes]]) -> Iterator[tuple[int, bytes]]:
            for subs in pieces_of(slices, stale):
                keep = np.isin(subs.ids, asks)
                yield from zip(subs.ids[keep].tolist(),
                               shapely.to_wkb(subs.geoms[keep]).tolist(), strict=True)

        return dict(self.payloads().mapPartitions(pick).collect())

    def release(self) -> None:
        """Drop the cached slices (once the static side they were built into is cached)."""
        self.rdd.unpersist()


def without_stale(subs: Subscriptions, stale: np.ndarray | None) -> Subscriptions:
    """A slice's live subscriptions less those a later record replaced (``stale`` ids)."""
    if stale is None or not len(stale):
        return subs
    return subs.take(np.flatnonzero(~np.isin(subs.ids, stale)))


def pieces_of(slices: Iterable[tuple[int, bytes]], stale: dict[int, np.ndarray]
              ) -> Iterator[Subscriptions]:
    """The live subscriptions of each cached slice payload, less those a later record
    replaced."""
    for index, data in slices:
        subs = without_stale(payload.decode(data)[0], stale.get(index))
        if len(subs):
            yield subs
