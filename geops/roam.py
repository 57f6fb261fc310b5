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
however interleaved, give the same events when no position is late in either. At the end of
a stream, the objects whose last position is more than the TTL before the clock expire.

The work has two parts: finding each position's *candidates*, the other objects within the
largest distance of its fences (``PositionTable``: the spatial search, which grows with the
objects), and the pair rule (``PairRule``: nearby pairs, hysteresis, expiry). ``RoamEngine``
runs both in one process; the stream is to run the search in cells and the rule after it
(``geops.roam_cells``, docs/architecture.md).

Events name the moving object (``object_id``, whose position made the event), the other one
(``other_object_id``), the fence, the position's publication and the distance in metres
(rounded to millimetres). A pair reports at most one event a position.
"""

from __future__ import annotations

import fnmatch
import heapq
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from geops.events import EXPIRED, FARAWAY, NEARBY, PairEvent, position_points
from geops.fences import GEOD
from geops.model import ROAMING_KINDS, DetectKind

__all__ = ["FARAWAY", "FARAWAY_FACTOR", "NEARBY", "Arrivals", "PairEvent", "PairRule",
           "PositionTable", "RoamEngine", "RoamFences"]
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


class PositionTable:
    """The latest evaluated position of objects, in slots of NumPy columns (time, lon, lat),
    searched for the others within a distance of a position."""

    def __init__(self) -> None:
        self.slot: dict[str, int] = {}
        self.names: list[str | None] = []
        self.t = np.zeros(0, np.int64)
        self.xy = np.zeros((0, 2))
        self.live = np.zeros(0, bool)
        self.free: list[int] = []

    def put(self, name: str, t: int, xy: np.ndarray) -> None:
        """Make ``xy`` at ``t`` the latest position of ``name``."""
        k = self.slot.get(name)
        if k is None:
            if not self.free:
                grow = max(16, len(self.live))
                self.t = np.concatenate([self.t, np.zeros(grow, np.int64)])
                self.xy = np.concatenate([self.xy, np.zeros((grow, 2))])
                self.live = np.concatenate([self.live, np.zeros(grow, bool)])
                self.free = list(range(len(self.live) - 1, len(self.live) - grow - 1, -1))
                self.names += [None] * grow
            k = self.free.pop()
            self.slot[name] = k
            self.names[k] = name
            self.live[k] = True
        self.t[k], self.xy[k] = t, xy

    def drop(self, name: str) -> None:
        """Forget ``name`` (expired)."""
        k = self.slot.pop(name, None)
        if k is not None:
            self.live[k] = False
            self.names[k] = None
            self.free.append(k)

    def drop_before(self, t: int) -> None:
        """Forget every object whose latest position is before ``t``."""
        for k in np.flatnonzero(self.live & (self.t < t)).tolist():
            self.drop(self.names[k])

    def within(self, name: str, xy: np.ndarray, reach_m: float) -> Candidates:
        """The other objects whose latest position here is at most ``reach_m`` geodesic
        metres from ``xy`` (sorted by id), with those distances and positions (time, lon,
        lat): a latitude band first, then one vectorised ``Geod.inv`` over it."""
        band = self.live & (np.abs(self.xy[:, 1] - xy[1]) <= reach_m / _LAT_M)
        k = self.slot.get(name)
        if k is not None:
            band[k] = False
        rows = np.flatnonzero(band)
        if not len(rows):
            return Candidates([], np.empty(0), np.empty(0, np.int64), np.empty((0, 2)))
        _, _, dist = GEOD.inv(np.full(len(rows), xy[0]), np.full(len(rows), xy[1]),
                              self.xy[rows, 0], self.xy[rows, 1])
        dist = np.asarray(dist, float)
        keep = rows[dist <= reach_m]
        names = [self.names[r] for r in keep.tolist()]
        order = sorted(range(len(names)), key=names.__getitem__)
        at = keep[order]
        return Candidates([names[j] for j in order], dist[dist <= reach_m][order],
                          self.t[at], self.xy[at])


class Candidates(NamedTuple):
    """The others within a reach of a position: ids (sorted), distances (metres), and the
    positions measured from (time, and lon/lat (n, 2)) so that the pair rule takes only
    those that are each object's latest (a table that was sent no more of an object, as a
    stream's cell once the object has gone beyond its reach, holds an older one)."""

    names: list[str]
    distance_m: np.ndarray
    t: np.ndarray
    xy: np.ndarray


class PairRule:
    """The pair rule of roaming fences in the one order (module docstring): every live
    object's latest place and time, the nearby pairs and the expiries due. Fed each evaluated
    position with its *candidates* (the others within the largest distance of the fences
    that match it, ``PositionTable.within``), so the search for them may run elsewhere (the
    stream's cells) and this part stays a dictionary update per nearby pair."""

    def __init__(self, fences: RoamFences, ttl_ms: int | None = None) -> None:
        if ttl_ms is not None and ttl_ms <= 0:
            raise ValueError(f"the object TTL must be above zero, got {ttl_ms} ms")
        self.fences = fences
        self.ttl_ms = ttl_ms
        self.latest: dict[str, tuple[int, float, float]] = {}
        self.near: dict[str, dict[str, set[int]]] = {}  # object → partner → fence indices
        self.expiry: list[tuple[int, str, int]] = []    # (expiry time, object, its last time)

    def reach(self, name: str) -> float:
        """The largest distance of the fences whose glob matches ``name`` (0: none)."""
        match = self.fences.matching(name)
        return float(self.fences.distance_m[match].max()) if match.any() else 0.0

    def expire(self, now: int) -> tuple[list[PairEvent], list[str]]:
        """Forget every object whose last position is more than the TTL before ``now``:
        the faraway events of its nearby pairs, and the objects forgotten."""
        events: list[PairEvent] = []
        gone: list[str] = []
        while self.expiry and self.expiry[0][0] < now:
            at, name, last = heapq.heappop(self.expiry)
            if self.latest.get(name, (None,))[0] != last:
                continue                                # moved since: a stale entry
            for other, which in sorted(self.near.pop(name, {}).items()):
                self.near[other].pop(name, None)
                if not self.near[other]:
                    del self.near[other]
                events += [PairEvent(name, int(self.fences.ids[f]), FARAWAY, None, at,
                                     EXPIRED, other) for f in sorted(which)
                           if self.fences.asks[FARAWAY][f]]
            del self.latest[name]
            gone.append(name)
        return events, gone

    def position(self, name: str, pid: int, t: int, xy: np.ndarray,
                 candidates: Candidates) -> list[PairEvent]:
        """The events of one position (after ``expire(t)``): ``nearby`` with the candidates
        measured from their object's latest position (a live one), ``faraway`` with the
        nearby partners, by fence and then by the other's id."""
        match = self.fences.matching(name)
        others = {o: d for o, d, at, x, y in zip(
            candidates.names, candidates.distance_m.tolist(), candidates.t.tolist(),
            candidates.xy[:, 0].tolist(), candidates.xy[:, 1].tolist(), strict=True)
            if o != name and self.latest.get(o) == (at, x, y)}
        partners = sorted(self.near.get(name, {}))
        if partners:
            far = np.array([self.latest[o][1:] for o in partners])
            _, _, dist = GEOD.inv(np.full(len(partners), xy[0]), np.full(len(partners), xy[1]),
                                  far[:, 0], far[:, 1])
            others.update(zip(partners, np.asarray(dist, float).tolist(), strict=True))
        events: list[PairEvent] = []
        ordered = sorted(others.items())
        for f in np.flatnonzero(match).tolist():
            events += self._pairs(name, pid, t, f, ordered)
        self.latest[name] = (t, float(xy[0]), float(xy[1]))
        if self.ttl_ms is not None:
            heapq.heappush(self.expiry, (t + self.ttl_ms, name, t))
        return events

    def _pairs(self, name: str, pid: int, t: int, f: int,
               others: list[tuple[str, float]]) -> list[PairEvent]:
        """The events of fence ``f`` between a position of ``name`` and the others (name,
        distance), in order of the others' ids."""
        limit = float(self.fences.distance_m[f])
        sid = int(self.fences.ids[f])
        near_asked, far_asked = self.fences.asks[NEARBY][f], self.fences.asks[FARAWAY][f]
        events = []
        for other, d in others:
            if not self.fences.matching(other)[f]:
                continue
            was = f in self.near.get(name, {}).get(other, ())
            if not was and d <= limit:
                self.near.setdefault(name, {}).setdefault(other, set()).add(f)
                self.near.setdefault(other, {}).setdefault(name, set()).add(f)
                if near_asked:
                    events.append(PairEvent(name, sid, NEARBY, pid, t, None, other,
                                            round(d, 3)))
            elif was and d > limit * FARAWAY_FACTOR:
                self._part(name, other, f)
                if far_asked:
                    events.append(PairEvent(name, sid, FARAWAY, pid, t, None, other,
                                            round(d, 3)))
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


class Arrivals:
    """The stream's clock (the largest event time seen) and which positions come in time:
    one later than ``lateness_ms`` behind the clock, as it stood before its batch, is late."""

    def __init__(self, lateness_ms: int = 0) -> None:
        if lateness_ms < 0:
            raise ValueError(f"the roaming lateness must be zero or more, got {lateness_ms} ms")
        self.lateness_ms = lateness_ms
        self.clock: int | None = None
        self.bound: int | None = None                   # positions before it are evaluated
        self.late = 0

    def admit(self, times: np.ndarray, watched: np.ndarray) -> np.ndarray:
        """Which of a batch's positions (event times) are in time, the late ones among the
        ``watched`` counted; the clock moves on with every position."""
        times = np.asarray(times, np.int64)
        ok = np.ones(len(times), bool) if self.bound is None else times >= self.bound
        self.late += int((~ok & watched).sum())
        if len(times):
            top = int(times.max())
            self.clock = top if self.clock is None else max(self.clock, top)
            bound = self.clock - self.lateness_ms
            self.bound = bound if self.bound is None else max(self.bound, bound)
        return ok

    def take(self, fences: RoamFences, object_ids: Sequence[str],
             publication_ids: np.ndarray, event_times: np.ndarray, geoms: np.ndarray
             ) -> list[tuple[int, str, int, float, float]]:
        """The positions of a batch that roaming fences watch and that come in time, as
        (time, object, publication, lon, lat): ``admit`` for a batch of positions."""
        if not len(fences) or not len(object_ids):
            return []
        times = np.asarray(event_times, np.int64)
        watched = np.array([fences.matching(o).any() for o in object_ids], bool)
        rows = np.flatnonzero(self.admit(times, watched) & watched)
        points = position_points(np.asarray(geoms, object)[rows])
        pids = np.asarray(publication_ids, np.int64)[rows].tolist()
        return [(int(times[k]), object_ids[k], pids[j], float(points[j, 0]),
                 float(points[j, 1])) for j, k in enumerate(rows.tolist())]


class RoamEngine:
    """Roaming events of a stream of positions (module docstring), in one process: the
    positions held for the lateness, one ``PositionTable`` of every object for the
    candidates, and the ``PairRule``."""

    def __init__(self, fences: RoamFences, ttl_ms: int | None = None,
                 lateness_ms: int = 0) -> None:
        self.fences = fences
        self.rule = PairRule(fences, ttl_ms)
        self.arrivals = Arrivals(lateness_ms)
        self.table = PositionTable()
        self.pending: list[tuple[int, str, int, float, float]] = []

    @property
    def late(self) -> int:
        """Positions left out as later than the lateness."""
        return self.arrivals.late

    def process(self, object_ids: Sequence[str], publication_ids: np.ndarray,
                event_times: np.ndarray, geoms: np.ndarray) -> list[PairEvent]:
        """Take a batch of positions (any order, any objects; those no fence matches are
        ignored), and return the events of every held position the clock has now passed by
        the lateness, in evaluation order. Late positions are counted in ``late``."""
        for position in self.arrivals.take(self.fences, object_ids, publication_ids,
                                           event_times, geoms):
            heapq.heappush(self.pending, position)
        return self._evaluate(self.arrivals.bound)

    def finish(self) -> list[PairEvent]:
        """Evaluate every held position, then expire the objects whose last position is more
        than the TTL before the clock (the end of a stream)."""
        events = self._evaluate(None)
        if self.arrivals.clock is not None:
            events += self._expire(self.arrivals.clock)
        return events

    def _evaluate(self, before: int | None) -> list[PairEvent]:
        """The events of the held positions with a time before ``before`` (None: all)."""
        events: list[PairEvent] = []
        while self.pending and (before is None or self.pending[0][0] < before):
            t, name, pid, x, y = heapq.heappop(self.pending)
            events += self._expire(t)
            xy = np.array([x, y])
            events += self.rule.position(name, pid, t, xy,
                                         self.table.within(name, xy, self.rule.reach(name)))
            self.table.put(name, t, xy)
        return events

    def _expire(self, now: int) -> list[PairEvent]:
        events, gone = self.rule.expire(now)
        for name in gone:
            self.table.drop(name)
        return events
