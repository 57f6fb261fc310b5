"""Geofence events in the real-time task: computed with the position's matches, written at once.

All of one object's positions are keyed by the object, so they reach one partition of the
publications topic and so one task: the task holds every one of its objects' state (its last
event time and the fences it is in) and the fences' detect kinds. A position's fences are the
detecting subscriptions among its matches (a fence is matched by its shape, relation
intersects), as in the micro-batch path's events query, and the events follow by the same rules
and code (``app.events.query.bucket_events`` over ``geops.events``): enter, exit, inside,
outside, cross (the task holds every fence's shape, so it tests the tracks against those that
ask for it), positions out of order dropped, fences that change forgotten by the objects that were
in them, objects unseen for the TTL expired once the task's clock (the latest event time of its
positions) passes it. The task also remembers each object's publications partition and which
objects changed since its last commit (``changed``): what that commit writes to the
object-state topic (``changelog``), from which a task started again restores the states
(``restore``).

A task holds every object seen within the TTL, and each poll may expire some: rather than look
at every object each poll, the task keeps them in a heap by last event time (``_due``); the
entries of an object seen again since are left in place and skipped when they come up.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Mapping

import numpy as np

from app.events.query import Held, bucket_events
from app.realtime.changelog import Changelog, StateRecord, Tracked
from geops.events import position_points
from geops.model import DetectKind
from schemas.event_encoder import encode_events, pack_strings

STALE_MIN = 1024  # stale heap entries kept at the least before the heap is built anew


class TaskEvents:
    """The events of the positions one task answers."""

    def __init__(self, fences: Mapping[int, int], ttl_ms: int | None, batch_id: int,
                 shapes: Mapping[int, object] | None = None):
        self.held = Held({i: m for i, m in fences.items() if m})
        # the shapes of the fences that ask for cross
        self.held.shapes = {i: g for i, g in (shapes or {}).items()
                            if fences.get(i, 0) & DetectKind.CROSS}
        self.held.objects = Tracked()
        self.ttl_ms = ttl_ms
        self.batch_id = batch_id
        self.clock = 0
        self.partition_of: dict[str, int] = {}  # object -> its publications partition
        self._seen: list[tuple[int, str]] = []  # heap of (last event time, object)
        self._polled: list[str] = []  # the objects of the poll being taken

    def restore(self, states: Mapping[str, tuple], partitions: Mapping[str, int],
                clock: int) -> None:
        """Go on from the states a changelog kept (``Changelog.restore``)."""
        self.held.objects = Tracked(states)
        self.partition_of = dict(partitions)
        self.clock = max(self.clock, clock)
        self._index(())

    def changed(self, changelog: Changelog) -> list[StateRecord]:
        """The object-state records of the objects changed since the last call (``changelog``:
        a ``Changelog``)."""
        objects = self.held.objects
        if not objects.changed:
            return []
        records = changelog.records(objects, objects.changed, self.partition_of, self.clock)
        for name in objects.changed:
            if name not in objects:
                self.partition_of.pop(name, None)
        objects.changed = set()
        return records

    def change(self, ids: np.ndarray, masks: np.ndarray, shapes: np.ndarray | None = None
               ) -> None:
        """Subscriptions changed: each id's detect mask now (0: no fence, or deleted), and
        its shape (None where deleted)."""
        cross = [shapes[k] if shapes is not None and m & DetectKind.CROSS else None
                 for k, m in enumerate(masks.tolist())]
        self.held.change_fences(False, ids.tolist(), masks.tolist(), cross)

    def events(self, object_ids: np.ndarray, publication_ids: np.ndarray,
               event_times: np.ndarray, hit_counts: np.ndarray, hit_ids: np.ndarray,
               match_ms: int, partitions: np.ndarray, geoms: np.ndarray | None = None
               ) -> tuple[list[bytes], list[bytes]]:
        """The GeofenceEvent records (keys, values) of one poll's positions; ``hit_ids``: the
        subscriptions each position matched, ``hit_counts`` of them each, in order;
        ``partitions``: the publications partition each position came from; ``geoms`` the
        positions' geometries (the tracks' ends, for ``cross``)."""
        self.partition_of.update(zip(object_ids.tolist(), partitions.tolist(), strict=True))
        if len(event_times):
            self.clock = max(self.clock, int(np.max(event_times)))
        record = {"fences_complete": False, "fence_ids": [], "fence_detect": [],
                  "object_ids": object_ids.tolist(), "publication_ids": publication_ids,
                  "event_times": event_times, "hit_counts": hit_counts, "hit_ids": hit_ids,
                  "hit_width": 0, "clock": self.clock, "match_time": match_ms,
                  "batch_id": self.batch_id,
                  "points": None if geoms is None else position_points(geoms)}
        self._polled = record["object_ids"]
        cols = bucket_events(self.held, [record], self.ttl_ms, self._due)
        self._index(self._polled)
        if not len(cols["kind"]):
            return [], []
        keys = pack_strings(cols["object_id"].tolist())
        values = encode_events(keys, cols["subscription_id"], cols["kind"], cols["reason"],
                               ~cols["expired"], cols["publication_id"], cols["event_time"],
                               cols["match_time"], cols["batch_id"])
        return keys.split(), values.split()

    def _index(self, names: Iterable[str]) -> None:
        """Put ``names``' states in the heap; all of them anew (``names`` empty, or stale
        entries outnumber the objects)."""
        objects = self.held.objects
        if not names or len(self._seen) > 2 * len(objects) + STALE_MIN:
            self._seen = [(int(st[0]), name) for name, st in objects.items()]
            heapq.heapify(self._seen)
            return
        for name in set(names):
            st = objects.get(name)
            if st is not None:
                heapq.heappush(self._seen, (int(st[0]), name))

    def _due(self, before: int) -> list[str]:
        """The held objects last seen before ``before`` (``bucket_events``' ``due``): those
        of the heap, and those of the poll being taken, not in the heap yet."""
        objects = self.held.objects
        due: set[str] = set()
        while self._seen and self._seen[0][0] < before:
            last, name = heapq.heappop(self._seen)
            st = objects.get(name)
            if st is not None and st[0] == last:
                due.add(name)
        due.update(n for n in self._polled if n in objects and objects[n][0] < before)
        return list(due)
