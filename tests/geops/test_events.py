"""The geofence event engine: every rule on hand-made tracks, and a brute-force cross-check
(one position after another, one fence after another, with plain shapely) on random ones."""

from __future__ import annotations

import numpy as np
import pytest
import shapely

from geops.events import (
    CROSS,
    ENTER,
    EXIT,
    EXPIRED,
    INSIDE,
    OUTSIDE,
    Event,
    EventEngine,
    Fences,
    ObjectState,
    build_fences,
    expire_state,
    position_points,
    run_batch,
    run_objects,
    step,
)
from geops.fences import GEOD, SEGMENT_M
from geops.model import DetectKind

ALL = int(DetectKind.ENTER | DetectKind.EXIT | DetectKind.INSIDE | DetectKind.OUTSIDE)
EVERY = ALL | int(DetectKind.CROSS)
BOX = shapely.box(0, 0, 10, 10)
P_IN, P_OUT = shapely.Point(5, 5), shapely.Point(20, 20)


def engine(fences: list[tuple[int, shapely.Geometry, int]], ttl_ms: int | None = None
           ) -> EventEngine:
    e = EventEngine(ttl_ms)
    e.set_fences(np.array([f[0] for f in fences], np.int64),
                 np.array([f[1] for f in fences], object), np.array([f[2] for f in fences]))
    return e


def run(e: EventEngine, positions: list[tuple[str, int, int, shapely.Geometry]]
        ) -> list[tuple]:
    """Positions (object, publication id, time, geometry) as one batch; events as plain
    tuples (object, subscription, kind, publication, time, reason)."""
    events = e.process([p[0] for p in positions], np.array([p[1] for p in positions]),
                       np.array([p[2] for p in positions]),
                       np.array([p[3] for p in positions], object))
    return [tuple(ev) for ev in events]


def test_enter_inside_exit_outside():
    e = engine([(7, BOX, ALL)])
    track = [P_OUT, P_IN, shapely.Point(6, 6), P_OUT, shapely.Point(30, 30)]
    got = []
    for k, geom in enumerate(track):
        got += run(e, [("car", 100 + k, 1000 * k, geom)])
    assert got == [("car", 7, OUTSIDE, 100, 0, None), ("car", 7, ENTER, 101, 1000, None),
                   ("car", 7, INSIDE, 102, 2000, None), ("car", 7, EXIT, 103, 3000, None),
                   ("car", 7, OUTSIDE, 104, 4000, None)]
    assert e.states == {"car": ObjectState(4000, (), (), 30.0, 30.0)}


def test_a_first_position_inside_enters_and_the_relation_is_intersects():
    e = engine([(1, BOX, ALL)])
    # a line that only crosses the fence is in it; a point on its border too
    assert run(e, [("a", 1, 0, shapely.LineString([(-5, 5), (15, 5)])),
                   ("b", 2, 0, shapely.Point(10, 3))]) == [
        ("a", 1, ENTER, 1, 0, None), ("b", 1, ENTER, 2, 0, None)]


def test_a_fence_reports_only_the_kinds_it_asks_for_and_plain_subscriptions_nothing():
    e = engine([(1, BOX, int(DetectKind.ENTER)), (2, BOX, int(DetectKind.EXIT)),
                (3, BOX, 0), (4, BOX, int(DetectKind.INSIDE | DetectKind.OUTSIDE))])
    assert len(e.fences) == 3                      # 3 is a plain subscription
    got = []
    for k, geom in enumerate([P_OUT, P_IN, P_IN, P_OUT]):
        got += run(e, [("o", k, k, geom)])
    assert [(ev[1], ev[2], ev[4]) for ev in got] == [
        (4, OUTSIDE, 0), (1, ENTER, 1), (4, INSIDE, 2), (2, EXIT, 3)]


def test_positions_are_taken_in_event_time_order_ties_by_publication_id():
    e = engine([(1, BOX, ALL)])
    # given shuffled in one batch: times 30 (out), 10 (in), 20 (in), 20 (out, id 5 < 6)
    got = run(e, [("o", 9, 30, P_OUT), ("o", 1, 10, P_IN), ("o", 6, 20, P_IN),
                  ("o", 5, 20, P_OUT)])
    assert got == [("o", 1, ENTER, 1, 10, None), ("o", 1, EXIT, 5, 20, None),
                   ("o", 1, ENTER, 6, 20, None), ("o", 1, EXIT, 9, 30, None)]


def test_a_position_older_than_the_last_accepted_is_dropped_never_a_false_exit():
    e = engine([(1, BOX, ALL)])
    assert run(e, [("o", 1, 100, P_IN)]) == [("o", 1, ENTER, 1, 100, None)]
    assert run(e, [("o", 2, 50, P_OUT), ("o", 3, 100, P_IN)]) == [
        ("o", 1, INSIDE, 3, 100, None)]            # same time as the last: taken
    assert e.dropped == 1
    assert run(e, [("o", 4, 99, P_OUT)]) == [] and e.dropped == 2
    assert e.states["o"] == ObjectState(100, (1,), e.states["o"].fence_since, 5.0, 5.0)


def test_objects_are_independent_in_one_batch():
    e = engine([(1, BOX, int(DetectKind.ENTER | DetectKind.EXIT))])
    got = run(e, [("b", 1, 5, P_IN), ("a", 2, 9, P_IN), ("b", 3, 1, P_OUT), ("a", 4, 10, P_OUT)])
    assert got == [("a", 1, ENTER, 2, 9, None), ("a", 1, EXIT, 4, 10, None),
                   ("b", 1, ENTER, 1, 5, None)]


def test_a_fence_added_mid_stream_enters_at_the_next_position_inside():
    e = engine([])
    assert run(e, [("o", 1, 1, P_IN)]) == []
    e.set_fences(np.array([3]), np.array([BOX]), np.array([ALL]))
    assert run(e, [("o", 2, 2, P_IN)]) == [("o", 3, ENTER, 2, 2, None)]


def test_a_removed_fence_gives_nothing_more_and_coming_back_starts_fresh():
    e = engine([(3, BOX, ALL), (4, BOX, ALL)])
    run(e, [("o", 1, 1, P_IN)])
    e.set_fences(np.array([4]), np.array([BOX]), np.array([ALL]))           # 3 removed
    assert run(e, [("o", 2, 2, P_OUT)]) == [("o", 4, EXIT, 2, 2, None)]
    run(e, [("o", 3, 3, P_IN)])
    e.set_fences(np.array([4]), np.array([BOX]), np.array([ALL]))
    e.set_fences(np.array([3, 4]), np.array([BOX, BOX]), np.array([ALL, ALL]))  # 3 is back
    # the object was in 3 when it was removed; the new 3 has never seen it: enter
    assert run(e, [("o", 4, 4, P_IN)]) == [("o", 3, ENTER, 4, 4, None),
                                            ("o", 4, INSIDE, 4, 4, None)]


def test_removed_and_added_back_between_two_positions_starts_fresh():
    e = engine([(3, BOX, ALL)])
    run(e, [("o", 1, 1, P_IN)])
    e.set_fences(np.array([], np.int64), np.array([], object), np.array([], np.uint8))
    e.set_fences(np.array([3]), np.array([BOX]), np.array([ALL]))
    assert run(e, [("o", 2, 2, P_IN)]) == [("o", 3, ENTER, 2, 2, None)]


def test_a_changed_fence_keeps_its_state():
    e = engine([(3, BOX, ALL)])
    run(e, [("o", 1, 1, P_IN)])
    e.set_fences(np.array([3]), np.array([shapely.box(100, 100, 110, 110)]), np.array([ALL]))
    assert run(e, [("o", 2, 2, P_IN)]) == [("o", 3, EXIT, 2, 2, None)]


def test_an_object_unseen_for_the_ttl_expires_at_its_next_position():
    e = engine([(1, BOX, ALL), (2, BOX, int(DetectKind.ENTER))], ttl_ms=100)
    run(e, [("o", 1, 1_000, P_IN)])
    assert run(e, [("o", 2, 1_100, P_IN)]) == [("o", 1, INSIDE, 2, 1_100, None)]  # == ttl
    assert run(e, [("o", 3, 1_201, P_IN)]) == [
        ("o", 1, EXIT, None, 1_200, EXPIRED),      # last + ttl; 2 does not ask for exits
        ("o", 1, ENTER, 3, 1_201, None), ("o", 2, ENTER, 3, 1_201, None)]


def test_expire_by_watermark_then_the_next_position_is_a_first():
    e = engine([(1, BOX, ALL)], ttl_ms=100)
    run(e, [("a", 1, 1_000, P_IN), ("b", 2, 1_050, P_IN), ("c", 3, 1_000, P_OUT)])
    assert [tuple(ev) for ev in e.expire(1_100)] == []          # last + ttl == watermark
    assert [tuple(ev) for ev in e.expire(1_101)] == [("a", 1, EXIT, None, 1_100, EXPIRED)]
    assert set(e.states) == {"b"}                               # c was in no fence: gone too
    assert run(e, [("a", 4, 1_102, P_IN)]) == [("a", 1, ENTER, 4, 1_102, None)]
    assert EventEngine().expire(10**15) == []                   # without a TTL: never


def test_a_distance_fence_is_measured_in_metres():
    centre = shapely.Point(2.35, 48.85)
    e = EventEngine()
    assert e.set_fences(np.array([5]), np.array([centre]), np.array([ALL]),
                        np.array([1_000.0])) == [None]
    lon, lat, _ = GEOD.fwd([2.35] * 4, [48.85] * 4, [90, 90, 0, 0], [990, 1_010, 990, 1_010])
    got = []
    for k in range(4):
        got += run(e, [("o", k, k, shapely.Point(lon[k], lat[k]))])
    assert [ev[2] for ev in got] == [ENTER, EXIT, ENTER, EXIT]


def test_a_refused_distance_fence_is_named_and_left_out():
    e = EventEngine()
    problems = e.set_fences(np.array([5, 6]), np.array([shapely.Point(0, 0)] * 2),
                            np.array([ALL, ALL]), np.array([-1.0, 10.0]))
    assert problems[0] is not None and "subscription 5" in problems[0] and problems[1] is None
    assert e.fences.ids.tolist() == [6]


def test_the_step_function_carries_a_plain_state_between_batches():
    """What a stateful stream operator would do per object key: state in, state out."""
    fences, _ = build_fences(np.array([1]), np.array([BOX]), np.array([ALL]))
    state, events, dropped = step(None, "o", np.array([1, 2]), np.array([10, 20]),
                                  np.array([P_OUT, P_IN]), fences)
    assert state == ObjectState(20, (1,), (0,), 5.0, 5.0) and dropped == 0
    assert [ev.kind for ev in events] == [OUTSIDE, ENTER]
    state, events, dropped = step(tuple(state), "o", np.array([3, 4]), np.array([5, 30]),
                                  np.array([P_OUT, P_OUT]), fences, ttl_ms=1000)
    assert dropped == 1 and [ev.kind for ev in events] == [EXIT]
    assert expire_state(state, "o", fences, 1000, 1030) == (state, [])
    assert expire_state(state, "o", fences, 1000, 1031) == (None, [])  # in no fence: no exits


def test_event_json_has_reason_only_when_set():
    assert Event("o", 1, ENTER, 2, 3).to_json() == (
        '{"object_id": "o", "subscription_id": 1, "kind": "enter", "publication_id": 2, '
        '"event_time": 3}')
    assert Event("o", 1, EXIT, None, 3, EXPIRED).to_json().endswith(
        '"publication_id": null, "event_time": 3, "reason": "expired"}')


def test_fences_refuse_repeated_ids_and_non_detecting_ones():
    with pytest.raises(ValueError, match="repeat"):
        Fences(np.array([1, 1]), np.array([BOX, BOX]), np.array([1, 1]))
    with pytest.raises(ValueError, match="at least one kind"):
        Fences(np.array([1]), np.array([BOX]), np.array([0]))
    with pytest.raises(ValueError, match="TTL"):
        EventEngine(0)


# --- the brute-force cross-check -----------------------------------------------------------

KINDS = [(ENTER, DetectKind.ENTER), (EXIT, DetectKind.EXIT), (INSIDE, DetectKind.INSIDE),
         (OUTSIDE, DetectKind.OUTSIDE), (CROSS, DetectKind.CROSS)]


def reference_track(a: shapely.Point, b: shapely.Point) -> shapely.LineString:
    """The track from ``a`` to ``b`` one at a time, with ``Geod.npts``: the geodesic in
    pieces of at most ``SEGMENT_M`` when both are lon/lat, else the straight segment."""
    if not all(abs(p.x) <= 180 and abs(p.y) <= 90 for p in (a, b)):
        return shapely.LineString([(a.x, a.y), (b.x, b.y)])
    bx = a.x + (b.x - a.x + 180) % 360 - 180
    dist = GEOD.inv(a.x, a.y, bx, b.y)[2]
    pieces = max(1, int(np.ceil(dist / SEGMENT_M)))
    inner = GEOD.npts(a.x, a.y, bx, b.y, pieces - 1) if pieces > 1 else []
    inner = [(a.x + (x - a.x + 180) % 360 - 180, y) for x, y in inner]
    return shapely.LineString([(a.x, a.y), *inner, (bx, b.y)])


class Reference:
    """One position after another and one fence after another, with sets and shapely (a
    track per position and fence for ``cross``)."""

    def __init__(self, ttl_ms: int | None) -> None:
        self.ttl = ttl_ms
        self.fences: dict[int, tuple[shapely.Geometry, int]] = {}
        self.last: dict[str, int] = {}
        self.inside: dict[str, set[int]] = {}
        self.place: dict[str, shapely.Point] = {}
        self.dropped = 0

    def set_fences(self, fences: dict[int, tuple[shapely.Geometry, int]]) -> None:
        for sid in set(self.fences) - {s for s, (_, d) in fences.items() if d}:
            for ins in self.inside.values():           # removed: forgotten
                ins.discard(sid)
        self.fences = {s: f for s, f in fences.items() if f[1]}

    def _asks(self, sid: int, kind: DetectKind) -> bool:
        return bool(self.fences[sid][1] & kind)

    def expire_one(self, obj: str) -> list[tuple]:
        out = [(obj, sid, EXIT, None, self.last[obj] + self.ttl, EXPIRED)
               for sid in sorted(self.inside[obj]) if self._asks(sid, DetectKind.EXIT)]
        del self.last[obj], self.inside[obj], self.place[obj]
        return out

    def batch(self, positions: list[tuple[str, int, int, shapely.Geometry]]) -> list[tuple]:
        out = []
        for obj, pid, t, geom in sorted(positions, key=lambda p: (p[0], p[2], p[1])):
            if obj in self.last and t < self.last[obj]:
                self.dropped += 1
                continue
            if obj in self.last and self.ttl is not None and t - self.last[obj] > self.ttl:
                out += self.expire_one(obj)
            before = self.inside.get(obj, set())
            start, here = self.place.get(obj), geom.centroid
            track = None if start is None else reference_track(start, here)
            now = set()
            for sid in sorted(self.fences):
                fence, _ = self.fences[sid]
                was = sid in before
                is_in = fence.intersects(geom)
                if is_in:
                    now.add(sid)
                if (not was and not is_in and track is not None
                        and self._asks(sid, DetectKind.CROSS) and fence.intersects(track)):
                    out.append((obj, sid, CROSS, pid, t, None))
                kind = {(False, True): ENTER, (True, False): EXIT, (True, True): INSIDE,
                        (False, False): OUTSIDE}[(was, is_in)]
                if self._asks(sid, dict(KINDS)[kind]):
                    out.append((obj, sid, kind, pid, t, None))
            self.last[obj], self.inside[obj], self.place[obj] = t, now, here
        return out

    def expire(self, watermark: int) -> list[tuple]:
        out = []
        for obj in sorted(self.last):
            if self.last[obj] + self.ttl < watermark:
                out += self.expire_one(obj)
        return out


def _random_fences(rng: np.random.Generator, ids: range) -> dict[int, tuple]:
    out = {}
    for sid in ids:
        x, y = rng.uniform(0, 90, 2)
        w, h = rng.uniform(2, 25, 2)
        shape = (shapely.box(x, y, x + w, y + h) if rng.random() < 0.6 else
                 shapely.Point(x, y).buffer(w / 2, quad_segs=4))
        out[sid] = (shape, int(rng.integers(0, 32)))   # 0: a plain subscription
    return out


def _change_fences(rng: np.random.Generator, fences: dict[int, tuple], e: EventEngine) -> None:
    """Between batches, half the time: some fences removed, some added (ids reused), some
    moved; the engine takes the set."""
    if rng.random() < 0.5:
        for sid in rng.choice(list(fences), 3, replace=False).tolist():
            del fences[sid]
        fences.update(_random_fences(rng, rng.integers(1, 50, 3).tolist()))
    ids = sorted(fences)
    e.set_fences(np.array(ids, np.int64), np.array([fences[s][0] for s in ids], object),
                 np.array([fences[s][1] for s in ids]))


@pytest.mark.parametrize("seed,ttl", [(1, None), (2, 40), (3, 15), (4, 200)])
def test_the_engine_equals_a_brute_force_loop_on_a_random_workload(seed, ttl):
    rng = np.random.default_rng(seed)
    e, ref = EventEngine(ttl), Reference(ttl)
    fences = _random_fences(rng, range(1, 41))
    objects = [f"obj-{k}" for k in range(12)]
    pos = {o: rng.uniform(0, 100, 2) for o in objects}
    clock = {o: 0 for o in objects}
    pid = 0
    total = []
    for _ in range(25):
        _change_fences(rng, fences, e)
        ref.set_fences(dict(fences))
        batch = []
        for _ in range(int(rng.integers(5, 40))):
            o = objects[int(rng.integers(len(objects)))]
            pos[o] = np.clip(pos[o] + rng.normal(0, 6, 2), 0, 100)
            clock[o] += int(rng.integers(0, 20))
            # late positions (older than what was sent before), equal times, shapes too
            t = clock[o] - (int(rng.integers(1, 30)) if rng.random() < 0.15 else 0)
            geom = (shapely.Point(*pos[o]) if rng.random() < 0.85 else
                    shapely.Point(*pos[o]).buffer(1.5, quad_segs=2))
            pid += 1
            batch.append((o, int(rng.permutation([pid, -pid])[0]), t, geom))
        order = rng.permutation(len(batch))
        batch = [batch[k] for k in order]
        got = run(e, batch)
        want = ref.batch(batch)
        assert sorted(got, key=repr) == sorted(want, key=repr)
        assert got == sorted(got, key=lambda ev: ev[0]) # by object, each object in its order
        total += got
        assert e.dropped == ref.dropped
    if ttl is not None:
        end = max(clock.values()) + ttl // 2
        assert [tuple(ev) for ev in e.expire(end)] == ref.expire(end)
        assert set(e.states) == set(ref.last)
    kinds = {ev[2] for ev in total}
    assert kinds == {ENTER, EXIT, INSIDE, OUTSIDE, CROSS}  # the workload exercises every kind
    assert e.dropped > 0


@pytest.mark.parametrize("seed,ttl", [(1, None), (2, 40), (3, 15), (5, 5)])
def test_the_batch_at_once_equals_the_step_per_object(seed, ttl):
    """``run_batch`` (NumPy over the whole batch, the stream's) gives ``run_objects``' events,
    in the same order, the same states and the same count dropped, while fences come and go
    (states that name removed fences), with late positions, equal times and TTL gaps."""
    rng = np.random.default_rng(seed)
    fences = _random_fences(rng, range(1, 41))
    objects = [f"obj-{k}" for k in range(12)]
    pos = {o: rng.uniform(0, 100, 2) for o in objects}
    clock = {o: 0 for o in objects}
    by_step: dict[str, ObjectState] = {}
    at_once: dict[str, ObjectState] = {}
    e = EventEngine(ttl)
    kinds, dropped, pid = set(), 0, 0
    for _ in range(25):
        _change_fences(rng, fences, e)
        n = int(rng.integers(0, 40))
        names, pids, times, geoms = [], [], [], []
        for _ in range(n):
            o = objects[int(rng.integers(len(objects)))]
            pos[o] = np.clip(pos[o] + rng.normal(0, 6, 2), 0, 100)
            clock[o] += int(rng.integers(0, 20))
            pid += 1
            names.append(o)
            pids.append(pid)
            times.append(clock[o] - (int(rng.integers(1, 30)) if rng.random() < 0.15 else 0))
            geoms.append(shapely.Point(*pos[o]))
        names_a = np.array(names, object)
        order = np.lexsort((np.array(pids, np.int64), np.array(times, np.int64),
                            np.unique(names_a, return_inverse=True)[1] if n else names_a))
        names_a = names_a[order]
        pids_a, times_a = np.array(pids, np.int64)[order], np.array(times, np.int64)[order]
        hits = e.fences.hits(np.array(geoms, object)[order])
        places = position_points(np.array(geoms, object)[order])
        want, want_dropped = run_objects(by_step, e.fences, ttl, names_a, pids_a, times_a, hits,
                                         places)
        got, got_dropped = run_batch(at_once, e.fences, ttl, names_a, pids_a, times_a, hits,
                                     places)
        assert got.events() == want and got_dropped == want_dropped
        assert at_once == by_step
        kinds |= {ev.kind for ev in want} | ({EXPIRED} if any(ev.reason for ev in want) else set())
        dropped += want_dropped
    assert kinds == {ENTER, EXIT, INSIDE, OUTSIDE, CROSS} | (
        {EXPIRED} if ttl and ttl < 20 else set())
    assert dropped > 0


def test_a_position_without_an_object_is_refused():
    with pytest.raises(ValueError, match="object ids must be strings, got None"):
        EventEngine().process([None], np.array([1]), np.array([1]), np.array([P_IN]))
