"""The events query: moving objects' positions with their fences in, geofence events out.

A second streaming query of the app reads the ``ObjectPositions`` records its matching
query writes (``app.events.positions``; read committed, so under exactly-once only batches whose
transaction committed), groups them by bucket of objects and runs each bucket through
``geops.events`` in Spark's stateful operator ``applyInPandasWithState``: the bucket's state
(its fences' detect kinds, the shapes of those that ask for cross, and each of its objects'
last event time, place and fences) is in Spark's state store (RocksDB), checkpointed with the
query under ``<checkpoint>/events``. A bucket rather than an object is the key because the
state store costs about a millisecond per key and batch (``docs/results/events/state``).

The events go to the events topic as ``GeofenceEvent`` records keyed by object id, through
the app's delivery mode (``app.batch.output``): under exactly-once each batch's events are
one transaction, and a batch Spark runs again after a crash whose transaction committed is
not written again (its marker rides on the batch's last event).
"""

from __future__ import annotations

import logging
import pickle
from collections.abc import Callable, Iterable, Iterator, Mapping
from functools import partial
from typing import Any

import numpy as np
import shapely

from geops.events import (
    EXPIRED,
    KIND_NAMES,
    EventColumns,
    Fences,
    ObjectState,
    expire_state,
    run_batch,
    run_objects,
)
from schemas import codec
from schemas.event_encoder import KINDS, Packed, encode_events, pack_strings
from schemas.int_pack import IntFrame

log = logging.getLogger("geops.app.events")

EVENT_COLUMNS = ("object_id", "subscription_id", "kind", "reason", "publication_id",
                 "event_time", "match_time", "batch_id")
# the operator's output: a row per bucket and batch, its events encoded and packed
# (``schemas.event_encoder.Packed``) with their keys (object ids), and its count of positions
# dropped as older than their object's last, for the batch's log. A row per event cost Spark
# more than the operator's work: pandas to Arrow, Arrow to the JVM's rows and back to the
# driver, eight columns each.
OUTPUT_DDL = ("keys binary, key_ends binary, events binary, event_ends binary, "
              "dropped long")
# an event's kind is its code in geops.events, which the encoder writes as the index of its
# DetectKind symbol
assert tuple(kind.lower() for kind in KINDS) == KIND_NAMES
STATE_DDL = "held binary"
# Up to this many positions a record's events are found object by object
# (``geops.events.run_objects``, the offline engine's own path) rather than in one NumPy pass
# over the record (``run_batch``): the same events and states, and for a real-time task's
# poll of one or a few positions the pass's fixed cost a call (some sixty NumPy calls) is
# most of what it costs.
FEW_POSITIONS = 8


class Held:
    """What a bucket keeps from batch to batch: the fences (id -> ``DetectKind`` mask, and
    the table ``geops.events`` takes) and its objects' states; pickled into the state store
    once a batch, so in its most compact form: the table as the gaps between its sorted ids
    (a byte each where they are dense) and its masks, each object's state a plain tuple."""

    def __init__(self, fences: dict[int, int] | None = None,
                 objects: dict[str, ObjectState] | None = None, dropped: int = 0,
                 clock: int = 0):
        self._fences: dict[int, int] | None = dict(fences or {})
        self.objects = dict(objects or {})
        self.dropped = dropped  # positions older than their object's last, since it began
        self.clock = clock  # the latest event time the stream has seen (ObjectPositions)
        # the shapes of the fences that ask for cross (a geometry, or its WKB as the
        # ObjectPositions records bring it): without them no track is tested
        self.shapes: dict[int, Any] = {}
        self._table: Fences | None = None

    @property
    def fences(self) -> dict[int, int]:
        """Fence id -> ``DetectKind`` mask (built from the table when only that is held)."""
        if self._fences is None:
            table = self.table()
            self._fences = dict(zip(table.ids.tolist(), table.detect.tolist(), strict=True))
        return self._fences

    def __getstate__(self) -> dict:
        table = self.table()
        gaps = np.diff(table.ids)
        top = int(gaps.max()) if len(gaps) else 0
        small = next(t for t in (np.uint8, np.uint16, np.uint32, np.int64)
                     if top <= np.iinfo(t).max)
        return {"first": int(table.ids[0]) if len(table.ids) else 0,
                "gaps": gaps.astype(small), "detect": table.detect,
                # a state without a place (the stream knows none) as three fields
                "objects": {name: tuple(st[:3]) if st[3:4] in ((), (None,)) else tuple(st)
                            for name, st in self.objects.items()},
                "dropped": self.dropped, "clock": self.clock,
                **({"shapes": {i: g if isinstance(g, bytes) else shapely.to_wkb(g)
                               for i, g in self.shapes.items()}} if self.shapes else {})}

    def __setstate__(self, state: dict) -> None:
        # the objects' states stay plain tuples: ``run_batch`` reads them by index, and
        # making each an ObjectState would cost most of the load
        self.__init__(objects=state["objects"], dropped=state["dropped"], clock=state["clock"])
        self.shapes = dict(state.get("shapes", {}))
        if "table" in state:  # as the state was pickled before it was compacted
            ids, detect = state["table"]
        else:
            ids = np.cumsum(np.append(state["first"], state["gaps"].astype(np.int64)))
            ids = ids[:len(state["detect"])]
            detect = state["detect"]
        self._fences = None
        self._table = Fences(ids, self._shapes_of(ids), detect)

    def change_fences(self, complete: bool, ids: list[int], masks: list[int],
                      shapes: list[bytes] | None = None) -> None:
        """Apply a record's fence change (``shapes``, row for row with ``ids``: the WKB of
        a fence that asks for cross, else empty); a removed fence is forgotten by every object
        (added again, it starts fresh)."""
        if not complete and not ids:
            return
        if complete:
            self.shapes = {}
        for k, i in enumerate(ids):
            shape = shapes[k] if shapes else None
            if shape is not None and (not isinstance(shape, bytes) or shape):
                self.shapes[i] = shape
            else:
                self.shapes.pop(i, None)
        before = set(self.fences)
        if complete:
            self._fences = {i: m for i, m in zip(ids, masks, strict=True) if m}
        else:
            for i, m in zip(ids, masks, strict=True):
                if m:
                    self.fences[i] = m
                else:
                    self.fences.pop(i, None)
        self._table = None
        removed = before - set(self.fences)
        if removed:
            for name, (last, fence_ids, since, *place) in list(self.objects.items()):
                if removed.intersection(fence_ids):
                    keep = [k for k, i in enumerate(fence_ids) if i not in removed]
                    self.objects[name] = ObjectState(last, tuple(fence_ids[k] for k in keep),
                                                     tuple(since[k] for k in keep), *place)

    def table(self) -> Fences:
        """The fences as ``geops.events`` takes them (the hits come with the positions: no
        shapes but those of ``shapes``, for the tracks)."""
        if self._table is None:
            ids = np.array(sorted(self.fences), np.int64)
            self._table = Fences(ids, self._shapes_of(ids),
                                 np.array([self.fences[i] for i in ids.tolist()], np.uint8))
        return self._table

    def _shapes_of(self, ids: np.ndarray) -> np.ndarray:
        """The geometry of each of ``ids`` (sorted) that asks for cross, None for the others:
        a pass over the few shapes, not over every fence."""
        shapes = np.full(len(ids), None, object)
        if self.shapes and len(ids):
            held = np.fromiter(self.shapes, np.int64, len(self.shapes))
            at = np.minimum(np.searchsorted(ids, held), len(ids) - 1)
            there = ids[at] == held
            values = np.empty(len(held), object)
            values[:] = list(self.shapes.values())
            wkb = np.flatnonzero([isinstance(g, bytes) for g in values.tolist()])
            values[wkb] = shapely.from_wkb(values[wkb])
            shapes[at[there]] = values[there]
        return shapes


def bucket_events(held: Held, records: list[dict], ttl_ms: int | None,
                  due: Callable[[int], Iterable[str]] | None = None) -> dict[str, np.ndarray]:
    """The events (columns ``EVENT_COLUMNS``; a publication id of an expiry is of no meaning,
    its reason says so) of a bucket's ``ObjectPositions`` records, taken in batch order: each
    one's fence change, its positions, then the objects its clock expires (``due``: the held
    objects last seen before a time, for a caller that indexes them; else every object is
    looked at); ``held`` is updated."""
    parts: list[tuple[EventColumns, dict]] = []
    for rec in sorted(records, key=lambda r: r["batch_id"]):
        held.change_fences(rec["fences_complete"], rec["fence_ids"], rec["fence_detect"],
                           rec.get("fence_shapes"))
        parts.append((_positions(held, rec, ttl_ms), rec))
        parts.append((_expire(held, rec, ttl_ms, due), rec))
    cols = EventColumns.concat([c for c, _ in parts])
    return {"object_id": cols.object_id, "subscription_id": cols.subscription_id,
            "kind": cols.kind.astype(np.int32),
            "reason": np.where(cols.expired, EXPIRED, None).astype(object),
            "publication_id": cols.publication_id, "expired": cols.expired,
            "event_time": cols.event_time,
            "match_time": np.concatenate([np.full(len(c), r["match_time"], np.int64)
                                          for c, r in parts] or [np.empty(0, np.int64)]),
            "batch_id": np.concatenate([np.full(len(c), r["batch_id"], np.int64)
                                        for c, r in parts] or [np.empty(0, np.int64)])}


def _positions(held: Held, rec: dict, ttl_ms: int | None) -> EventColumns:
    """The events of a record's positions (``geops.events.run_batch``; their places, for
    ``cross``, where the record has them)."""
    n = len(rec["publication_ids"])
    if not n:
        return EventColumns.of(())
    fences = held.table()
    names = np.array(rec["object_ids"], object)
    pids = np.array(rec["publication_ids"], np.int64)
    times = np.array(rec["event_times"], np.int64)
    counts = np.array(rec["hit_counts"], np.int64)
    hit_ids = (IntFrame(rec["hit_base"], rec["hit_width"]).unpack(rec["hit_fences"])
               if rec.get("hit_width") else np.array(rec["hit_ids"], np.int64))  # 0: before v3
    owner = np.repeat(np.arange(n), counts)
    at = np.minimum(np.searchsorted(fences.ids, hit_ids), max(len(fences) - 1, 0))
    known = (fences.ids[at] == hit_ids) if len(fences) else np.zeros(len(hit_ids), bool)
    inverse = np.unique(names, return_inverse=True)[1]
    order = np.lexsort((pids, times, inverse))
    rank = np.empty(n, np.intp)
    rank[order] = np.arange(n)
    hit_pos, hit_fence = rank[owner[known]], at[known]
    by = np.lexsort((hit_fence, hit_pos))
    places = rec.get("points")
    if places is None and rec.get("places"):  # an ObjectPositions record from version 4 on
        places = np.frombuffer(rec["places"], "<f8").reshape(-1, 2)
    args = (held.objects, fences, ttl_ms, names[order], pids[order], times[order],
            (hit_pos[by], hit_fence[by]), None if places is None else np.asarray(places)[order])
    if n <= FEW_POSITIONS:
        found, dropped = run_objects(*args)
        events = EventColumns.of(found)
    else:
        events, dropped = run_batch(*args)
    held.dropped += dropped
    return events


def _expire(held: Held, rec: dict, ttl_ms: int | None,
            due: Callable[[int], Iterable[str]] | None = None) -> EventColumns:
    """The expiry exits of the bucket's objects unseen since before the stream's clock minus
    the TTL (``EventEngine.expire``: exact when event times across objects are ordered within
    the TTL); they are forgotten."""
    held.clock = max(held.clock, rec["clock"])
    if ttl_ms is None or not held.objects:
        return EventColumns.of(())
    events = []
    fences = held.table()
    names = (due(held.clock - ttl_ms) if due is not None else
             (n for n, st in held.objects.items() if st[0] + ttl_ms < held.clock))
    for name in sorted(names):
        _, found = expire_state(held.objects.pop(name), name, fences, ttl_ms, held.clock)
        events += found
    return EventColumns.of(events)


def _operator(ttl_ms: int | None, key: tuple, frames: Iterator[Any], state: Any
              ) -> Iterator[Any]:
    """``applyInPandasWithState``'s function: one bucket's records of a batch."""
    import pandas as pd

    held = pickle.loads(state.get[0]) if state.exists else Held()
    dropped = held.dropped
    c = codec()
    records = [c.decode_as("ObjectPositions", v) for frame in frames
               for v in frame["value"].tolist()]
    cols = bucket_events(held, records, ttl_ms)
    state.update((pickle.dumps(held, protocol=pickle.HIGHEST_PROTOCOL),))
    if len(cols["kind"]) or held.dropped > dropped:
        keys = pack_strings(cols["object_id"].tolist())
        events = encode_events(keys, cols["subscription_id"], cols["kind"],
                               cols["reason"], ~cols["expired"], cols["publication_id"],
                               cols["event_time"], cols["match_time"], cols["batch_id"])
        yield pd.DataFrame({"keys": [keys.data], "key_ends": [keys.ends_bytes()],
                            "events": [events.data], "event_ends": [events.ends_bytes()],
                            "dropped": [held.dropped - dropped]})


def events_frame(spark: Any, options: Mapping[str, str], app_id: str, ttl_ms: int | None
                 ) -> Any:
    """The streaming DataFrame of events: the positions topic (``options`` of Spark's
    connector) through the bucket operator, this app's records only."""
    from pyspark.sql import functions as F

    raw = spark.readStream.format("kafka").options(**options).load()
    mine = raw.where(F.col("key").cast("string").startswith(f"{app_id}/"))
    return (mine.select(F.col("key").cast("string").alias("bucket"), "value")
            .groupBy("bucket")
            .applyInPandasWithState(partial(_operator, ttl_ms), OUTPUT_DDL, STATE_DDL,
                                    "Append", "NoTimeout"))


class EventsWriter:
    """The events query's ``foreachBatch``: a batch's events to the events topic."""

    def __init__(self, output: Any, topic: str):
        self.output = output  # app.batch.output, of the events query's checkpoint
        self.topic = topic

    def __call__(self, df: Any, batch_id: int) -> None:
        if self.output.written(batch_id):
            log.info("events batch %d: committed to Kafka before a restart; not written "
                     "again", batch_id)
            return
        import pyarrow.compute as pc

        table = df.toArrow()  # a row per bucket
        dropped = pc.sum(table.column("dropped")).as_py() or 0
        keys: list[bytes] = []
        values: list[bytes] = []
        for row in table.to_pylist():
            keys += Packed.of(row["keys"], row["key_ends"]).split()
            values += Packed.of(row["events"], row["event_ends"]).split()
        n = len(values)
        out = self.output.open(batch_id)
        if n:
            out.send_many(self.topic, values, keys, self.output.headers(batch_id))
        self.output.finish(batch_id)
        if dropped:
            log.info("events batch %d: positions older than their object's last, dropped: %d",
                     batch_id, dropped)
        if n:
            log.info("events batch %d: %d geofence events", batch_id, n)

    def close(self, abandon: bool = False) -> None:
        self.output.close(abandon)



def positions_end(kafka_conf: Mapping[str, str], topic: str, outage_limit: float) -> str:
    """The end offsets of the positions topic now, as the connector's ``startingOffsets``;
    ``KafkaUnavailable`` (one line) when the topic is missing or Kafka does not answer."""
    import json

    from kafkaio.offsets import EndOffsets
    from kafkaio.retry import Outage, with_retry

    probe = EndOffsets(kafka_conf, timeout=10.0)
    try:
        ends = with_retry(lambda: probe(topic),
                          Outage(kafka_conf.get("bootstrap.servers", "?"), outage_limit),
                          f"end offsets of {topic}")
    finally:
        probe.close()
    return json.dumps({topic: {str(p): o for p, o in ends.items()}})


class EventsQuery:
    """The events query of an app, drained after the matching query stops.

    With a checkpoint it starts with the app and goes on where it stopped. Without one it
    starts once the matching query first writes positions (an app without moving objects pays
    nothing for it, ~3 s of start and stop per run), at ``starting``: the positions topic's end
    as of the app's start (``positions_end``), so that it misses none of them.
    """

    def __init__(self, spark: Any, options: Mapping[str, str], checkpoint: str, app_id: str,
                 ttl_ms: int | None, writer: EventsWriter, starting: str):
        self.spark = spark
        self.options = dict(options)
        self.checkpoint = checkpoint
        self.app_id = app_id
        self.ttl_ms = ttl_ms
        self.writer = writer
        self.starting = starting  # startingOffsets of a new checkpoint
        self.query: Any = None

    def prepare(self) -> None:
        """Before the matching query starts: start now when the checkpoint exists (positions
        may wait for it)."""
        from pathlib import Path

        if (Path(self.checkpoint) / "offsets").exists():
            self.start()

    def start(self) -> Any:
        """Start (or start again, from the checkpoint) the query."""
        options = {**self.options, "startingOffsets": self.starting}  # new checkpoints only
        log.info("starting the events query (checkpoint %s)", self.checkpoint)
        # as many state partitions as cores (fixed by its first batch): each is a task of
        # each batch, and Spark's default of 200 (or the session's 8) cost more than the
        # buckets' work at a few thousand positions a second
        self.spark.conf.set("spark.sql.shuffle.partitions",
                            str(self.spark.sparkContext.defaultParallelism))
        self.query = (events_frame(self.spark, options, self.app_id, self.ttl_ms)
                      .writeStream.foreachBatch(self.writer)
                      .option("checkpointLocation", self.checkpoint)
                      .trigger(processingTime="0 seconds")
                      .queryName(f"{self.app_id}-events").start())
        return self.query

    def failure(self) -> str | None:
        """The failure text of a query that ended with one, else None."""
        if self.query is None or self.query.isActive:
            return None
        exc = self.query.exception()
        return None if exc is None else str(exc)

    def drain(self, wanted: bool) -> None:
        """Process every position already written (the matching query has stopped; ``wanted``:
        it wrote positions, so a query not started yet starts now), then stop."""
        if self.query is None and wanted:
            self.start()
        if self.query is None or not self.query.isActive:
            return
        try:
            self.query.processAllAvailable()
        finally:
            self.query.stop()
