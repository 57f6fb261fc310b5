"""Roaming fences: moving objects near other moving objects (no Spark, no Kafka).

A *roaming fence* is a subscription with ``roam = {"distance_m": D, "match": GLOB}``: it
watches every pair of moving objects whose ids both match ``GLOB`` (``fnmatch``, case
sensitive: ``courier-*``, ``truck-[0-9]*``) and reports

- ``nearby`` when the two come within ``D`` metres of each other, and
- ``faraway`` when a pair that was nearby is more than ``FARAWAY_FACTOR`` × ``D`` apart,
  or when one of the two expires (reason ``expired``).

Distances are geodesic metres on the WGS84 ellipsoid between the two positions (their
centroids for positions that are not points), as distance fences measure (``geops.fences``).
``faraway`` waits for ``FARAWAY_FACTOR`` × ``D`` (hysteresis): positions carry a few metres of
noise, and two couriers parked about ``D`` apart would otherwise report ``nearby`` and
``faraway`` at every position; a pair must part by a tenth of the distance more than it met.
A roaming fence reports both kinds: ``faraway`` is what ends a ``nearby``. Its geometry and
relation match publications as any subscription's do; the roaming is independent of them.

**Order.** Positions are evaluated one at a time in one total order, by event time, then object
id, then publication id, whatever order they arrived in (so an object's positions are taken in
its own order). A position of object A at time t is tested against the *latest* position of
every other object B with a time not after it (the one evaluated last: B's position at the same
t counts when B's id sorts before A's), unless B has expired. Before a position at t is
evaluated, every object whose last position is more than the TTL before t expires (in order of
expiry time, then id): its nearby pairs end with ``faraway`` (reason ``expired``, event time =
its last time + the TTL, no publication, no distance), and it is forgotten (its next position
is its first).

**Disorder.** Because every position is tested against the others' latest ones, the events
depend on positions arriving in time: ``RoamEngine`` holds positions back until the stream's
clock (the largest event time seen) is ``lateness_ms`` past them and then evaluates them in the
order above; a position that arrives when its time is already more than ``lateness_ms`` behind
the clock is left out of roaming and counted (``late``). Two runs over the same positions,
however interleaved, give the same events when no position is late in either.

Events name the moving object (``object_id``, whose position made the event), the other one
(``other_object_id``), the fence, the position's publication and the distance in metres
(rounded to millimetres). A pair reports at most one event a position.
"""

from __future__ import annotations

import fnmatch
import heapq
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from geops.events import EXPIRED, FARAWAY, NEARBY, PairEvent, position_points
from geops.fences import GEOD
from geops.model import ROAMING_KINDS, DetectKind

__all__ = ["FARAWAY", "FARAWAY_FACTOR", "NEARBY", "PairEvent", "RoamEngine", "RoamFences"]
FARAWAY_FACTOR = 1.1        # faraway beyond this many times the distance (hysteresis)
_LAT_M = 110_000.0          # fewer metres than any degree of latitude has (110,574 or more)


@dataclass
class RoamFences:
    """The roaming fences: ids (int64, ascending, unique), distances (metres), globs, and
    the ``DetectKind`` masks of what each reports (None: nearby and faraway). A fence that
    reports one kind still follows which pairs are nearby: ``faraway`` ends a ``nearby``."""

    ids: np.ndarray
    distance_m: np.ndarray
    match: list[str]
    detect: np.ndarray | None = None
    _matching: dict[str, np.ndarray] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        ids = np.asarray(self.ids, np.int64)
        order = np.argsort(ids, kind="stable")
        self.ids = ids[order]
        self.distance_m = np.asarray(self.distance_m, float)[order]
        self.match = [self.match[k] for k in order.tolist()]
        detect = (np.full(len(ids), ROAMING_KINDS) if self.detect is None
                  else np.asarray(self.detect, np.int64))
        if not len(self.ids) == len(self.distance_m) == len(self.match) == len(detect):
            raise ValueError("ids, distance_m, match and detect must have the same length")
        self.detect = detect[order]
        self.asks = {NEARBY: ((self.detect & int(DetectKind.NEARBY)) > 0).tolist(),
                     FARAWAY: ((self.detect & int(DetectKind.FARAWAY)) > 0).tolist()}
        if len(self.ids) > 1 and (np.diff(self.ids) == 0).any():
            raise ValueError("roaming fence ids repeat")

    def __len__(self) -> int:
        return len(self.ids)

    @classmethod
    def empty(cls) -> RoamFences:
        return cls(np.empty(0, np.int64), np.empty(0), [])

    @classmethod
    def of(cls, ids: np.ndarray, roams: Sequence[tuple[float, str] | None],
           detect: np.ndarray | None = None) -> RoamFences:
        """The roaming fences among subscriptions: those whose roam (distance, glob) is set,
        with their detect masks (``roam_spec.roam_detect``; None: both kinds)."""
        rows = [k for k, r in enumerate(roams) if r is not None]
        return cls(np.asarray(ids, np.int64)[rows], [roams[k][0] for k in rows],
                   [roams[k][1] for k in rows],
                   None if detect is None else np.asarray(detect, np.int64)[rows])

    def matching(self, object_id: str) -> np.ndarray:
        """Whether each fence's glob matches the object id (bool per fence), remembered."""
        found = self._matching.get(object_id)
        if found is None:
            found = np.fromiter((fnmatch.fnmatchcase(object_id, g) for g in self.match), bool,
                                len(self.match))
            self._matching[object_id] = found
        return found


class _Objects:
    """The latest evaluated position of every live object, in slots of NumPy columns: time,
    lon, lat, which fences match its id, and whether the slot is in use."""

    def __init__(self, fences: int) -> None:
        self.slot: dict[str, int] = {}
        self.names: list[str | None] = []
        self.t = np.zeros(0, np.int64)
        self.xy = np.zeros((0, 2))
        self.match = np.zeros((0, fences), bool)
        self.live = np.zeros(0, bool)
        self.free: list[int] = []

    def put(self, name: str, t: int, xy: np.ndarray, match: np.ndarray) -> None:
        k = self.slot.get(name)
        if k is None:
            if not self.free:
                grow = max(16, len(self.live))
                self.t = np.concatenate([self.t, np.zeros(grow, np.int64)])
                self.xy = np.concatenate([self.xy, np.zeros((grow, 2))])
                self.match = np.concatenate([self.match, np.zeros((grow, self.match.shape[1]),
                                                                  bool)])
                self.live = np.concatenate([self.live, np.zeros(grow, bool)])
                self.free = list(range(len(self.live) - 1, len(self.live) - grow - 1, -1))
                self.names += [None] * grow
            k = self.free.pop()
            self.slot[name] = k
            self.names[k] = name
            self.live[k] = True
            self.match[k] = match
        self.t[k], self.xy[k] = t, xy

    def drop(self, name: str) -> None:
        k = self.slot.pop(name)
        self.live[k] = False
        self.names[k] = None
        self.free.append(k)


class RoamEngine:
    """Roaming events of a stream of positions (module docstring): the latest position of
    every object, the pairs that are nearby, and the positions held back for disorder."""

    def __init__(self, fences: RoamFences, ttl_ms: int | None = None,
                 lateness_ms: int = 0) -> None:
        if ttl_ms is not None and ttl_ms <= 0:
            raise ValueError(f"the object TTL must be above zero, got {ttl_ms} ms")
        if lateness_ms < 0:
            raise ValueError(f"the roaming lateness must be zero or more, got {lateness_ms} ms")
        self.fences = fences
        self.ttl_ms = ttl_ms
        self.lateness_ms = lateness_ms
        self.objects = _Objects(len(fences))
        self.near: dict[str, dict[str, set[int]]] = {}  # object → partner → fence indices
        self.expiry: list[tuple[int, str, int]] = []    # (expiry time, object, its last time)
        self.pending: list[tuple[int, str, int, float, float]] = []
        self.clock: int | None = None                   # the largest event time seen
        self.evaluated: int | None = None               # positions before it were evaluated
        self.late = 0

    def process(self, object_ids: Sequence[str], publication_ids: np.ndarray,
                event_times: np.ndarray, geoms: np.ndarray) -> list[PairEvent]:
        """Take a batch of positions (any order, any objects; those no fence matches are
        ignored), and return the events of every held position the clock has now passed by
        ``lateness_ms``, in evaluation order. Late positions are counted in ``late``."""
        if not len(self.fences) or not len(object_ids):
            return []
        points = position_points(geoms)
        times = np.asarray(event_times, np.int64).tolist()
        pids = np.asarray(publication_ids, np.int64).tolist()
        for k, name in enumerate(object_ids):
            if not self.fences.matching(name).any():
                continue
            t = times[k]
            if self.evaluated is not None and t < self.evaluated:
                self.late += 1
                continue
            heapq.heappush(self.pending, (t, name, pids[k], float(points[k, 0]),
                                          float(points[k, 1])))
        if times:
            self.clock = max(times) if self.clock is None else max(self.clock, max(times))
        if self.clock is None:
            return []
        return self._evaluate(self.clock - self.lateness_ms)

    def finish(self) -> list[PairEvent]:
        """Evaluate every held position, then expire the objects whose last position is more
        than the TTL before the last one evaluated (the end of a stream)."""
        events = self._evaluate(None)
        if self.evaluated is not None:
            events += self._expire(self.evaluated)
        return events

    def _evaluate(self, before: int | None) -> list[PairEvent]:
        """The events of the held positions with a time before ``before`` (None: all)."""
        events: list[PairEvent] = []
        while self.pending and (before is None or self.pending[0][0] < before):
            t, name, pid, x, y = heapq.heappop(self.pending)
            events += self._expire(t)
            events += self._position(name, pid, t, np.array([x, y]))
            self.evaluated = t if self.evaluated is None else max(self.evaluated, t)
        if before is not None:
            self.evaluated = before if self.evaluated is None else max(self.evaluated, before)
        return events

    def _expire(self, now: int) -> list[PairEvent]:
        """Forget every object whose last position is more than the TTL before ``now``;
        the faraway events of its nearby pairs."""
        events: list[PairEvent] = []
        while self.expiry and self.expiry[0][0] < now:
            at, name, last = heapq.heappop(self.expiry)
            k = self.objects.slot.get(name)
            if k is None or int(self.objects.t[k]) != last:
                continue                                # moved since: a stale entry
            for other, which in sorted(self.near.pop(name, {}).items()):
                self.near[other].pop(name, None)
                events += [PairEvent(name, int(self.fences.ids[f]), FARAWAY, None, at, EXPIRED,
                                 other, None) for f in sorted(which)
                           if self.fences.asks[FARAWAY][f]]
            self.objects.drop(name)
        return events

    def _position(self, name: str, pid: int, t: int, xy: np.ndarray) -> list[PairEvent]:
        """The events of one position, evaluated against the others' latest positions."""
        objects, fences = self.objects, self.fences
        k = objects.slot.get(name)
        match = fences.matching(name)
        reach = float(fences.distance_m[match].max()) * FARAWAY_FACTOR
        near = self.near.get(name, {})
        candidates = objects.live & objects.match[:, match].any(axis=1)
        candidates &= np.abs(objects.xy[:, 1] - xy[1]) <= reach / _LAT_M
        for other in near:
            candidates[objects.slot[other]] = True
        if k is not None:
            candidates[k] = False
        rows = np.flatnonzero(candidates)
        events: list[PairEvent] = []
        if len(rows):
            _, _, dist = GEOD.inv(np.full(len(rows), xy[0]), np.full(len(rows), xy[1]),
                                  objects.xy[rows, 0], objects.xy[rows, 1])
            dist = np.asarray(dist, float)
            names = [objects.names[r] for r in rows.tolist()]
            order = sorted(range(len(rows)), key=names.__getitem__)
            for f in np.flatnonzero(match).tolist():
                events += self._pairs(name, pid, t, f, [(names[j], float(dist[j]),
                                                         bool(objects.match[rows[j], f]))
                                                        for j in order])
        objects.put(name, t, xy, match)
        if self.ttl_ms is not None:
            heapq.heappush(self.expiry, (t + self.ttl_ms, name, t))
        return events

    def _pairs(self, name: str, pid: int, t: int, f: int,
               others: list[tuple[str, float, bool]]) -> list[PairEvent]:
        """The events of fence ``f`` between a position of ``name`` and the others (name,
        distance, whether the fence matches it), in order of the others' ids."""
        limit = float(self.fences.distance_m[f])
        sid = int(self.fences.ids[f])
        near_asked, far_asked = self.fences.asks[NEARBY][f], self.fences.asks[FARAWAY][f]
        events = []
        for other, d, matched in others:
            if not matched:
                continue
            was = f in self.near.get(name, {}).get(other, ())
            if not was and d <= limit:
                self.near.setdefault(name, {}).setdefault(other, set()).add(f)
                self.near.setdefault(other, {}).setdefault(name, set()).add(f)
                if near_asked:
                    events.append(PairEvent(name, sid, NEARBY, pid, t, None, other, round(d, 3)))
            elif was and d > limit * FARAWAY_FACTOR:
                self._part(name, other, f)
                if far_asked:
                    events.append(PairEvent(name, sid, FARAWAY, pid, t, None, other, round(d, 3)))
        return events

    def _part(self, a: str, b: str, f: int) -> None:
        """Forget that ``a`` and ``b`` are nearby for fence ``f``."""
        for x, y in ((a, b), (b, a)):
            which = self.near[x][y]
            which.discard(f)
            if not which:
                del self.near[x][y]
            if not self.near[x]:
                del self.near[x]
