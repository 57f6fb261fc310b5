"""Geofence events of moving objects: enter, exit, inside, outside, cross (no Spark, no Kafka).

A *position* is a publication with an object id; a *fence* is a subscription whose ``detect``
names at least one kind (its geometry already buffered when it has a distance,
``geops.fences``). A position is *in* a fence when the fence intersects it. Per object the
state is its last accepted event time, place and the fences it is in; for each position of the
object, in event-time order (ties by publication id), and each fence that asks for the kind:

- ``enter``: the previous position was out (or there was none) and this one is in;
- ``exit``: the previous position was in and this one is out;
- ``inside`` / ``outside``: the previous and this position are both in / both out (a first
  position counts as coming from outside: out of a fence it gives ``outside``);
- ``cross``: the previous and this position are both out and the track between them passes
  through the fence (a first position has no track, so never crosses; a fence that also asks
  for ``outside`` gives both). The track is the geodesic between the two positions (their
  centroids for positions that are not points), cut into pieces of at most
  ``geops.fences.SEGMENT_M`` as distance fences cut their edges, so it and the fence are drawn
  alike in lon/lat and a distance fence is crossed where the geodesic passes within its
  distance; coordinates that are no lon/lat take the straight segment. The track meets the
  fence as a position is in it: by intersects, so a track that touches the fence's border or
  runs along an edge crosses it.

A position older than the object's last accepted one is dropped and counted, never turned into
an event (a late position cannot make a false exit or cross, nor become the start of a track);
one of the same time is taken. A fence that appears mid-stream gives ``enter`` at the object's
next position in it (and a track through it ``cross``). A fence that is
removed gives nothing more, and what objects knew of it is forgotten: fences carry an instance
number (``since``; the offline engine counts adds, a stream would take the offset of the record
that added it), which changes when an id is removed and added again, so the same id added
again starts fresh; a fence whose geometry or kinds change keeps its number and its state (one
that stops detecting is no fence any more: removed).

**TTL.** An object unseen for more than ``ttl_ms`` is forgotten with an ``exit`` (reason
``expired``, event time = its last event time + the TTL, no publication) for every fence it
was in that asks for exits: at its next position (``last + ttl < t``; the position is then
its first), or by ``expire(watermark)`` for every object with ``last + ttl < watermark``. The
watermark is one clock for all objects, so expiry by it is exact only when event times across
objects are ordered within the TTL (a watermark ahead of an object's own clock could expire it
before a position of it that is still on its way).

An expired object's next position is its first, so the track from its last one is no cross.
A fence keeps what objects knew of it while its shape changes: a track is tested against the
fence as it is at the position, the previous position's *out* is what it was then.

The per-object step (``step``) is a pure function of (state, that object's positions, fences)
→ (new state, events, dropped), and the state a small tuple (``ObjectState``);
``EventEngine`` holds the states of every object and the fences for the offline matcher
(``geops match --events``) and runs the step. ``run_batch`` computes the same for a whole
batch of many objects at once with NumPy set operations, for the stream's operator, where a
Python step per position cost most of an event. The geometry tests of a batch are one
vectorised STRtree query, and its tracks another (``Fences.crossings``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from functools import cached_property
from itertools import chain
from typing import NamedTuple

import numpy as np
import shapely

from geops.fences import GEOD, SEGMENT_M, fence_geometries
from geops.model import DetectKind

ENTER, EXIT, INSIDE, OUTSIDE, CROSS = "enter", "exit", "inside", "outside", "cross"
NEARBY, FARAWAY = "nearby", "faraway"  # a roaming fence's (``geops.roam``)
EXPIRED = "expired"
# Metres a degree spans on WGS84, rounded the safe way: of latitude at the least (110,574 at
# the equator) and at the most (111,694 at the poles); of longitude on the equator at the least
# (111,319; on a parallel, this times the cosine of its latitude). ``Fences.may_meet``
# bounds how far a track strays from its ends with them.
M_PER_DEG_LAT, M_PER_DEG_MAX, M_PER_DEG_LON = 110_000.0, 111_700.0, 111_000.0


class ObjectState(NamedTuple):
    """What is kept per object: the event time of its last accepted position (ms), the
    fences it is in as two aligned tuples sorted by id: subscription ids and their instance
    numbers (``Fences.since``), and where that position was (lon, lat: the start of the next
    track, for ``cross``; None when not known)."""

    last_ms: int
    fence_ids: tuple[int, ...] = ()
    fence_since: tuple[int, ...] = ()
    x: float | None = None
    y: float | None = None

    @classmethod
    def of(cls, value: Sequence) -> ObjectState:
        """A state from any (last_ms, ids, since[, x, y]) sequence, as a state store gives it
        back (a row, lists or arrays; one kept before states had a place has none)."""
        last, ids, since, *at = value
        x, y = _place(at)
        return cls(int(last), tuple(int(i) for i in ids), tuple(int(s) for s in since), x, y)


def _place(at: Sequence) -> tuple[float | None, float | None]:
    """(x, y) of a state's optional place fields; (None, None) when absent or not finite."""
    if len(at) < 2 or at[0] is None or at[1] is None:
        return None, None
    x, y = float(at[0]), float(at[1])
    return (x, y) if np.isfinite(x) and np.isfinite(y) else (None, None)


def position_points(geoms: np.ndarray) -> np.ndarray:
    """(n, 2) the point of each position a track starts or ends at: a point itself, the
    centroid of any other geometry."""
    geoms = np.asarray(geoms, dtype=object)
    if not len(geoms):
        return np.empty((0, 2))
    centres = shapely.centroid(geoms)
    return np.column_stack([shapely.get_x(centres), shapely.get_y(centres)])


def tracks(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """The tracks from ``starts`` to ``ends`` ((n, 2) each) as linestrings: the geodesic cut
    into pieces of at most ``SEGMENT_M`` (the edges of distance fences are cut the same way)
    where both ends are lon/lat, else the straight segment. Vectorised: one ``Geod.inv``,
    one ``Geod.fwd`` over every piece, one ``shapely.linestrings``."""
    starts, ends = np.asarray(starts, float).reshape(-1, 2), np.asarray(ends, float).reshape(-1, 2)
    n = len(starts)
    if not n:
        return np.empty(0, object)
    both = np.concatenate([starts, ends], axis=1)
    lonlat = ((np.abs(both[:, [0, 2]]) <= 180) & (np.abs(both[:, [1, 3]]) <= 90)).all(axis=1)
    ends = ends.copy()  # a track over the antimeridian: drawn on its start's side
    x0 = starts[lonlat, 0]
    ends[lonlat, 0] = x0 + (ends[lonlat, 0] - x0 + 180.0) % 360.0 - 180.0
    dist = np.zeros(n)
    azimuth = np.zeros(n)
    if lonlat.any():
        az, _, d = GEOD.inv(starts[lonlat, 0], starts[lonlat, 1], ends[lonlat, 0],
                            ends[lonlat, 1])
        azimuth[lonlat], dist[lonlat] = az, d
    pieces = np.where(lonlat, np.maximum(1, np.ceil(dist / SEGMENT_M)), 1).astype(np.int64)
    line = np.repeat(np.arange(n), pieces + 1)
    k = np.arange(len(line)) - np.repeat(np.cumsum(pieces + 1) - (pieces + 1), pieces + 1)
    frac = k / pieces[line]
    lon = starts[line, 0] + frac * (ends[line, 0] - starts[line, 0])
    lat = starts[line, 1] + frac * (ends[line, 1] - starts[line, 1])
    inner = lonlat[line] & (k > 0) & (k < pieces[line])
    if inner.any():
        glon, glat, _ = GEOD.fwd(starts[line[inner], 0], starts[line[inner], 1],
                                 azimuth[line[inner]], dist[line[inner]] * frac[inner])
        # the same side of the antimeridian as the track's start
        x0 = starts[line[inner], 0]
        lon[inner] = x0 + (np.asarray(glon) - x0 + 180.0) % 360.0 - 180.0
        lat[inner] = glat
    return shapely.linestrings(lon, lat, indices=line)


class Event(NamedTuple):
    """One geofence event; ``publication_id`` is None and ``reason`` ``"expired"`` for an
    expiry, ``reason`` None otherwise."""

    object_id: str
    subscription_id: int
    kind: str
    publication_id: int | None
    event_time: int
    reason: str | None = None

    def to_json(self) -> str:
        """One JSON object: object_id, subscription_id, kind, publication_id, event_time, and
        reason only when there is one (an expiry)."""
        return _json(self)


class PairEvent(NamedTuple):
    """A roaming fence's event (``geops.roam``): an ``Event`` that also names the other
    object of the pair and, for a position's event, the distance between the two in metres
    (None for an expiry)."""

    object_id: str
    subscription_id: int
    kind: str
    publication_id: int | None
    event_time: int
    reason: str | None
    other_object_id: str
    distance_m: float | None = None

    def to_json(self) -> str:
        """``Event.to_json`` with other_object_id, and distance_m when there is one."""
        return _json(self)


def _json(event: Event | PairEvent) -> str:
    """An event as one JSON object: its fields, those that are None left out but the
    publication id (null for an expiry)."""
    out = {name: value for name, value in zip(event._fields, event, strict=True)
           if value is not None or name == "publication_id"}
    return json.dumps(out, ensure_ascii=False)


@dataclass
class Fences:
    """The detecting fences: ids (int64, ascending, unique), fence geometries (a distance
    fence already buffered), ``DetectKind`` bit masks (none zero) and instance numbers."""

    ids: np.ndarray
    geoms: np.ndarray
    detect: np.ndarray
    since: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))

    def __post_init__(self) -> None:
        self.ids = np.asarray(self.ids, np.int64)
        self.geoms = np.asarray(self.geoms, dtype=object)
        self.detect = np.asarray(self.detect, np.uint8)
        self.since = (np.zeros(len(self.ids), np.int64) if len(self.since) == 0
                      else np.asarray(self.since, np.int64))
        if not len(self.ids) == len(self.geoms) == len(self.detect) == len(self.since):
            raise ValueError("ids, geoms, detect and since must have the same length")
        order = np.argsort(self.ids, kind="stable")
        if (order != np.arange(len(order))).any():
            self.ids, self.geoms = self.ids[order], self.geoms[order]
            self.detect, self.since = self.detect[order], self.since[order]
        if len(self.ids) > 1 and (np.diff(self.ids) == 0).any():
            repeated = sorted(set(self.ids[1:][np.diff(self.ids) == 0].tolist()))
            raise ValueError(f"fence ids repeat: {repeated}")
        if (self.detect == 0).any():
            raise ValueError("a fence must detect at least one kind (the others are plain "
                             "subscriptions)")

    def __len__(self) -> int:
        return len(self.ids)

    @classmethod
    def empty(cls) -> Fences:
        return cls(np.empty(0, np.int64), np.empty(0, object), np.empty(0, np.uint8))

    @cached_property
    def tree(self) -> shapely.STRtree:
        return shapely.STRtree(self.geoms)

    @cached_property
    def asking(self) -> dict[str, np.ndarray]:
        """Per kind, whether each fence asks for it (bool per fence)."""
        return {name: (self.detect & int(kind)) > 0 for name, kind in
                ((ENTER, DetectKind.ENTER), (EXIT, DetectKind.EXIT),
                 (INSIDE, DetectKind.INSIDE), (OUTSIDE, DetectKind.OUTSIDE),
                 (CROSS, DetectKind.CROSS))}

    @cached_property
    def asking_lists(self) -> dict[str, list[bool]]:
        """Per kind, whether each fence asks for it, as a Python list (indexed per event)."""
        return {name: asks.tolist() for name, asks in self.asking.items()}

    @cached_property
    def outside_askers(self) -> set[int]:
        """The indices of the fences that ask for ``outside``."""
        return set(np.flatnonzero(self.asking[OUTSIDE]).tolist())

    @cached_property
    def cross_askers(self) -> bool:
        """Whether any fence asks for ``cross`` (else no track is drawn)."""
        return bool(self.asking[CROSS].any())

    def crossings(self, starts: np.ndarray, ends: np.ndarray
                  ) -> tuple[np.ndarray, np.ndarray]:
        """(track index, fence index) of every fence that asks for ``cross`` and that the
        track from ``starts[i]`` to ``ends[i]`` ((n, 2) each; ``tracks``) meets, sorted by
        track then fence; one vectorised query for all tracks."""
        if not len(self) or not len(starts) or not self.cross_askers or (
                len(starts) == 1 and not self.may_meet(*np.ravel(starts), *np.ravel(ends))):
            return np.empty(0, np.intp), np.empty(0, np.intp)
        track, fence = self.tree.query(tracks(starts, ends), predicate="intersects")
        keep = self.asking[CROSS][fence]
        track, fence = track[keep], fence[keep]
        order = np.lexsort((fence, track))
        return track[order], fence[order]

    def may_meet(self, x0: float, y0: float, x1: float, y1: float) -> bool:
        """Whether the track from (x0, y0) to (x1, y1) may meet a fence asking for ``cross``:
        the box of its ends, widened by how far the track may stray from them, meets such a
        fence's envelope. False is certain. For a poll of one position this test, a few
        Python floats and one query, costs a fraction of drawing the track (``tracks``).

        Every point of a geodesic of length d lies within d / 2 of one of its ends, and d is
        at most the length of the path along the meridian and then the parallel; a distance
        r moves the latitude by at most r / ``M_PER_DEG_LAT`` degrees and the longitude by at
        most r / (``M_PER_DEG_LON`` cos of the highest latitude reached). A track that may
        come within a degree of a pole or stray a quarter of the way round may meet any."""
        lonlat = abs(x0) <= 180 and abs(x1) <= 180 and abs(y0) <= 90 and abs(y1) <= 90
        pad_x = pad_y = 1e-9   # degrees: the rounding of the ends
        if lonlat:   # drawn from its start, on its side of the antimeridian (``tracks``)
            x1 = x0 + (x1 - x0 + 180.0) % 360.0 - 180.0
            half = 0.5 * M_PER_DEG_MAX * (abs(y1 - y0) + abs(x1 - x0))
            top = max(abs(y0), abs(y1)) + half / M_PER_DEG_LAT
            if top >= 89.0:
                return True
            pad_y += half / M_PER_DEG_LAT
            pad_x += half / (M_PER_DEG_LON * math.cos(math.radians(top)))
            if abs(x1 - x0) + pad_x >= 90.0:
                return True
        fence = self.tree.query(shapely.box(min(x0, x1) - pad_x, min(y0, y1) - pad_y,
                                             max(x0, x1) + pad_x, max(y0, y1) + pad_y))
        return bool(self.asking[CROSS][fence].any())

    def hits(self, geoms: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(position index, fence index) of every fence that intersects a position, sorted by
        position and then fence; one vectorised query for all positions."""
        if not len(self) or not len(geoms):
            return np.empty(0, np.intp), np.empty(0, np.intp)
        pos, fence = self.tree.query(np.asarray(geoms, dtype=object), predicate="intersects")
        order = np.lexsort((fence, pos))
        return pos[order], fence[order]

    def indices(self, state: ObjectState) -> np.ndarray:
        """The fences of ``state`` that still exist as the same instance, as indices."""
        at, same = self.locate(np.asarray(state.fence_ids, np.int64),
                               np.asarray(state.fence_since, np.int64))
        return at[same]

    def locate(self, ids: np.ndarray, since: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(index, still there) of fence ids with their instance numbers: still there where
        that id exists as the same instance (the index is of no meaning elsewhere)."""
        if not len(ids) or not len(self):
            return np.zeros(len(ids), np.intp), np.zeros(len(ids), bool)
        at = np.minimum(np.searchsorted(self.ids, ids), len(self) - 1)
        return at, (self.ids[at] == ids) & (self.since[at] == since)


def build_fences(ids: np.ndarray, geoms: np.ndarray, detect: np.ndarray,
                 distance_m: np.ndarray | None = None, since: np.ndarray | None = None
                 ) -> tuple[Fences, list[str | None]]:
    """The fixed fences of subscriptions (those whose ``detect`` names no fixed kind are left
    out; the roaming kinds are ``geops.roam``'s), distance
    fences buffered (``geops.fences``); also the problem of each subscription (None: fine; a
    refused distance fence is left out and named)."""
    ids = np.asarray(ids, np.int64)
    detect = DetectKind.fixed(np.asarray(detect, np.uint8))  # roaming kinds: geops.roam
    distances = np.full(len(ids), np.nan) if distance_m is None else np.asarray(distance_m,
                                                                                   float)
    since = np.zeros(len(ids), np.int64) if since is None else np.asarray(since, np.int64)
    keep = np.flatnonzero(detect != 0)
    fenced, problems_kept = fence_geometries(ids[keep], np.asarray(geoms, object)[keep],
                                             distances[keep])
    problems: list[str | None] = [None] * len(ids)
    good = []
    for k, problem in zip(keep.tolist(), problems_kept, strict=True):
        problems[k] = problem
        if problem is None:
            good.append(k)
    good_arr = np.asarray(good, np.intp)
    placed = np.searchsorted(keep, good_arr)
    return Fences(ids[good_arr], fenced[placed], detect[good_arr], since[good_arr]), problems


def _expiry(object_id: str, state: ObjectState, fences: Fences, ttl_ms: int) -> list[Event]:
    """The exits of an expired object, for the fences it was in that ask for exits."""
    at = fences.indices(state)
    at = at[fences.asking[EXIT][at]]
    return [Event(object_id, sid, EXIT, None, state.last_ms + ttl_ms, EXPIRED)
            for sid in fences.ids[at].tolist()]


def step(state: ObjectState | None, object_id: str, publication_ids: np.ndarray,
         event_times: np.ndarray, geoms: np.ndarray | None, fences: Fences,
         ttl_ms: int | None = None,
         hits: tuple[np.ndarray, np.ndarray] | None = None, points: np.ndarray | None = None
         ) -> tuple[ObjectState | None, list[Event], int]:
    """One object's positions of a batch → (new state, events in order, positions dropped).

    Positions are taken in (event time, publication id) order whatever their order here.
    ``hits`` (position index, fence index), sorted by position then fence, may be given when
    computed for a larger batch (``Fences.hits``; then ``geoms`` is not read); ``points``
    ((n, 2), ``position_points``) likewise. Without geometries or points no track is known:
    no ``cross``, and the state keeps no place."""
    state = None if state is None else ObjectState.of(state)
    pids = np.asarray(publication_ids, np.int64)
    times = np.asarray(event_times, np.int64)
    if hits is None:
        hits = fences.hits(np.asarray(geoms, dtype=object))
    if points is None and geoms is not None:
        points = position_points(geoms)
    hit_pos, hit_fence = hits
    order = np.lexsort((pids, times))
    bounds = np.searchsorted(hit_pos, np.arange(len(pids) + 1))
    crossed = _step_crossings(state, times, order, points, fences, ttl_ms)
    events: list[Event] = []
    dropped = 0
    # Python sets of fence indices: an object is in a few fences, where each of NumPy's set
    # operations (four per position) has a fixed cost per call far above a small set's
    prev = set(fences.indices(state).tolist()) if state is not None else set()
    last = state.last_ms if state is not None else None
    here = (state.x, state.y) if state is not None else (None, None)
    asks = fences.asking_lists
    away_askers = fences.outside_askers
    ids = fences.ids
    hit_list = hit_fence.tolist()
    for k in order.tolist():
        t = int(times[k])
        if last is not None and t < last:
            dropped += 1
            continue
        if last is not None and ttl_ms is not None and t - last > ttl_ms:
            events += _expiry(object_id, ObjectState(last, *_pairs(fences, prev)), fences, ttl_ms)
            prev, last = set(), None
        now = set(hit_list[bounds[k]:bounds[k + 1]])
        pid = int(pids[k])
        enter, leave, stay = asks[ENTER], asks[EXIT], asks[INSIDE]
        found = [(i, ENTER) for i in now - prev if enter[i]]
        found += [(i, EXIT) for i in prev - now if leave[i]]
        found += [(i, INSIDE) for i in now & prev if stay[i]]
        found += [(i, CROSS) for i in crossed.get(k, ()) if i not in now and i not in prev]
        if away_askers:
            found += [(i, OUTSIDE) for i in away_askers - now - prev]
        found.sort()
        events += [Event(object_id, int(ids[i]), kind, pid, t) for i, kind in found]
        prev, last = now, t
        here = _place(points[k]) if points is not None else (None, None)
    if last is None:
        return None, events, dropped
    return ObjectState(last, *_pairs(fences, prev), *here), events, dropped


def _step_crossings(state: ObjectState | None, times: np.ndarray, order: np.ndarray,
                    points: np.ndarray | None, fences: Fences, ttl_ms: int | None
                    ) -> dict[int, set[int]]:
    """Position index -> the fences asking for ``cross`` that the track to it from the
    object's previous accepted position meets (not yet whether both ends are out): one
    ``Fences.crossings`` for all the object's tracks."""
    if points is None or not fences.cross_askers or not len(order):
        return {}
    if len(order) == 1:   # one position, from the held place: the same, without arrays
        k = int(order[0])
        t = int(times[k])
        x, y = (float(v) for v in np.asarray(points[k], float))
        if (state is None or state.x is None or t < state.last_ms
                or (ttl_ms is not None and t - state.last_ms > ttl_ms)
                or not all(math.isfinite(v) for v in (state.x, state.y, x, y))):
            return {}
        _, fence = fences.crossings(np.array([[state.x, state.y]]), np.array([[x, y]]))
        return {k: set(fence.tolist())} if len(fence) else {}
    points = np.asarray(points, float)
    t = times[order]
    acc = order[t >= state.last_ms] if state is not None else order  # times ascend in order
    if not len(acc):
        return {}
    start = np.empty((len(acc), 2))
    start[1:] = points[acc[:-1]]
    start[0] = (np.nan, np.nan) if state is None or state.x is None else (state.x, state.y)
    before = np.empty(len(acc), np.int64)
    before[1:] = times[acc[:-1]]
    before[0] = state.last_ms if state is not None else 0
    valid = np.isfinite(start).all(axis=1) & np.isfinite(points[acc]).all(axis=1)
    if ttl_ms is not None:
        valid &= times[acc] - before <= ttl_ms
    use = np.flatnonzero(valid)
    track, fence = fences.crossings(start[use], points[acc[use]])
    crossed: dict[int, set[int]] = {}
    for k, f in zip(acc[use[track]].tolist(), fence.tolist(), strict=True):
        crossed.setdefault(k, set()).add(f)
    return crossed


def _pairs(fences: Fences, at: set[int] | np.ndarray
           ) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(fence ids, instance numbers) of fence indices ``at`` (ascending ids)."""
    at = np.sort(np.fromiter(at, np.intp, len(at)))
    return tuple(fences.ids[at].tolist()), tuple(fences.since[at].tolist())


def expire_state(state: ObjectState, object_id: str, fences: Fences, ttl_ms: int,
                 watermark_ms: int) -> tuple[ObjectState | None, list[Event]]:
    """Expire one object when ``last + ttl < watermark``: (None, its expiry exits); else
    (the state unchanged, no events)."""
    state = ObjectState.of(state)
    if state.last_ms + ttl_ms < watermark_ms:
        return None, _expiry(object_id, state, fences, ttl_ms)
    return state, []


def run_objects(states: dict[str, ObjectState], fences: Fences, ttl_ms: int | None,
                names: np.ndarray, publication_ids: np.ndarray, event_times: np.ndarray,
                hits: tuple[np.ndarray, np.ndarray], points: np.ndarray | None = None
                ) -> tuple[list[Event], int]:
    """The events of positions sorted by object id (``names``, str), each object's run through
    ``step`` against ``states`` (updated in place: a forgotten object is removed); ``hits``
    (position index, fence index) sorted by position then fence; ``points`` the positions'
    (n, 2) places (``position_points``; None: no tracks, no ``cross``). Returns the events,
    object after object, and how many positions were dropped."""
    hit_pos, hit_fence = hits
    first = np.ones(len(names), bool)
    first[1:] = names[1:] != names[:-1]
    starts = np.append(np.flatnonzero(first), len(names))
    bounds = np.searchsorted(hit_pos, starts)
    events: list[Event] = []
    dropped = 0
    for o in range(len(starts) - 1):
        a, b = int(starts[o]), int(starts[o + 1])
        lo, hi = int(bounds[o]), int(bounds[o + 1])
        name = names[a]
        state, found, gone = step(states.get(name), name, publication_ids[a:b],
                                  event_times[a:b], None, fences, ttl_ms,
                                  (hit_pos[lo:hi] - a, hit_fence[lo:hi]),
                                  None if points is None else points[a:b])
        if state is None:
            states.pop(name, None)
        else:
            states[name] = state
        events += found
        dropped += gone
    return events, dropped


class EventEngine:
    """Every object's state and the fences, for computing events over a whole stream."""

    def __init__(self, ttl_ms: int | None = None) -> None:
        if ttl_ms is not None and ttl_ms <= 0:
            raise ValueError(f"the object TTL must be above zero, got {ttl_ms} ms")
        self.ttl_ms = ttl_ms
        self.fences = Fences.empty()
        self.states: dict[str, ObjectState] = {}
        self.dropped = 0
        self._added = 0

    def set_fences(self, ids: np.ndarray, geoms: np.ndarray, detect: np.ndarray,
                   distance_m: np.ndarray | None = None) -> list[str | None]:
        """Replace the fences by these subscriptions' (a fence with detect 0 is none): ids
        already present keep their instance (a change), new ones get a new one, absent ones
        are removed. Returns each subscription's problem (a refused distance fence) or None."""
        ids = np.asarray(ids, np.int64)
        current = dict(zip(self.fences.ids.tolist(), self.fences.since.tolist(), strict=True))
        since = np.empty(len(ids), np.int64)
        for k, sid in enumerate(ids.tolist()):
            if sid in current:
                since[k] = current[sid]
            else:
                self._added += 1
                since[k] = self._added
        self.fences, problems = build_fences(ids, geoms, detect, distance_m, since)
        return problems

    def process(self, object_ids: Sequence[str], publication_ids: np.ndarray,
                event_times: np.ndarray, geoms: np.ndarray) -> list[Event]:
        """The events of a batch of positions (any order, any objects), by object id and then
        in each object's order; positions older than their object's last are counted in
        ``dropped``."""
        n = len(publication_ids)
        if n == 0:
            return []
        names = np.asarray(object_ids, dtype=object)
        if any(not isinstance(o, str) for o in names.tolist()):
            bad = next(o for o in names.tolist() if not isinstance(o, str))
            raise ValueError(f"object ids must be strings, got {bad!r} (a publication without "
                             f"an object is no position)")
        inverse = np.unique(names, return_inverse=True)[1]
        order = np.lexsort((publication_ids, event_times, inverse))
        geoms = np.asarray(geoms, dtype=object)[order]
        events, dropped = run_objects(self.states, self.fences, self.ttl_ms, names[order],
                                      np.asarray(publication_ids, np.int64)[order],
                                      np.asarray(event_times, np.int64)[order],
                                      self.fences.hits(geoms), position_points(geoms))
        self.dropped += dropped
        return events

    def expire(self, watermark_ms: int) -> list[Event]:
        """Expire every object with ``last + ttl < watermark`` (the end of a stream, or a
        periodic sweep); its exits by object id. Nothing without a TTL."""
        if self.ttl_ms is None:
            return []
        events: list[Event] = []
        for name in sorted(self.states):
            state, found = expire_state(self.states[name], name, self.fences, self.ttl_ms,
                                        watermark_ms)
            if state is None:
                del self.states[name]
            events += found
        return events


# an event's kind code: its index here (the enum's order)
KIND_NAMES = (ENTER, EXIT, INSIDE, OUTSIDE, CROSS, NEARBY, FARAWAY)


@dataclass
class EventColumns:
    """Events as columns, in order: the objects' names, subscription ids, kind codes (indexes
    of ``KIND_NAMES``), publication ids (of no meaning for an expiry, which has none), event
    times, and whether each is an expiry (reason ``expired``, no publication)."""

    object_id: np.ndarray
    subscription_id: np.ndarray
    kind: np.ndarray
    publication_id: np.ndarray
    event_time: np.ndarray
    expired: np.ndarray

    def __len__(self) -> int:
        return len(self.subscription_id)

    @classmethod
    def of(cls, events: Sequence[Event]) -> EventColumns:
        """The columns of ``Event`` tuples."""
        code = {kind: k for k, kind in enumerate(KIND_NAMES)}
        return cls(np.array([e.object_id for e in events], object),
                   np.array([e.subscription_id for e in events], np.int64),
                   np.array([code[e.kind] for e in events], np.int8),
                   np.array([-1 if e.publication_id is None else e.publication_id
                             for e in events], np.int64),
                   np.array([e.event_time for e in events], np.int64),
                   np.array([e.reason is not None for e in events], bool))

    @classmethod
    def concat(cls, parts: Sequence[EventColumns]) -> EventColumns:
        if not parts:
            return cls.of(())
        return cls(*(np.concatenate([getattr(p, f.name) for p in parts]) for f in fields(cls)))

    def events(self) -> list[Event]:
        """The events as ``Event`` tuples."""
        return [Event(o, s, KIND_NAMES[k], None if x else p, t, EXPIRED if x else None)
                for o, s, k, p, t, x in zip(
                    self.object_id.tolist(), self.subscription_id.tolist(), self.kind.tolist(),
                    self.publication_id.tolist(), self.event_time.tolist(),
                    self.expired.tolist(), strict=True)]


def run_batch(states: dict[str, ObjectState], fences: Fences, ttl_ms: int | None,
              names: np.ndarray, publication_ids: np.ndarray, event_times: np.ndarray,
              hits: tuple[np.ndarray, np.ndarray], points: np.ndarray | None = None
              ) -> tuple[EventColumns, int]:
    """``run_objects`` for a whole batch at once: the same events, as columns, with NumPy set
    operations over (position, fence) pairs instead of a Python step per position. Positions
    sorted by object id, then event time, then publication id; ``hits`` sorted by position then
    fence; ``points`` their places (None: no tracks, no ``cross``). A stream's operator pays
    this per event (an object in a dozen fences that ask for ``inside`` gives a dozen events a
    position): a third of what ``step`` costs there."""
    n, nf = len(names), len(fences)
    times = np.asarray(event_times, np.int64)
    pids = np.asarray(publication_ids, np.int64)
    if n == 0:
        return EventColumns.of(()), 0
    first = np.ones(n, bool)
    first[1:] = names[1:] != names[:-1]
    obj = np.cumsum(first) - 1                      # each position's object
    objects = names[first]
    # a held state may be a plain (last_ms, fence_ids, fence_since[, x, y]) tuple, as a state
    # store gives it back: read by index
    held = [states.get(name) for name in objects.tolist()]
    has_held = np.array([s is not None for s in held], bool)
    held_last = np.array([s[0] if s is not None else 0 for s in held], np.int64)
    held_xy = np.array([_place(s[3:]) if s is not None else (None, None) for s in held],
                       float).reshape(-1, 2)       # None: NaN
    place = (np.full((n, 2), np.nan) if points is None
             else np.asarray(points, float).reshape(-1, 2))
    accepted = ~has_held[obj] | (times >= held_last[obj])
    acc = np.flatnonzero(accepted)
    m = len(acc)
    for o in np.setdiff1d(np.arange(len(objects)), obj[acc]).tolist():  # all dropped:
        state = ObjectState.of(held[o])                  # fences gone since are forgotten
        states[objects[o]] = ObjectState(state.last_ms, *_pairs(fences, fences.indices(state)),
                                         state.x, state.y)
    if m == 0:
        return EventColumns.of(()), n
    rank = np.full(n, -1, np.int64)
    rank[acc] = np.arange(m)
    a_obj, a_time = obj[acc], times[acc]
    last = np.flatnonzero(np.append(a_obj[1:] != a_obj[:-1], True))  # each object's last
    if nf == 0:  # no fences: no events; each object's last time and place
        _keep_states(states, fences, objects[a_obj[last]], a_time[last], place[acc[last]],
                     np.empty(0, np.int64), last)
        return EventColumns.of(()), n - m
    # the previous accepted position of each accepted one: in the batch, or the held state
    in_batch = np.zeros(m, bool)
    in_batch[1:] = a_obj[1:] == a_obj[:-1]
    from_held = ~in_batch & has_held[a_obj]
    prev_time = np.where(in_batch, np.roll(a_time, 1), held_last[a_obj])
    gap = ((in_batch | from_held) & (a_time - prev_time > ttl_ms) if ttl_ms is not None
           else np.zeros(m, bool))
    # (accepted position, fence) pairs as keys: now, and what the previous position was in
    hit_pos, hit_fence = hits
    keep = accepted[hit_pos]
    now = rank[hit_pos[keep]] * nf + hit_fence[keep]
    by_prev = now + nf                               # a pair of r is the previous of r + 1
    nxt = by_prev // nf
    by_prev = by_prev[nxt < m]
    nxt = nxt[nxt < m]
    prev = np.sort(np.concatenate([by_prev[in_batch[nxt]], _held_keys(
        [held[o] for o in a_obj[from_held].tolist()], np.flatnonzero(from_held), fences)]))
    prev_r = prev // nf
    expiring = prev[gap[prev_r]]                     # the state an expiry forgets
    prev = prev[~gap[prev_r]]
    crossed = _cross_keys(fences, place if points is not None else None, acc, in_batch,
                          np.where(from_held[:, None], held_xy[a_obj], np.nan), gap,
                          np.union1d(now, prev))
    keys, phase, kind = _event_keys(now, prev, expiring, crossed, fences, m)
    r, f = keys // nf, keys % nf
    expired = phase == 0
    at = acc[r]
    event_time = np.where(expired, prev_time[r] + (ttl_ms or 0), times[at])
    columns = EventColumns(objects[obj[at]], fences.ids[f], kind,
                           np.where(expired, -1, pids[at]), event_time, expired)
    _keep_states(states, fences, objects[a_obj[last]], a_time[last], place[acc[last]], now,
                 last)
    return columns, n - m


def _keep_states(states: dict[str, ObjectState], fences: Fences, names: np.ndarray,
                 times: np.ndarray, places: np.ndarray, now: np.ndarray, last: np.ndarray
                 ) -> None:
    """Each object's new state: the time, place and fences (of the keys ``now``) of its last
    accepted position (ranks ``last``, one per object of ``names``)."""
    nf = max(len(fences), 1)
    ends = np.searchsorted(now, np.append(last * nf, (last + 1) * nf)).tolist()
    in_ids, in_since = fences.ids[now % nf].tolist(), fences.since[now % nf].tolist()
    for k, (name, t, at) in enumerate(zip(names.tolist(), times.tolist(), places,
                                          strict=True)):
        lo, hi = ends[k], ends[len(last) + k]
        states[name] = ObjectState(t, tuple(in_ids[lo:hi]), tuple(in_since[lo:hi]),
                                   *_place(at))


def _cross_keys(fences: Fences, place: np.ndarray | None, acc: np.ndarray,
                in_batch: np.ndarray, held_start: np.ndarray, gap: np.ndarray,
                in_either: np.ndarray) -> np.ndarray:
    """The (accepted position * fences + fence) keys of the ``cross`` events of a batch: the
    track from each accepted position's previous one (the one before it in the batch, or the
    held place ``held_start``; none across a TTL ``gap``) meets a fence asking for it that
    neither end is in (``in_either``: the keys of now or previous, sorted)."""
    if place is None or not fences.cross_askers:
        return np.empty(0, np.int64)
    end = place[acc]
    start = held_start.copy()
    start[1:][in_batch[1:]] = end[:-1][in_batch[1:]]
    use = np.flatnonzero(~gap & np.isfinite(start).all(axis=1) & np.isfinite(end).all(axis=1))
    track, fence = fences.crossings(start[use], end[use])
    keys = use[track].astype(np.int64) * len(fences) + fence
    return np.setdiff1d(keys, in_either)


def _event_keys(now: np.ndarray, prev: np.ndarray, expiring: np.ndarray, crossed: np.ndarray,
                fences: Fences, positions: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The events of a batch as (position * fences + fence) keys, each with its phase (0:
    an expiry before the position, 1: the position's own) and kind code, in order: by
    position, phase, then fence (a fence's ``cross`` before its ``outside``). ``now``: the
    keys of the fences each position is in; ``prev``: of those its previous position was in;
    ``expiring``: of those an expiry before it forgets; ``crossed``: of its ``cross`` events
    (sorted, unique)."""
    nf, asks = len(fences), fences.asking
    parts = []

    def add(keys: np.ndarray, kind: str, phase: int = 1) -> None:
        keys = keys[asks[kind][keys % nf]]
        parts.append((keys, np.full(len(keys), phase, np.int8),
                      np.full(len(keys), KIND_NAMES.index(kind), np.int8)))

    add(np.setdiff1d(now, prev, assume_unique=True), ENTER)
    add(np.setdiff1d(prev, now, assume_unique=True), EXIT)
    add(np.intersect1d(now, prev, assume_unique=True), INSIDE)
    add(expiring, EXIT, phase=0)
    add(crossed, CROSS)  # before outside: the sort below keeps this order within a key
    outside = np.flatnonzero(asks[OUTSIDE])
    if len(outside):
        every = (np.arange(positions)[:, None] * nf + outside[None, :]).ravel()
        add(np.setdiff1d(every, np.union1d(now, prev)), OUTSIDE)
    keys = np.concatenate([p[0] for p in parts])
    phase = np.concatenate([p[1] for p in parts])
    kind = np.concatenate([p[2] for p in parts])
    order = np.lexsort((keys % nf, phase, keys // nf))
    return keys[order], phase[order], kind[order]


def _held_keys(states: list[Sequence], rows: np.ndarray, fences: Fences) -> np.ndarray:
    """The (row, fence index) keys of the fences each state (an ``ObjectState`` or a plain
    tuple of its fields) is in that still exist as the same instance (``Fences.indices`` for
    many states at once)."""
    counts = np.fromiter((len(s[1]) for s in states), np.int64, len(states))
    ids = np.fromiter(chain.from_iterable(s[1] for s in states), np.int64, int(counts.sum()))
    since = np.fromiter(chain.from_iterable(s[2] for s in states), np.int64, len(ids))
    at, same = fences.locate(ids, since)
    return (np.repeat(np.asarray(rows, np.int64), counts) * len(fences) + at)[same]
