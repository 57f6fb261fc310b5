"""Distance fences: every point within the distance (on the WGS84 ellipsoid) is inside, every
point farther than it by 0.1 % is outside, checked against geodesic distances."""

from __future__ import annotations

import numpy as np
import pytest
import shapely

from geops.errors import FenceError
from geops.fences import GEOD, fence_geometries, fence_geometry

EPS = 0.001


def _true_distance(geometry: shapely.Geometry, lon: np.ndarray, lat: np.ndarray) -> np.ndarray:
    """Geodesic distance of each point to ``geometry``: 0 inside, else to the nearest of its
    boundary cut into pieces of about 10 m (a brute-force reference, long by at most
    (5 m)² / 2d: 4 cm at 300 m)."""
    line = geometry.boundary if geometry.geom_type == "Polygon" else geometry
    samples = shapely.get_coordinates(shapely.segmentize(line, 1e-4))
    _, _, dist = GEOD.inv(np.repeat(lon, len(samples)), np.repeat(lat, len(samples)),
                          np.tile(samples[:, 0], len(lon)), np.tile(samples[:, 1], len(lon)))
    out = np.asarray(dist).reshape(len(lon), len(samples)).min(axis=1)
    if geometry.geom_type == "Polygon":
        out[shapely.contains_xy(geometry, lon, lat)] = 0.0
    return out


def _assert_exact(fence: shapely.Geometry, lon, lat, dist, d: float) -> None:
    near, far = dist <= d * (1 - EPS), dist >= d * (1 + EPS)
    assert near.any() and far.any()
    inside = shapely.contains_xy(fence, lon, lat)
    assert inside[near].all(), f"{(~inside[near]).sum()} points within {d} m are outside"
    assert not inside[far].any(), f"{inside[far].sum()} points beyond {d} m are inside"


@pytest.mark.parametrize("d", [5.0, 120.0, 2_500.0, 60_000.0, 1_500_000.0])
def test_circles_hold_every_point_within_the_distance_and_none_beyond(d):
    rng = np.random.default_rng(int(d))
    n = 25
    lon, lat = rng.uniform(-150, 150, n), rng.uniform(-60, 60, n)
    lat[:3] = [0.0, 55.0, -58.0]
    fences, problems = fence_geometries(np.arange(n), shapely.points(lon, lat),
                                        np.full(n, d))
    assert problems == [None] * n
    for k in range(n):
        # points at random azimuths and distances around d; their distance from the centre
        # measured again with Geod.inv, independently of how they were placed
        m = 400
        plon, plat, _ = GEOD.fwd(np.full(m, lon[k]), np.full(m, lat[k]),
                                 rng.uniform(0, 360, m), d * rng.uniform(0.99, 1.01, m))
        _, _, dist = GEOD.inv(np.full(m, lon[k]), np.full(m, lat[k]), plon, plat)
        _assert_exact(fences[k], plon, plat, np.asarray(dist), d)


@pytest.mark.parametrize("geometry,d", [
    (shapely.box(13.40, 52.50, 13.43, 52.52), 300.0),                       # a depot, Berlin
    (shapely.LineString([(-3.70, 40.40), (-3.66, 40.43), (-3.62, 40.42)]), 1_000.0),  # a road
    (shapely.Polygon([(151.0, -33.9), (151.05, -33.92), (151.02, -33.86)]), 5_000.0),
])
def test_buffers_hold_every_point_within_the_distance_and_none_beyond(geometry, d):
    fence = fence_geometry(7, geometry, d)
    rng = np.random.default_rng(3)
    minx, miny, maxx, maxy = geometry.bounds
    pad = 2 * d / 111_000 / np.cos(np.radians(miny))
    m = 250
    lon = rng.uniform(minx - pad, maxx + pad, m)
    lat = rng.uniform(miny - pad, maxy + pad, m)
    # and points close to the edge of the fence, where it matters
    blon, blat = shapely.get_coordinates(fence.exterior).T
    pick = rng.integers(0, len(blon), m)
    lon = np.concatenate([lon, blon[pick] + rng.normal(0, 2 * EPS * d / 111_000, m)])
    lat = np.concatenate([lat, blat[pick] + rng.normal(0, 2 * EPS * d / 111_000, m)])
    _assert_exact(fence, lon, lat, _true_distance(geometry, lon, lat), d)


def test_without_a_distance_the_fence_is_the_geometry_and_order_is_kept():
    geoms = np.array([shapely.box(0, 0, 1, 1), shapely.Point(2, 3),
                      shapely.LineString([(5, 5), (5.01, 5)]), shapely.Point(4, 4)], object)
    out, problems = fence_geometries(np.arange(4), geoms, np.array([np.nan, 100.0, 50.0,
                                                                     np.nan]))
    assert problems == [None] * 4
    assert out[0] is geoms[0] and out[3] is geoms[3]
    assert out[1].contains(geoms[1]) and out[2].contains(geoms[2])
    assert fence_geometry(1, geoms[0], None) is geoms[0]


@pytest.mark.parametrize("d", [0.0, -5.0, float("nan"), float("inf"), "5", True])
def test_a_distance_that_is_not_positive_and_finite_is_refused_by_name(d):
    with pytest.raises(FenceError, match=r"subscription 42: distance_m must be a finite number"):
        fence_geometry(42, shapely.Point(1, 2), d)
    if isinstance(d, float):
        out, problems = fence_geometries(np.array([42]), np.array([shapely.Point(1, 2)]),
                                         np.array([d]))
        if d != d:           # NaN in the columns means no distance
            assert problems == [None]
        else:
            assert out[0] is None and "subscription 42: distance_m" in problems[0]


@pytest.mark.parametrize("geometry,d,what", [
    (shapely.Point(10.0, 89.9), 50_000.0, "North Pole"),
    (shapely.Point(10.0, -89.0), 100_000.0, "South Pole"),
    (shapely.Point(179.99, 10.0), 5_000.0, "antimeridian"),
    (shapely.Point(-179.999, -20.0), 500.0, "antimeridian"),
    (shapely.box(179.9, 0.0, 179.95, 0.1), 10_000.0, "antimeridian"),
    (shapely.LineString([(0.0, 40.0), (12.0, 45.0)]), 100.0, "at most 400 km"),
])
def test_fences_near_a_pole_across_the_antimeridian_or_too_large_are_refused(geometry, d, what):
    with pytest.raises(FenceError, match=f"subscription 9: .*{what}"):
        fence_geometry(9, geometry, d)
    out, problems = fence_geometries(np.array([8, 9]), np.array([shapely.Point(0, 0), geometry]),
                                     np.array([10.0, d]))
    assert problems[0] is None and out[0] is not None
    assert out[1] is None and what in problems[1]


def test_close_to_but_not_across_the_antimeridian_or_a_pole_works():
    for geometry, d in [(shapely.Point(179.9, 0.0), 5_000.0), (shapely.Point(0.0, 88.0), 50_000.0),
                        (shapely.Point(-179.95, 10.0), 1_000.0)]:
        fence = fence_geometry(1, geometry, d)
        assert fence.is_valid and fence.contains(geometry)
