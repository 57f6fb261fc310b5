"""Roaming fences (``geops.roam``): the rule on hand-made pairs, the roam property's checks,
and the engine against a brute-force loop over every pair (one pyproj distance a pair) on
generated moving objects, whatever the batches and the order positions arrive in within the
lateness bound."""

from __future__ import annotations

import fnmatch
import zlib

import numpy as np
import pytest
import shapely

from geops.events import EXPIRED, PairEvent
from geops.fences import GEOD
from geops.model import DetectKind
from geops.roam import (
    FARAWAY,
    FARAWAY_FACTOR,
    NEARBY,
    RoamEngine,
    RoamFences,
)
from geops.roam_cells import CellEngine, CellGrid
from geops.roam_spec import parse_roam, roam_detect, roam_problem
from geops.workload import objects as moving

LON, LAT = 13.4, 52.5


def east(metres: float) -> tuple[float, float]:
    """The point ``metres`` east of (LON, LAT) on the geodesic."""
    lon, lat, _ = GEOD.fwd(LON, LAT, 90.0, metres)
    return float(lon), float(lat)


def feed(engine: RoamEngine, *positions: tuple[str, int, int, float, float], flush: bool = True
         ) -> list[tuple]:
    """Positions (object, publication id, time, lon, lat), one batch each, each evaluated
    at once (``finish``: a position is held until the clock passes it); events without the
    distance, as (object, fence, kind, publication, other, reason)."""
    out = []
    for name, pid, t, x, y in positions:
        out += engine.process([name], np.array([pid]), np.array([t]),
                              np.array([shapely.Point(x, y)], object))
        out += engine.finish() if flush else []
    return [(e.object_id, e.subscription_id, e.kind, e.publication_id, e.other_object_id,
             e.reason) for e in out]


def fences(*specs: tuple[int, float, str]) -> RoamFences:
    return RoamFences(np.array([s[0] for s in specs]), np.array([s[1] for s in specs]),
                      [s[2] for s in specs])


def test_nearby_within_the_distance_and_faraway_only_past_the_hysteresis():
    e = RoamEngine(fences((7, 100.0, "c-*")))
    assert feed(e, ("c-a", 1, 0, *east(0)), ("c-b", 2, 10, *east(99))) == [
        ("c-b", 7, NEARBY, 2, "c-a", None)]
    assert feed(e, ("c-b", 3, 20, *east(105))) == []              # within 1.1 × 100 m
    assert feed(e, ("c-b", 4, 30, *east(50))) == []               # still nearby: nothing new
    assert feed(e, ("c-a", 5, 40, *east(-70))) == [("c-a", 7, FARAWAY, 5, "c-b", None)]
    assert feed(e, ("c-a", 6, 50, *east(-40))) == [("c-a", 7, NEARBY, 6, "c-b", None)]


def test_the_distance_is_geodesic_and_rounded_to_millimetres():
    e = RoamEngine(fences((1, 500.0, "*")))
    e.process(["a"], np.array([1]), np.array([0]), np.array([shapely.Point(LON, LAT)]))
    x, y = east(321.0)
    e.process(["b"], np.array([2]), np.array([5]), np.array([shapely.Point(x, y)]))
    [event] = e.finish()
    assert event.distance_m == pytest.approx(321.0, abs=1e-3)
    assert event.distance_m == round(event.distance_m, 3)
    assert '"other_object_id": "a"' in event.to_json()


def test_only_pairs_whose_ids_both_match_the_glob():
    e = RoamEngine(fences((1, 100.0, "courier-*"), (2, 100.0, "*")))
    got = feed(e, ("courier-1", 1, 0, *east(0)), ("van-1", 2, 1, *east(10)),
               ("courier-2", 3, 2, *east(20)))
    assert got == [("van-1", 2, NEARBY, 2, "courier-1", None),
                   ("courier-2", 1, NEARBY, 3, "courier-1", None),
                   ("courier-2", 2, NEARBY, 3, "courier-1", None),
                   ("courier-2", 2, NEARBY, 3, "van-1", None)]


def test_objects_no_fence_matches_are_left_out():
    e = RoamEngine(fences((1, 100.0, "courier-*")))
    assert feed(e, ("van-1", 1, 0, *east(0)), ("van-2", 2, 1, *east(1))) == []
    assert not e.table.slot and not e.rule.latest


def test_an_expired_object_parts_with_reason_expired_and_comes_back_new():
    e = RoamEngine(fences((1, 100.0, "*")), ttl_ms=1000)
    feed(e, ("a", 1, 0, *east(0)), ("b", 2, 100, *east(10)))
    # b keeps moving, a is silent: a expires at 0 + 1000, before b's position at 1500
    assert feed(e, ("b", 3, 900, *east(12)), ("b", 4, 1500, *east(12))) == [
        ("a", 1, FARAWAY, None, "b", EXPIRED)]
    assert feed(e, ("a", 5, 1600, *east(0))) == [("a", 1, NEARBY, 5, "b", None)]
    assert e.finish() == []                               # nothing is a TTL behind 1600
    # the end of a stream expires what is a TTL behind its last position, as a position would
    e2 = RoamEngine(fences((1, 100.0, "a*"), (2, 100.0, "*")), ttl_ms=1000)
    feed(e2, ("a", 1, 0, *east(0)), ("ab", 2, 100, *east(10)), ("z", 3, 1200, *east(9000)),
         flush=False)
    assert e2.finish() == [PairEvent("a", 1, FARAWAY, None, 1000, EXPIRED, "ab"),
                           PairEvent("a", 2, FARAWAY, None, 1000, EXPIRED, "ab")]


def test_positions_are_held_for_the_lateness_and_later_ones_are_counted():
    e = RoamEngine(fences((1, 100.0, "*")), lateness_ms=50)
    assert feed(e, ("b", 2, 100, *east(10)), flush=False) == []   # held: clock 100
    assert feed(e, ("a", 1, 60, *east(0)), flush=False) == []     # in time, before b's
    assert feed(e, ("c", 3, 200, *east(500)), flush=False) == [("b", 1, NEARBY, 2, "a", None)]
    assert feed(e, ("d", 4, 120, *east(5)), flush=False) == []    # 120 < 200 - 50: late
    assert e.late == 1
    assert e.finish() == []


def test_same_time_positions_are_taken_by_object_id():
    """Of two positions at one time, the one of the smaller id comes first: the other is
    tested against it, whatever the arrival order."""
    for order in ((0, 1), (1, 0)):
        e = RoamEngine(fences((1, 100.0, "*")), lateness_ms=10)
        batch = [("b", 2, 5, *east(10)), ("a", 1, 5, *east(0))]
        feed(e, *(batch[k] for k in order), flush=False)
        assert [(ev.object_id, ev.other_object_id) for ev in e.finish()] == [("b", "a")]


@pytest.mark.parametrize("value,words", [
    ({"distance_m": 0, "match": "a*"}, "above zero"),
    ({"distance_m": float("nan"), "match": "a*"}, "above zero"),
    ({"distance_m": True, "match": "a*"}, "above zero"),
    ({"distance_m": 1e9, "match": "a*"}, "at most 100,000"),
    ({"distance_m": 50, "match": ""}, "non-empty glob"),
    ({"distance_m": 50, "match": 3}, "non-empty glob"),
    ({"distance_m": 50, "match": "courier-[0-9"}, "unclosed '['"),
    ({"distance_m": 50, "match": "a\nb"}, "control characters"),
    ({"distance_m": 50, "match": "a*", "radius": 3}, "unknown keys ['radius']"),
    ({"match": "a*"}, "distance_m"),
    ("courier-*", "must be an object"),
])
def test_bad_roam_properties_are_refused_with_what_is_wrong(value, words):
    assert words in roam_problem(value)
    with pytest.raises(ValueError, match=r"properties\.roam"):
        parse_roam(value)


@pytest.mark.parametrize("glob", ["courier-*", "t-[0-9]?", "[!x]*", "[]]x", "[[]a", "*"])
def test_good_globs_are_taken(glob):
    assert parse_roam({"distance_m": 500, "match": glob}) == (500.0, glob)


# -- against every pair, brute force -------------------------------------------------------

def brute_force(positions: list[tuple[str, int, int, shapely.Geometry]],
                specs: list[tuple[int, float, str]], ttl_ms: int | None) -> list[PairEvent]:
    """The rule of ``geops.roam`` as a plain loop: positions in (time, object, publication)
    order, each against every other live object's latest position, one geodesic a pair."""
    latest: dict[str, tuple[int, float, float]] = {}
    near: set[tuple[int, str, str]] = set()
    events: list[PairEvent] = []
    specs = sorted(specs)
    for name, pid, t, geom in sorted(positions, key=lambda p: (p[2], p[0], p[1])):
        if not any(fnmatch.fnmatchcase(name, g) for _, _, g in specs):
            continue
        if ttl_ms is not None:
            for gone, (last, _, _) in sorted(latest.items(), key=lambda i: (i[1][0], i[0])):
                if last + ttl_ms < t:
                    for other in sorted({b if a == gone else a for _, a, b in near
                                         if gone in (a, b)}):
                        for sid, _, _ in specs:
                            if (sid, *sorted((gone, other))) in near:
                                near.discard((sid, *sorted((gone, other))))
                                events.append(PairEvent(gone, sid, FARAWAY, None, last + ttl_ms,
                                                    EXPIRED, other))
                    del latest[gone]
        x, y = shapely.centroid(geom).x, shapely.centroid(geom).y
        for sid, limit, glob in specs:
            if not fnmatch.fnmatchcase(name, glob):
                continue
            for other in sorted(latest):
                if other == name or not fnmatch.fnmatchcase(other, glob):
                    continue
                _, ox, oy = latest[other]
                d = float(GEOD.inv(x, y, ox, oy)[2])
                key = (sid, *sorted((name, other)))
                if key not in near and d <= limit:
                    near.add(key)
                    events.append(PairEvent(name, sid, NEARBY, pid, t, None, other, round(d, 3)))
                elif key in near and d > limit * FARAWAY_FACTOR:
                    near.discard(key)
                    events.append(PairEvent(name, sid, FARAWAY, pid, t, None, other, round(d, 3)))
        latest[name] = (t, x, y)
    if ttl_ms is not None and positions:
        end = max(p[2] for p in positions if any(fnmatch.fnmatchcase(p[0], g)
                                                 for _, _, g in specs))
        events += brute_force_expiry(latest, near, specs, ttl_ms, end)
    return events


def brute_force_expiry(latest: dict, near: set, specs: list, ttl_ms: int, end: int
                       ) -> list[PairEvent]:
    """The expiries at the end of a stream, as the loop above does them."""
    events = []
    for gone, (last, _, _) in sorted(latest.items(), key=lambda i: (i[1][0], i[0])):
        if last + ttl_ms < end:
            for other in sorted({b if a == gone else a for _, a, b in near if gone in (a, b)}):
                for sid, _, _ in specs:
                    if (sid, *sorted((gone, other))) in near:
                        near.discard((sid, *sorted((gone, other))))
                        events.append(PairEvent(gone, sid, FARAWAY, None, last + ttl_ms, EXPIRED,
                                            other))
    return events


def moving_objects(seed: int, objects: int = 24, steps: int = 30
                   ) -> list[tuple[str, int, int, shapely.Geometry]]:
    """Generated objects moving in a 3 km square (``geops.workload.objects.tracks``), some
    silent for a while (so they expire), some positions polygons; event times with ties."""
    rng = np.random.default_rng(seed)
    bounds = (LON, LAT, LON + 0.04, LAT + 0.027)
    starts = np.column_stack([rng.uniform(bounds[0], bounds[2], objects),
                              rng.uniform(bounds[1], bounds[3], objects)])
    xy = moving.tracks(rng, starts, objects * steps, 200, bounds)
    kinds = np.array(["courier", "truck", "bike"])[rng.integers(0, 3, objects)]
    names = [f"{kinds[k]}-{k}" for k in range(objects)]
    out = []
    for i, (x, y) in enumerate(xy.tolist()):
        k, step = i % objects, i // objects
        if k % 5 == 0 and 10 <= step < 18:                # silent: expires with a 2 s TTL
            continue
        t = step * 400 + int(rng.integers(0, 3)) * 100    # ties across objects
        geom = (shapely.Point(x, y) if i % 7 else shapely.Point(x, y).buffer(1e-4, 2))
        out.append((names[k], i, t, geom))
    return out


SPECS = [(3, 150.0, "courier-*"), (1, 400.0, "*"), (2, 250.0, "truck-[0-9]"),
         (9, 300.0, "bike-1*")]


def run_engine(positions, specs, ttl_ms, lateness_ms, rng, kind=RoamEngine):
    """The events of an engine (``RoamEngine``, or ``CellEngine``: candidates found in
    cells) with the positions in batches of random sizes, and the engine."""
    engine = kind(fences(*specs), ttl_ms, lateness_ms)
    events: list[PairEvent] = []
    lo = 0
    while lo < len(positions):
        hi = lo + int(rng.integers(1, 40))
        part = positions[lo:hi]
        events += engine.process([p[0] for p in part], np.array([p[1] for p in part]),
                                 np.array([p[2] for p in part]),
                                 np.array([p[3] for p in part], object))
        lo = hi
    return events + engine.finish(), engine


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_engine_gives_the_events_of_every_pair_brute_force(seed):
    positions = moving_objects(seed)
    expected = brute_force(positions, SPECS, ttl_ms=2_000)
    kinds = {e.kind for e in expected}
    assert {NEARBY, FARAWAY} <= kinds and any(e.reason for e in expected)
    rng = np.random.default_rng(seed)
    in_order = sorted(positions, key=lambda p: p[2])
    events, engine = run_engine(in_order, SPECS, 2_000, 0, rng)
    assert events == expected and engine.late == 0
    # arriving out of order, but never more than the lateness behind the clock
    shuffled = sorted(positions, key=lambda p: p[2] + rng.uniform(0, 1_500))
    events, engine = run_engine(shuffled, SPECS, 2_000, 1_500, rng)
    assert events == expected and engine.late == 0


def test_late_positions_are_left_out_as_the_loop_without_them():
    positions = moving_objects(4)
    rng = np.random.default_rng(4)
    shuffled = sorted(positions, key=lambda p: p[2] + rng.uniform(0, 3_000))
    clock, late, kept = None, 0, []
    for p in shuffled:                                    # late: behind the clock - 1,000
        if clock is not None and p[2] < clock - 1_000:
            late += 1
        else:
            kept.append(p)
        clock = p[2] if clock is None else max(clock, p[2])
    engine = RoamEngine(fences(*SPECS), 2_000, 1_000)
    events = []
    for p in shuffled:                                    # one a batch: the loop's clock
        events += engine.process([p[0]], np.array([p[1]]), np.array([p[2]]),
                                 np.array([p[3]], object))
    events += engine.finish()
    assert late > 0 and engine.late == late
    assert events == brute_force(kept, SPECS, ttl_ms=2_000)


def test_no_ttl_keeps_every_object():
    positions = moving_objects(5, objects=12, steps=20)
    events, _ = run_engine(sorted(positions, key=lambda p: p[2]), SPECS, None, 0,
                           np.random.default_rng(5))
    assert events == brute_force(positions, SPECS, ttl_ms=None)
    assert not any(e.reason for e in events)


def test_a_nearby_is_within_the_distance_and_a_faraway_beyond_the_hysteresis():
    limits = {sid: d for sid, d, _ in SPECS}
    for e in brute_force(moving_objects(6), SPECS, ttl_ms=2_000):
        if e.kind == NEARBY:
            assert e.distance_m <= limits[e.subscription_id] + 1e-3
        elif e.reason is None:
            assert e.distance_m > limits[e.subscription_id] * FARAWAY_FACTOR - 1e-3


def test_a_roam_reports_both_kinds_unless_detect_names_one():
    both = int(DetectKind.NEARBY | DetectKind.FARAWAY)
    assert roam_detect(0, (100.0, "a*")) == both
    assert roam_detect(int(DetectKind.ENTER), (100.0, "a*")) == both | int(DetectKind.ENTER)
    assert roam_detect(int(DetectKind.NEARBY), (100.0, "a*")) == int(DetectKind.NEARBY)
    assert roam_detect(int(DetectKind.EXIT), None) == int(DetectKind.EXIT)
    with pytest.raises(ValueError, match=r"nearby and faraway need properties\.roam"):
        roam_detect(int(DetectKind.FARAWAY), None)


def test_a_fence_asking_for_one_kind_reports_only_it_and_still_follows_pairs():
    only_far = RoamFences(np.array([1, 2]), np.array([100.0, 100.0]), ["*", "*"],
                          np.array([int(DetectKind.FARAWAY), int(DetectKind.NEARBY)]))
    e = RoamEngine(only_far)
    got = feed(e, ("a", 1, 0, *east(0)), ("b", 2, 10, *east(50)), ("b", 3, 20, *east(500)))
    assert got == [("b", 2, NEARBY, 2, "a", None), ("b", 1, FARAWAY, 3, "a", None)]


# -- spread over cells (geops.roam_cells): the stream's model -------------------------------

@pytest.mark.parametrize("seed", [0, 3])
def test_cells_give_the_single_engines_events(seed):
    positions = moving_objects(seed)
    rng = np.random.default_rng(seed)
    shuffled = sorted(positions, key=lambda p: p[2] + rng.uniform(0, 1_500))
    events, engine = run_engine(shuffled, SPECS, 2_000, 1_500, rng, CellEngine)
    assert events == brute_force(positions, SPECS, ttl_ms=2_000) and engine.late == 0
    busy = [n for n in engine.home_positions.values() if n]
    assert len(busy) >= 4 and max(busy) < 0.8 * len(positions)     # the work is spread


def test_cells_leave_out_the_same_late_positions():
    positions = moving_objects(4)
    rng = np.random.default_rng(9)
    shuffled = sorted(positions, key=lambda p: p[2] + rng.uniform(0, 3_000))
    one, single = run_engine(shuffled, SPECS, 2_000, 1_000, np.random.default_rng(1))
    many, cells = run_engine(shuffled, SPECS, 2_000, 1_000, np.random.default_rng(1),
                             CellEngine)
    assert single.late > 0 and cells.late == single.late and many == one


def test_every_point_within_the_reach_is_in_a_cell_the_position_is_sent_to():
    """Around the globe, near a pole and across the antimeridian: a point at the reach in
    any direction lies in the home cell or a copy's."""
    grid = CellGrid(5_000.0)
    rng = np.random.default_rng(2)
    lon = np.concatenate([rng.uniform(-180, 180, 300), [179.99, -179.99, 0.0]])
    lat = np.concatenate([rng.uniform(-85, 85, 300), [10.0, -60.0, 84.9]])
    home, copies = grid.route(np.column_stack([lon, lat]))
    sent: dict[int, set] = {k: {home[k]} for k in range(len(lon))}
    for k, cell in copies:
        sent[k].add(cell)
    for azimuth in range(0, 360, 15):
        x, y, _ = GEOD.fwd(lon, lat, np.full(len(lon), azimuth), np.full(len(lon), 5_000.0))
        there, _ = grid.route(np.column_stack([x, y]))
        assert all(there[k] in sent[k] for k in range(len(lon)))
    low = np.abs(lat) <= 30                          # nearer a pole a column is narrower
    assert max(len(sent[k]) for k in np.flatnonzero(low).tolist()) <= 12


def test_kafka_partitions_read_at_their_own_pace_give_the_same_events():
    """Positions keyed by object on four partitions, each in its own order, read by a
    consumer that takes a few records of one partition at a time: with a lateness as large as
    the partitions drift apart, the events are the oracle's; with less, the late ones are
    counted and left out, never turned into other events of the positions in time."""
    positions = sorted(moving_objects(11), key=lambda p: (p[2], p[1]))
    parts = [[p for p in positions if zlib.crc32(p[0].encode()) % 4 == k] for k in range(4)]
    rng = np.random.default_rng(11)
    arrival, at = [], [0] * 4
    while any(at[k] < len(parts[k]) for k in range(4)):
        k = int(rng.choice([k for k in range(4) if at[k] < len(parts[k])]))
        take = int(rng.integers(1, 30))
        arrival += parts[k][at[k]:at[k] + take]
        at[k] += take
    clock, drift = -1, 0
    for p in arrival:                                  # how far behind the clock they come
        drift, clock = max(drift, clock - p[2]), max(clock, p[2])
    assert drift > 0
    events, engine = run_engine(arrival, SPECS, 2_000, drift + 1,
                                np.random.default_rng(1), CellEngine)
    assert engine.late == 0 and events == brute_force(positions, SPECS, ttl_ms=2_000)
    _, short = run_engine(arrival, SPECS, 2_000, drift // 4, np.random.default_rng(1))
    assert short.late > 0
