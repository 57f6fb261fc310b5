"""The matching query's side of the geofence events: each batch's positions with their fences.

A fence is a subscription with detect kinds; it sits in the partitioned static side like any
subscription, matched by its shape (its distance fence, or its geometry) and the relation
intersects (``app.subscriptions.scan``), so the join that matches a position also finds the
fences it is in, on the workers that own them, balanced like any other load. What the events
need of it is per position the fences it is in; the state (each object's fences) lives in the
events query (``app.events.query``), in Spark's state store.

A batch with positions or fence changes writes, in its own output (its transaction under
exactly-once), one ``ObjectPositions`` record per bucket of objects: the positions of its
objects with their fences and places, what changed in the fences (every fence,
``fences_complete``, in the first batch a process writes; after that only the fences added,
changed or removed; the shape of each that asks for cross, whose tracks the events query tests
itself), and the clock (the latest event time seen), by which a bucket expires its silent
objects. A bucket's records go to one topic partition (keyed by bucket), in batch order.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import shapely

from app.records import Positions
from geops.model import DetectKind
from schemas.int_pack import IntFrame

# Objects are spread over this many buckets (a bucket's objects share one state in the events
# query: one Python call per bucket and batch, not per object; ``docs/results/events/state``).
# Fixed for a checkpoint: an object must stay in its bucket.
BUCKETS = 64


def bucket_of(object_ids: Sequence[str]) -> np.ndarray:
    """The bucket of each object id (CRC-32 of its UTF-8 bytes, the same in every process)."""
    return np.fromiter((zlib.crc32(o.encode()) % BUCKETS for o in object_ids), np.int32,
                       len(object_ids))


def bucket_key(app_id: str, bucket: int) -> bytes:
    """The Kafka key of a bucket's records: ``<app id>/<bucket>``, so that an events query
    takes its own app's records only."""
    return f"{app_id}/{bucket}".encode()


class FenceTable:
    """The fences as the matching query knows them (id -> ``DetectKind`` bit mask; and the
    shapes, as WKB, of those that ask for cross: the events query tests tracks against them),
    and what changed since the last batch written."""

    def __init__(self, ids: np.ndarray, detect: np.ndarray,
                 shapes: dict[int, bytes] | None = None):
        self.masks = {int(i): int(m) for i, m in zip(np.asarray(ids).tolist(),
                                                     np.asarray(detect).tolist(), strict=True)
                      if m}
        self.shapes = {i: g for i, g in (shapes or {}).items()
                       if self.masks.get(i, 0) & DetectKind.CROSS}
        self.changed: dict[int, int] = {}
        self.complete = True  # the next records carry every fence
        self._ids: np.ndarray | None = None

    def apply(self, upserts: np.ndarray, detect: np.ndarray, deletes: np.ndarray,
              geoms: np.ndarray | None = None) -> None:
        """One batch's subscription changes: ``deletes`` (ids), then ``upserts`` with their
        masks (0: not, or no longer, a fence) and shapes (``geoms``: a fence that asks for
        cross changes when its shape does)."""
        for sid in np.setdiff1d(np.asarray(deletes, np.int64), upserts).tolist():
            self.shapes.pop(sid, None)
            if self.masks.pop(sid, None) is not None:
                self.changed[sid] = 0
        crossing = (np.asarray(detect) & int(DetectKind.CROSS)) > 0
        wkb = (shapely.to_wkb(np.asarray(geoms, object)[crossing]).tolist()
               if geoms is not None and crossing.any() else [])
        shapes = dict(zip(np.asarray(upserts)[crossing].tolist(), wkb, strict=True))
        for sid, mask in zip(np.asarray(upserts).tolist(), np.asarray(detect).tolist(),
                             strict=True):
            shape = shapes.get(sid)
            moved = shape is not None and self.shapes.get(sid) != shape
            if shape is not None:
                self.shapes[sid] = shape
            else:
                self.shapes.pop(sid, None)
            if mask and (self.masks.get(sid) != mask or moved):
                self.masks[sid] = mask
                self.changed[sid] = mask
            elif not mask and self.masks.pop(sid, None) is not None:
                self.changed[sid] = 0
        self._ids = None

    @property
    def ids(self) -> np.ndarray:
        """The fence ids, ascending."""
        if self._ids is None:
            self._ids = np.array(sorted(self.masks), np.int64)
        return self._ids

    def pending(self) -> tuple[bool, list[int], list[int], list[bytes]]:
        """(complete, ids, masks, shapes: WKB of a fence asking for cross, else b"") the next
        records carry."""
        table = self.masks if self.complete else self.changed
        ids = sorted(table)
        return (self.complete, ids, [table[i] for i in ids],
                [self.shapes.get(i, b"") for i in ids] if self.shapes else [])

    def written(self) -> None:
        """The pending change reached Kafka with a batch's output."""
        self.changed.clear()
        self.complete = False


@dataclass
class PositionHits:
    """A batch's positions, each with the fences it is in (CSR: ``counts`` per position)."""

    object_ids: np.ndarray
    publication_ids: np.ndarray
    event_ms: np.ndarray
    counts: np.ndarray
    hits: np.ndarray
    places: np.ndarray | None = None    # (n, 2) float64, where tracks end (``cross``)


def position_hits(positions: Sequence[Positions], matched_keys: np.ndarray,
                  offsets: np.ndarray, sub_ids: np.ndarray, fences: np.ndarray
                  ) -> PositionHits:
    """The fences each position is in: its matched subscriptions (``matched_keys`` sorted,
    their subscription ids ``sub_ids`` per ``offsets``) that are ``fences`` (sorted).

    The fences among all matches are found in one pass, and only they are gathered per
    position: a position matches several times as many subscriptions as it is in fences, and
    a gather of every match cost a batch of 129,000 positions ~0.3 s more in the driver."""
    n = sum(len(p.keys) for p in positions)
    empty = np.empty(0, np.int64)
    if not n:
        return PositionHits(np.empty(0, object), empty, empty, np.empty(0, np.int32), empty,
                            np.empty((0, 2)))
    keys = np.concatenate([p.keys for p in positions])
    counts = np.zeros(n, np.int32)
    hits = empty
    if len(matched_keys) and len(fences):
        at = np.minimum(np.searchsorted(matched_keys, keys), len(matched_keys) - 1)
        found = np.flatnonzero(matched_keys[at] == keys)
        m = at[found]  # each found position's matched key
        in_fence = np.flatnonzero(np.isin(sub_ids, fences))  # where in sub_ids, ascending
        # the fences of matched key m: in_fence[bounds[m]:bounds[m + 1]]
        bounds = np.searchsorted(in_fence, np.asarray(offsets, np.int64))
        starts, lengths = bounds[m], bounds[m + 1] - bounds[m]
        counts[found] = lengths
        take = (np.repeat(starts - np.cumsum(lengths) + lengths, lengths)
                + np.arange(int(lengths.sum())))
        hits = sub_ids[in_fence[take]].astype(np.int64)
    places = [np.full((len(p.keys), 2), np.nan) if p.places is None else p.places
              for p in positions]
    return PositionHits(np.concatenate([p.object_ids for p in positions]),
                        np.concatenate([p.ids for p in positions]),
                        np.concatenate([p.event_ms for p in positions]), counts, hits,
                        np.concatenate(places).astype("<f8"))


def bucket_records(app_id: str, batch_id: int, match_ms: int, hits: PositionHits,
                   table: FenceTable, clock: int) -> list[tuple[bytes, dict]]:
    """(key, ``ObjectPositions`` record) for every bucket: its positions, the fence change,
    and ``clock``, the latest event time seen, by which each bucket expires the objects
    unseen for the TTL (also a bucket without positions of its own)."""
    complete, fence_ids, masks, shapes = table.pending()
    buckets = bucket_of(hits.object_ids.tolist())
    order = np.argsort(buckets, kind="stable")  # positions by bucket, in their order within
    hit_bucket = np.repeat(buckets, hits.counts)
    hit_order = np.argsort(hit_bucket, kind="stable")
    at = np.searchsorted(buckets[order], np.arange(BUCKETS + 1))
    hit_at = np.searchsorted(hit_bucket[hit_order], np.arange(BUCKETS + 1))
    frame = IntFrame.of(hits.hits)  # one frame for every bucket of the batch
    out = []
    for b in range(BUCKETS):
        rows = order[at[b]:at[b + 1]]
        out.append((bucket_key(app_id, b), {
            "app_id": app_id, "batch_id": batch_id, "match_time": match_ms, "bucket": b,
            "clock": clock,
            "fences_complete": complete, "fence_ids": fence_ids, "fence_detect": masks,
            "object_ids": hits.object_ids[rows].tolist(),
            "publication_ids": hits.publication_ids[rows].tolist(),
            "event_times": hits.event_ms[rows].tolist(),
            "hit_counts": hits.counts[rows].tolist(), "hit_ids": [],
            "hit_fences": frame.pack(hits.hits[hit_order[hit_at[b]:hit_at[b + 1]]]),
            "hit_base": frame.base, "hit_width": frame.width,
            "places": b"" if hits.places is None else hits.places[rows].tobytes(),
            "fence_shapes": shapes}))
    return out
