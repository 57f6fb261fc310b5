"""``cross``: a track between two positions out of a fence that passes through it. The rule on
hand-made tracks (exact ones: dyadic lon/lat coordinates a few hundred metres apart, where a
track is one straight piece), on a distance fence where the geodesic and a straight lon/lat
chord disagree, and against a brute-force loop on generated tracks."""

from __future__ import annotations

import numpy as np
import pytest
import shapely

from geops.events import (
    CROSS,
    ENTER,
    EXIT,
    OUTSIDE,
    EventColumns,
    EventEngine,
    Fences,
    run_batch,
    tracks,
)
from geops.fences import GEOD, SEGMENT_M
from geops.model import DetectKind
from geops.workload import generate_workload
from tests.geops.test_events import Reference, engine, reference_track

C = 2.0 ** -10                       # ~108 m at the equator: the fence's side
FENCE = shapely.box(0, 0, C, C)
ASKS = int(DetectKind.CROSS | DetectKind.ENTER | DetectKind.EXIT)


def run(e: EventEngine, *positions: tuple[int, int, float, float], obj: str = "o"
        ) -> list[tuple]:
    """Positions (publication id, time, x, y) of one object as one batch; events as
    (subscription, kind, publication, reason)."""
    events = e.process([obj] * len(positions), np.array([p[0] for p in positions]),
                       np.array([p[1] for p in positions]),
                       np.array([shapely.Point(p[2], p[3]) for p in positions], object))
    return [(ev.subscription_id, ev.kind, ev.publication_id, ev.reason) for ev in events]


def test_a_track_straight_through_crosses():
    e = engine([(1, FENCE, ASKS)])
    assert run(e, (1, 0, -C / 2, C / 2)) == []
    assert run(e, (2, 10, 1.5 * C, C / 2)) == [(1, CROSS, 2, None)]
    assert run(e, (3, 20, 1.5 * C, 3 * C)) == []       # the next track misses it


def test_a_track_touching_a_corner_or_running_along_an_edge_crosses():
    """In is intersects: a track that meets the fence's border crosses it, as a position on
    the border is in it."""
    e = engine([(1, FENCE, ASKS)])
    run(e, (1, 0, C / 2, 1.5 * C))
    assert run(e, (2, 10, 1.5 * C, C / 2)) == [(1, CROSS, 2, None)]    # through (C, C)
    run(e, (3, 20, -C / 2, 0))
    assert run(e, (4, 30, 2 * C, 0)) == [(1, CROSS, 4, None)]          # along y = 0
    assert run(e, (5, 40, 2 * C, -C / 4)) == []                        # parallel, below


def test_from_inside_or_to_inside_is_no_cross():
    e = engine([(1, FENCE, ASKS)])
    run(e, (1, 0, -C / 2, C / 2))
    assert run(e, (2, 10, C / 2, C / 2)) == [(1, ENTER, 2, None)]
    assert run(e, (3, 20, 1.5 * C, C / 2)) == [(1, EXIT, 3, None)]


def test_a_first_position_has_no_track():
    e = engine([(1, FENCE, ASKS | int(DetectKind.OUTSIDE))])
    assert run(e, (1, 0, -C / 2, C / 2), (2, 10, 1.5 * C, C / 2)) == [
        (1, OUTSIDE, 1, None), (1, CROSS, 2, None), (1, OUTSIDE, 2, None)]  # cross first
    assert run(e, (3, 0, -C / 2, C / 2), obj="other") == [(1, OUTSIDE, 3, None)]


def test_a_late_position_neither_crosses_nor_starts_a_track():
    """The track starts at the last accepted position: a late one is dropped, so the track
    from it to the next (which would cross) is not drawn, and the one from the last accepted
    (which misses) is."""
    e = engine([(1, FENCE, ASKS)])
    run(e, (1, 0, -C / 2, 2 * C))                                    # above-left
    assert run(e, (2, 20, 1.5 * C, 2 * C)) == []                    # above-right: misses
    assert run(e, (3, 10, 1.5 * C, -C)) == [] and e.dropped == 1     # late: below-right
    # from above-right through the fence (from the late one it would run below it)
    assert run(e, (4, 30, -C / 2, -C)) == [(1, CROSS, 4, None)]
    e2 = engine([(1, FENCE, ASKS)])
    run(e2, (1, 0, -C / 2, 2 * C), (2, 20, -C / 2, 2 * C))
    # in one batch: the late position is dropped, and the track from it (which would
    # cross) is not drawn; the one from the last accepted runs above the fence
    assert run(e2, (3, 10, -C / 2, C / 2), (4, 30, 1.5 * C, 1.2 * C)) == []
    assert e2.dropped == 1


def test_an_expired_object_starts_afresh_but_a_gap_of_the_ttl_is_a_track():
    e = engine([(1, FENCE, ASKS)], ttl_ms=100)
    run(e, (1, 0, -C / 2, C / 2))
    assert run(e, (2, 100, 1.5 * C, C / 2)) == [(1, CROSS, 2, None)]  # last + ttl: kept
    assert run(e, (3, 201, -C / 2, C / 2)) == []                       # gap > ttl: first
    assert run(e, (4, 250, 1.5 * C, C / 2)) == [(1, CROSS, 4, None)]
    e.expire(10_000)
    assert e.states == {}
    assert run(e, (5, 10_001, -C / 2, C / 2)) == []                    # forgotten: no track


def test_a_fence_that_changes_is_crossed_as_it_is_at_the_position():
    """A new fence is crossed by the next track through it; a moved one by the track through
    its new shape, unless the previous position was in its old shape (an exit); a removed
    one gives nothing."""
    e = engine([(1, FENCE, ASKS)])
    run(e, (1, 0, -C / 2, 3 * C))
    moved = shapely.box(0, 2.5 * C, C, 3.5 * C)           # now on the object's way
    e.set_fences(np.array([1, 2]), np.array([moved, FENCE], object),
                 np.array([ASKS, ASKS]))
    assert run(e, (2, 10, 1.5 * C, 3 * C)) == [(1, CROSS, 2, None)]
    run(e, (3, 20, C / 2, C / 2))                          # enters 2
    e.set_fences(np.array([2]), np.array([shapely.box(0, 2 * C, C, 3 * C)], object),
                 np.array([ASKS]))                          # 2 moves away; 1 is removed
    assert run(e, (4, 30, C / 2, 4 * C)) == [(2, EXIT, 4, None)]  # was in it: no cross


def test_a_fence_asks_for_cross_alone():
    e = engine([(1, FENCE, int(DetectKind.CROSS)), (2, FENCE, int(DetectKind.ENTER))])
    run(e, (1, 0, -C / 2, C / 2))
    assert run(e, (2, 10, 1.5 * C, C / 2)) == [(1, CROSS, 2, None)]


def test_a_distance_fence_is_crossed_where_the_geodesic_passes_within_its_distance():
    """Around a point at 60° N with 1 km: a 100 km track whose geodesic passes 950 m from it
    crosses, one passing 1,050 m from it does not, though the straight lon/lat chord of the
    second passes within 1 km (a geodesic bends toward the pole: ~340 m here)."""
    centre = shapely.Point(10.0, 60.0)
    got = {}
    for d in (950.0, 1_050.0):
        e = EventEngine()
        e.set_fences(np.array([1]), np.array([centre], object),
                     np.array([int(DetectKind.CROSS)]), np.array([1_000.0]))
        plon, plat, _ = GEOD.fwd(10.0, 60.0, 0.0, d)        # closest approach, north of it
        a = shapely.Point(*GEOD.fwd(plon, plat, -90.0, 50_000.0)[:2])
        b = shapely.Point(*GEOD.fwd(plon, plat, 90.0, 50_000.0)[:2])
        got[d] = [ev.kind for ev in e.process(["o", "o"], np.array([1, 2]), np.array([0, 1]),
                                              np.array([a, b], object))]
        assert shapely.LineString([a, b]).intersects(e.fences.geoms[0])  # the chord would
    assert got == {950.0: [CROSS], 1_050.0: []}


def test_tracks_are_geodesics_in_pieces_or_straight_when_not_lon_lat():
    lines = tracks(np.array([[0.0, 0.0], [500.0, 0.0], [179.999, 0.0]]),
                   np.array([[0.0, 0.1], [600.0, 10.0], [-179.999, 0.0]]))
    piece = shapely.get_coordinates(lines[0])
    assert len(piece) == int(np.ceil(GEOD.inv(0, 0, 0, 0.1)[2] / SEGMENT_M)) + 1
    assert np.allclose(np.diff(piece[:, 1]), np.diff(piece[:, 1])[0])   # even pieces
    assert shapely.get_coordinates(lines[1]).tolist() == [[500.0, 0.0], [600.0, 10.0]]
    over = shapely.get_coordinates(lines[2])          # over the antimeridian, not the world
    assert over[0, 0] == 179.999 and np.isclose(over[-1, 0], 180.001)


def test_the_stream_without_places_reports_no_cross():
    """``run_batch`` without the positions' places (the stream's events operator, which has
    no fence shapes either) computes every other kind and no track."""
    fences = Fences(np.array([1]), np.array([FENCE], object), np.array([ASKS]))
    pts = np.array([shapely.Point(-C / 2, C / 2), shapely.Point(1.5 * C, C / 2)], object)
    states: dict = {}
    cols, _ = run_batch(states, fences, None, np.array(["o", "o"], object), np.array([1, 2]),
                        np.array([0, 1]), fences.hits(pts))
    assert len(cols) == 0 and states["o"].x is None
    assert isinstance(cols, EventColumns)


@pytest.mark.parametrize("seed,ttl", [(3, None), (11, 900_000)])
def test_generated_tracks_equal_a_brute_force_loop(seed, ttl):
    """Objects of ``geops generate`` (lon/lat, metres a step) against its fences, every one
    asking for cross too, in batches, while fences move: the engine's events equal the
    reference's, which draws each track alone (``Geod.npts``) and tests each fence with
    shapely."""
    # a step of 30 × 20 s: kilometres, long enough to jump over fences
    w = generate_workload(seed=seed, objects=30, subscriptions=300, publications=3_000,
                          interval_ms=20_000)
    e, ref = EventEngine(ttl), Reference(ttl)
    detect = np.where(w.detect > 0, w.detect | int(DetectKind.CROSS), 0).astype(np.uint8)
    problems = e.set_fences(w.subscriptions.ids, w.subscriptions.geoms, detect, w.distance_m)
    fenced = e.fences
    ref.set_fences({int(i): (g, int(d)) for i, g, d in zip(
        fenced.ids.tolist(), fenced.geoms, fenced.detect.tolist(), strict=True)})
    assert not any(problems) and len(fenced) > 20
    rng = np.random.default_rng(seed)
    pubs, objects = w.publications, np.asarray(w.object_ids)
    total, at = [], 0
    while at < len(pubs):
        n = int(rng.integers(20, 200))
        rows = np.arange(at, min(at + n, len(pubs)))
        at += n
        batch = [(objects[k], int(pubs.ids[k]), int(pubs.event_time[k]), pubs.geoms[k])
                 for k in rows.tolist()]
        got = [tuple(ev) for ev in e.process([b[0] for b in batch],
                                             np.array([b[1] for b in batch]),
                                             np.array([b[2] for b in batch]),
                                             np.array([b[3] for b in batch], object))]
        assert got == ref.batch(batch)        # the same events in the same order
        total += got
    if ttl is not None:
        end = int(pubs.event_time.max()) + ttl + 1
        assert [tuple(ev) for ev in e.expire(end)] == ref.expire(end)
    crosses = sum(ev[2] == CROSS for ev in total)
    assert crosses >= 5 and any(ev[2] == ENTER for ev in total)


def test_the_reference_track_is_the_engines():
    a, b = shapely.Point(10.0, 60.0), shapely.Point(10.5, 60.2)
    mine = tracks(np.array([[a.x, a.y]]), np.array([[b.x, b.y]]))[0]
    theirs = reference_track(a, b)
    assert len(mine.coords) == len(theirs.coords)
    assert np.allclose(shapely.get_coordinates(mine), shapely.get_coordinates(theirs),
                       atol=1e-9)


@pytest.mark.parametrize("seed", [1, 2])
def test_a_single_track_ruled_out_before_it_is_drawn_meets_no_fence(seed):
    """``Fences.may_meet`` (a poll's one track) is False only for a track that meets no
    fence asking for cross: tracks one at a time (short and long, at high latitudes, over the
    antimeridian, out of lon/lat) cross what every track drawn at once crosses, and most
    short tracks far from the fences are ruled out."""
    rng = np.random.default_rng(seed)
    centres = np.column_stack([rng.uniform(-180, 180, 300), rng.uniform(-88, 88, 300)])
    sizes = rng.choice([1e-4, 1e-2, 0.5], 300)
    geoms = shapely.box(centres[:, 0], centres[:, 1], centres[:, 0] + sizes,
                        centres[:, 1] + sizes)
    detect = np.where(rng.random(300) < 0.5, int(DetectKind.CROSS), int(DetectKind.ENTER))
    fences = Fences(np.arange(300), geoms, detect)
    n = 2_000
    starts = np.column_stack([rng.uniform(-180, 180, n), rng.uniform(-89.9, 89.9, n)])
    starts[:200] = centres[:200] - rng.uniform(0, 0.05, (200, 2))   # beside a fence
    starts[200:300, 0] = rng.choice([-179.999, 179.999], 100)       # at the antimeridian
    starts[300:400] *= 3                                            # not lon/lat
    # long tracks are cut into pieces of SEGMENT_M: a few of them, to keep the drawing short
    step = rng.choice([1e-4, 1e-2, 0.3, 2.0], n, p=[0.3, 0.3, 0.3, 0.1])[:, None] * rng.normal(
        size=(n, 2))
    ends = starts + step
    ends[300:400] = starts[300:400] + rng.normal(0, 300, (100, 2))
    ends[:200] = centres[:200] + sizes[:200, None] + rng.uniform(0, 0.05, (200, 2))  # across
    track, fence = fences.crossings(starts, ends)    # all at once: every track drawn
    want = sorted(zip(track.tolist(), fence.tolist(), strict=True))
    got = sorted((i, f) for i in range(n)
                 for f in fences.crossings(starts[i:i + 1], ends[i:i + 1])[1].tolist())
    assert got == want and len(want) > 30
    near = [fences.may_meet(*starts[i], *ends[i]) for i in range(n)]
    assert all(near[i] for i, _ in want)
    short = np.flatnonzero(np.abs(step).max(axis=1) < 0.05)
    assert np.mean([not near[i] for i in short.tolist()]) > 0.9
