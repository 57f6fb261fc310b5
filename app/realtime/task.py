"""What one long-running real-time task does until it is stopped: read, match, write at once.

Task ``index`` of ``workers`` reads the publications topic's partitions ``p`` with
``p % workers == index`` from where its output recorded its progress (``delivery``; a new app:
``starting_offsets``). Each poll's records are decoded together, the bad ones dead-lettered with
their reason, the rest matched against every subscription (``static_side.WholeStatic``) and
each matched publication's ``Match`` record produced at once (``linger.ms`` a millisecond, the
producer idempotent), with the geofence events of the positions among them (``events``),
whose objects' states the task first restores from the object-state topic (``changelog``). Every
``commit_interval_s`` the task ends a period: its summary on the metrics topic (``period``),
the states of the objects that changed, then its records delivered and its offsets committed,
at least once or in one transaction (``delivery``).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import shapely
from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, Consumer, TopicPartition

from app.faults import FAIL_TASK_VAR, fail_task_once
from app.realtime.changelog import Changelog
from app.realtime.delivery import Delivery
from app.realtime.events import TaskEvents
from app.realtime.period import PERIOD_S, Period
from app.realtime.static_side import PARTITIONS, STRATEGY, WholeStatic
from app.subscriptions.scan import DeadRecord
from geops.model import geometry_problems
from geops.strategies import BatchMatches
from kafkaio.clients import consumer, topic_partitions
from kafkaio.errors import KafkaUnavailable
from kafkaio.sender import Sender
from schemas import codec
from schemas.match_encoder import encode_matches
from schemas.publication_decoder import decode_publications

log = logging.getLogger("geops.app.realtime")

# The batch id of a real-time Match record: it was written outside any micro-batch.
NO_BATCH = -1
POLL_RECORDS = 2_000
POLL_S = 0.05  # a poll returns at once when records wait; this bounds an idle wait only


@dataclass(frozen=True)
class TaskContext:
    """What every real-time task needs; pickled into the job's closure."""

    kafka_conf: dict[str, str]
    app_id: str
    group: str                 # the consumer group that holds the answered offsets; with a
    #                            task's index after it, that task's transactional id
    publications: str
    subscriptions: str
    matches: str
    dead_letter: str
    metrics: str
    events: str                # the events topic; empty: no geofence events
    object_state: str          # the object-state topic (``changelog``) of the events' objects
    object_ttl_ms: int
    workers: int
    starting_offsets: str      # earliest | latest: where a partition never committed starts
    commit_interval_s: float
    outage_limit: float
    delivery: str              # at-least-once | exactly-once (``delivery``)


def serve(index: int, ctx: TaskContext, _rows: Iterable[Any] = ()) -> Iterator[int]:
    """Run task ``index`` until the job is cancelled. A task without partitions (more workers
    than the topic has partitions) ends at once and yields 0."""
    static = WholeStatic(ctx.kafka_conf, ctx.subscriptions, ctx.outage_limit)
    delivery = Delivery(ctx, index)
    out = delivery.out
    reader = consumer(ctx.kafka_conf, group_id=ctx.group, **{"fetch.wait.max.ms": 10})
    owned = _assign(reader, ctx, index, delivery.resume())
    log.info("real-time task %d of %d: %d subscriptions, publications partitions %s",
             index, ctx.workers, static.subscriptions, owned)
    period = Period()
    codec_ = codec()
    events = (TaskEvents(static.fences, ctx.object_ttl_ms, NO_BATCH, static.cross_shapes)
              if ctx.events else None)
    changelog = None
    if events is not None and owned:
        changelog = Changelog(ctx.kafka_conf, ctx.object_state, ctx.app_id, ctx.outage_limit)
        events.restore(*changelog.restore(owned))
        log.info("real-time task %d: %d objects' states restored", index,
                 len(events.held.objects))
    if index == 0:
        _dead_letters(out, ctx, static.dead, codec_)
    static.dead.clear()
    last_commit = time.monotonic()
    faults = bool(os.environ.get(FAIL_TASK_VAR))
    try:
        while owned:
            changed = static.refresh()
            if changed is not None and events is not None:
                events.change(*changed)
            if static.dead:
                if index == 0:
                    _dead_letters(out, ctx, static.dead, codec_)
                static.dead.clear()
            msgs = [m for m in _poll(reader) if m.error() is None]
            if msgs:
                answer(msgs, static, out, ctx, period, codec_, events)
                if faults:
                    fail_task_once()  # after its answers, before their commit: they come again
            out.poll()
            now = time.monotonic()
            # what a commit covers is summed up in it: no record is answered without being
            # counted (at least once, one replayed after a crash counts again)
            if now - last_commit >= (ctx.commit_interval_s if period.records else PERIOD_S):
                positions = _positions(reader)
                summary = period.summary(ctx.app_id, STRATEGY, index, ctx.workers, PARTITIONS,
                                         positions, static.offsets())
                delivery.end(reader, summary, positions,
                             [] if changelog is None else events.changed(changelog),
                             period.load(summary, index) if period.records else None)
                period = Period()
                last_commit = now
    finally:
        reader.close()
        static.close()
    delivery.close()
    yield len(owned)


def _poll(reader: Consumer) -> list[Any]:
    """The records waiting, at once; when none wait, the first to arrive within ``POLL_S``
    and those that came with it. (``consume`` with a timeout waits until it has its number of
    records or the timeout passed, so it would hold records that wait for company.)"""
    msgs = reader.consume(POLL_RECORDS, timeout=0)
    if msgs:
        return msgs
    first = reader.poll(POLL_S)
    return [] if first is None else [first, *reader.consume(POLL_RECORDS - 1, timeout=0)]


def _assign(reader: Consumer, ctx: TaskContext, index: int, resume: dict[int, int]
            ) -> list[int]:
    """Assign the task's partitions where the output recorded its progress (``resume``), else
    at the group's committed offsets, else ``starting_offsets``; the partitions."""
    parts = [p for p in topic_partitions(reader, ctx.publications, conf=ctx.kafka_conf)
             if p % ctx.workers == index]
    fresh = OFFSET_BEGINNING if ctx.starting_offsets == "earliest" else OFFSET_END
    committed = _committed(reader, [TopicPartition(ctx.publications, p) for p in parts],
                           ctx.outage_limit)
    reader.assign([TopicPartition(ctx.publications, tp.partition, resume.get(
        tp.partition, tp.offset if tp.offset >= 0 else fresh)) for tp in committed])
    return parts


def _committed(reader: Consumer, parts: list[TopicPartition], outage_limit: float
               ) -> list[TopicPartition]:
    """The group's committed offsets of ``parts``. A partition the group coordinator answered
    with an error (it was loading, or moved) is asked again: taken as never committed, it
    would start over at ``starting_offsets`` and answer the whole partition again."""
    deadline = time.monotonic() + outage_limit
    while True:
        got = reader.committed(parts, timeout=30)
        failed = [tp for tp in got if tp.error is not None]
        if not failed:
            return got
        if time.monotonic() > deadline:
            raise KafkaUnavailable(f"the committed offsets of {failed[0].topic}"
                                   f"[{failed[0].partition}]: {failed[0].error}")
        time.sleep(0.5)


def _positions(reader: Consumer) -> dict[int, int]:
    """Partition -> the next offset to read, of the partitions read so far."""
    return {tp.partition: tp.offset for tp in reader.position(reader.assignment())
            if tp.offset >= 0}


def answer(msgs: list[Any], static: WholeStatic, out: Sender, ctx: TaskContext,
           period: Period, codec_: Any, events: TaskEvents | None = None) -> None:
    """Decode, match and produce the answers of one poll's records, and the geofence events
    of the positions among them."""
    began = time.perf_counter()
    pubs = decode_publications([m.value() for m in msgs])
    dead = [(msgs[i], reason) for i, reason in pubs.errors]
    decoded = np.flatnonzero(pubs.ok)
    geoms = shapely.from_wkb(pubs.geometries, on_invalid="ignore") if len(decoded) else \
        np.empty(0, object)
    problems = geometry_problems(geoms)
    good = np.array([p is None for p in problems], bool)
    parts = np.array([m.partition() for m in msgs], np.int64)[decoded][good]
    dead += [(msgs[decoded[i]], "unreadable WKB geometry" if p == "missing geometry" else p)
             for i, p in enumerate(problems) if p is not None]
    found = static.match(geoms[good])
    ids, times = pubs.ids[good][found.keys], pubs.event_times[good][found.keys]
    match_ms = int(time.time() * 1000)
    if len(found.keys):
        values = encode_matches(ids, found.offsets, found.sub_ids, times, match_ms, NO_BATCH,
                                ctx.app_id)
        out.send_many(ctx.matches, values, [str(pid).encode() for pid in ids.tolist()])
    objects = pubs.object_ids[good]
    moving = np.flatnonzero(objects != None)  # noqa: E711 - elementwise, on an object array
    if events is not None and len(moving):
        counts, hit_ids = hits_of(found, moving)
        keys, records = events.events(objects[moving], pubs.ids[good][moving],
                                      pubs.event_times[good][moving], counts, hit_ids,
                                      match_ms, parts[moving], geoms[good][moving])
        if records:
            out.send_many(ctx.events, records, keys)
    if dead:
        _dead_letters(out, ctx, [DeadRecord(m.topic(), m.partition(), m.offset(), m.key(),
                                            m.value(), reason) for m, reason in dead], codec_)
    period.answered(len(msgs), len(dead), times, match_ms, time.perf_counter() - began,
                    len(found.sub_ids), found.candidates)


def hits_of(found: BatchMatches, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """How many subscriptions each of ``rows`` (sorted keys of the matched batch) matched, and
    their ids, row after row."""
    counts = np.zeros(len(rows), np.int64)
    if not len(found.keys):
        return counts, np.empty(0, np.int64)
    at = np.minimum(np.searchsorted(found.keys, rows), len(found.keys) - 1)
    hit = found.keys[at] == rows
    start = found.offsets[at]
    counts[hit] = (found.offsets[at + 1] - start)[hit]
    first = np.repeat(start - np.cumsum(counts) + counts, counts)
    return counts, found.sub_ids[first + np.arange(int(counts.sum()))]


def _dead_letters(out: Sender, ctx: TaskContext, dead: list[DeadRecord], codec_: Any) -> None:
    """Each record that could not be used, with its reason, to the dead-letter topic."""
    now = int(time.time() * 1000)
    for d in dead:
        out.send(ctx.dead_letter, codec_.encode("DeadLetter", {
            "topic": d.topic, "partition": d.partition, "offset": d.offset, "reason": d.reason,
            "key": d.key, "payload": d.value, "time": now, "app_id": ctx.app_id}), key=d.key)
