"""Distance fences: the region within ``distance_m`` metres of a subscription's geometry.

A subscription with ``distance_m`` reaches every point whose distance to its geometry,
measured on the WGS84 ellipsoid (geodesics, ``pyproj.Geod``), is at most that many metres; a
degree of longitude is not a degree of latitude, so buffering in degrees would be wrong
everywhere but at the equator. The result is a shapely polygon in lon/lat, so a fence is
tested like any other geometry ("the fence intersects the publication").

- **A point** becomes a circle: ``CIRCLE_VERTICES`` vertices from ``Geod.fwd`` at evenly spaced
  azimuths, placed at ``distance_m / cos(pi / CIRCLE_VERTICES)`` so that the polygon
  *circumscribes* the circle: every point within the distance is inside, and the polygon
  reaches at most 0.03 % beyond it (the tests check 0.1 %).
- **Any other geometry** is buffered in a local azimuthal equidistant projection centred on
  its envelope, done with geodesics (a point's projected coordinates are its geodesic distance
  and azimuth from the centre), and brought back the same way; edges are cut to at most
  ``SEGMENT_M`` before either step, so straight edges stay straight in lon/lat. The projection
  keeps distances exact along lines through the centre and stretches others by at most
  ``1 + (r / R)² / 6`` at ``r`` from the centre (R the Earth's radius): below 0.07 % within
  ``MAX_REACH_M`` (400 km), which bounds such a fence. The buffer's arcs have 32 segments a
  quarter circle (inscribed: at most 0.03 % inside the true distance).

Refused, with a message naming the subscription (no fence is better than a wrong one):
a distance that is not a finite number above zero; a fence whose centre is closer to a pole
than twice its reach (``POLE_MARGIN``: nearer, meridians converge so fast that straight
lon/lat edges miss the circle by more than 0.1 %, and a fence around a pole cannot be a
lon/lat polygon at all); a fence that would cross the antimeridian (it would have to be cut
in two); a non-point geometry whose fence reaches farther than ``MAX_REACH_M`` from its
centre. Fences are for the scale of depots, cities and regions; a point's circle may be of
any size short of those limits.
"""

from __future__ import annotations

import math

import numpy as np
import shapely
from pyproj import Geod

from geops.errors import FenceError
from geops.model import DetectKind

GEOD = Geod(ellps="WGS84")
CIRCLE_VERTICES = 128
SEGMENT_M = 500.0          # the longest edge projected or brought back
QUAD_SEGS = 32             # buffer arcs: segments per quarter circle
MAX_REACH_M = 400_000.0    # a non-point fence: farthest from its centre (projection error)
POLE_MARGIN = 2.0          # a fence's centre at least this many times its reach from a pole
_DEG_M = 111_000.0         # metres per degree of latitude, roughly (for cutting edges only)


def distance_problem(subscription_id: int, distance_m: object) -> str | None:
    """Why ``distance_m`` is no distance for a fence, or None (a finite number above 0)."""
    if (isinstance(distance_m, bool) or not isinstance(distance_m, int | float | np.floating
                                                       | np.integer)
            or not math.isfinite(distance_m) or distance_m <= 0):
        return (f"subscription {subscription_id}: distance_m must be a finite number of "
                f"metres above zero, got {distance_m!r}")
    return None


def fence_geometry(subscription_id: int, geometry: shapely.Geometry,
                   distance_m: float | None) -> shapely.Geometry:
    """The fence of one subscription (its geometry when ``distance_m`` is None); FenceError
    naming the subscription when it cannot be made."""
    if distance_m is None:
        return geometry
    problem = distance_problem(subscription_id, distance_m)
    if problem:
        raise FenceError(problem)
    out, problems = fence_geometries(np.array([subscription_id]),
                                     np.array([geometry], dtype=object),
                                     np.array([distance_m], float))
    if problems[0]:
        raise FenceError(problems[0])
    return out[0]


def fence_geometries(ids: np.ndarray, geometries: np.ndarray, distances_m: np.ndarray
                     ) -> tuple[np.ndarray, list[str | None]]:
    """The fences of many subscriptions at once: (geometries, problem of each or None).

    ``distances_m`` NaN: no distance, the fence is the geometry itself. A refused fence is
    None in the result, with its problem naming the subscription id.
    """
    ids = np.asarray(ids, np.int64)
    geometries = np.asarray(geometries, dtype=object)
    distances = np.asarray(distances_m, float)
    out = geometries.copy()
    problems: list[str | None] = [None] * len(ids)
    given = ~np.isnan(distances)
    for i in np.flatnonzero(given & ~(np.isfinite(distances) & (distances > 0))).tolist():
        problems[i] = distance_problem(int(ids[i]), float(distances[i]))
    usable = given & np.isfinite(distances) & (distances > 0)
    points = usable & (shapely.get_type_id(geometries) == 0)
    others = usable & ~points
    if points.any():
        _circles(ids, geometries, distances, np.flatnonzero(points), out, problems)
    if others.any():
        _buffers(ids, geometries, distances, np.flatnonzero(others), out, problems)
    for i, problem in enumerate(problems):
        if problem:
            out[i] = None
    return out, problems


def fence_problems(ids: np.ndarray, geometries: np.ndarray, detect: np.ndarray,
                   distances_m: np.ndarray, has_distance: np.ndarray | None = None
                   ) -> list[str | None]:
    """Why each subscription's detect kinds and distance make no fence, or None where they
    do (or where there is no distance): ``fence_shapes``'s problems."""
    return fence_shapes(ids, geometries, detect, distances_m, has_distance)[1]


def fence_shapes(ids: np.ndarray, geometries: np.ndarray, detect: np.ndarray,
                 distances_m: np.ndarray, has_distance: np.ndarray | None = None
                 ) -> tuple[np.ndarray, list[str | None]]:
    """The shape each subscription is matched with (its fence where it has detect kinds and a
    distance, else its geometry; None where refused), and why each one's detect kinds and
    distance make no fence, or None where they do (or where there is no distance): a distance
    given as NaN or not above zero, a distance without fixed detect kinds (a distance makes a
    fence, plain subscriptions and roaming fences use the geometry itself), or a fence
    ``fence_geometries`` refuses.
    ``has_distance`` tells a null distance from a NaN one (a record may carry either); without
    it NaN means none. Each problem names the subscription.
    """
    ids = np.asarray(ids, np.int64)
    detect = DetectKind.fixed(np.asarray(detect))
    distances = np.asarray(distances_m, float)
    shapes = np.asarray(geometries, object).copy()
    given = ~np.isnan(distances) if has_distance is None else np.asarray(has_distance, bool)
    problems: list[str | None] = [None] * len(ids)
    for i in np.flatnonzero(given & np.isnan(distances)).tolist():
        problems[i] = distance_problem(int(ids[i]), math.nan)
    numbers = given & ~np.isnan(distances)
    for i in np.flatnonzero(numbers & (detect == 0)).tolist():
        problems[i] = (f"subscription {ids[i]}: distance_m ({distances[i]:g}) needs detect "
                       f"kinds: a distance makes a fence for geofence events, plain "
                       f"matching uses the geometry itself")
    fenced = np.flatnonzero(numbers & (detect != 0))
    if len(fenced):
        shapes[fenced], found = fence_geometries(ids[fenced], shapes[fenced], distances[fenced])
        for i, problem in zip(fenced.tolist(), found, strict=True):
            problems[i] = problem
    for i, problem in enumerate(problems):
        if problem:
            shapes[i] = None
    return shapes, problems


def _pole_problems(ids: np.ndarray, lon: np.ndarray, lat: np.ndarray, reach: np.ndarray,
                   rows: np.ndarray, problems: list[str | None]) -> None:
    """Refuse the fences ``rows`` centred at (lon, lat) that reach ``reach`` metres: a pole
    closer than ``POLE_MARGIN`` times that."""
    for pole, name in ((90.0, "North"), (-90.0, "South")):
        _, _, to_pole = GEOD.inv(lon, lat, lon, np.full(len(lon), pole))
        to_pole = np.asarray(to_pole)
        for k in np.flatnonzero(to_pole < POLE_MARGIN * reach).tolist():
            i = int(rows[k])
            problems[i] = problems[i] or (
                f"subscription {ids[i]}: its distance fence reaches {reach[k]:,.0f} m from a "
                f"centre {to_pole[k]:,.0f} m from the {name} Pole; fences closer to a pole "
                f"than twice their reach are not supported")


def _antimeridian_problem(subscription_id: int) -> str:
    return (f"subscription {subscription_id}: its distance fence would cross the antimeridian "
            f"(longitude ±180); fences there are not supported")


def _circles(ids: np.ndarray, geometries: np.ndarray, distances: np.ndarray, rows: np.ndarray,
             out: np.ndarray, problems: list[str | None]) -> None:
    """Circumscribed circles of the point fences ``rows``, all in one ``Geod.fwd``."""
    lon, lat = shapely.get_x(geometries[rows]), shapely.get_y(geometries[rows])
    reach = distances[rows] / math.cos(math.pi / CIRCLE_VERTICES)
    _pole_problems(ids, lon, lat, reach, rows, problems)
    k = CIRCLE_VERTICES
    azimuths = np.tile(np.arange(k) * (360.0 / k), len(rows))
    vlon, vlat, _ = GEOD.fwd(np.repeat(lon, k), np.repeat(lat, k), azimuths,
                             np.repeat(reach, k))
    vlon = np.asarray(vlon).reshape(-1, k)
    vlat = np.asarray(vlat).reshape(-1, k)
    # Geod.fwd wraps longitudes into [-180, 180]: a circle across the antimeridian comes back
    # in two pieces far apart
    unwrapped = lon[:, None] + (vlon - lon[:, None] + 180.0) % 360.0 - 180.0
    crossing = (np.abs(unwrapped) > 180.0).any(axis=1)
    ring = np.stack([vlon, vlat], axis=-1)
    ring = np.concatenate([ring, ring[:, :1]], axis=1)
    polygons = shapely.polygons(ring)
    for j, i in enumerate(rows.tolist()):
        if crossing[j]:
            problems[i] = problems[i] or _antimeridian_problem(int(ids[i]))
        out[i] = polygons[j]


def _buffers(ids: np.ndarray, geometries: np.ndarray, distances: np.ndarray, rows: np.ndarray,
             out: np.ndarray, problems: list[str | None]) -> None:
    """Buffers of the non-point fences ``rows`` in local azimuthal equidistant projections,
    every fence's coordinates projected and brought back in one geodesic call each way."""
    geoms = shapely.segmentize(geometries[rows], SEGMENT_M / _DEG_M / 2)
    bounds = shapely.bounds(geoms)
    lon0, lat0 = (bounds[:, 0] + bounds[:, 2]) / 2, (bounds[:, 1] + bounds[:, 3]) / 2
    coords, owner = shapely.get_coordinates(geoms, return_index=True)
    az, _, dist = GEOD.inv(lon0[owner], lat0[owner], coords[:, 0], coords[:, 1])
    az, dist = np.radians(np.asarray(az)), np.asarray(dist)
    spread = np.zeros(len(rows))
    np.maximum.at(spread, owner, dist)
    reach = spread + distances[rows]
    _pole_problems(ids, lon0, lat0, reach, rows, problems)
    for k in np.flatnonzero(reach > MAX_REACH_M).tolist():
        i = int(rows[k])
        problems[i] = problems[i] or (
            f"subscription {ids[i]}: its distance fence reaches {reach[k] / 1000:,.0f} km from "
            f"its centre; at most {MAX_REACH_M / 1000:,.0f} km is supported (split the "
            f"geometry)")
    planar = shapely.set_coordinates(geoms.copy(), np.column_stack([dist * np.sin(az),
                                                                    dist * np.cos(az)]))
    buffered = shapely.segmentize(
        shapely.buffer(planar, distances[rows], quad_segs=QUAD_SEGS), SEGMENT_M)
    coords, owner = shapely.get_coordinates(buffered, return_index=True)
    rho = np.hypot(coords[:, 0], coords[:, 1])
    azimuth = np.degrees(np.arctan2(coords[:, 0], coords[:, 1]))
    vlon, vlat, _ = GEOD.fwd(lon0[owner], lat0[owner], azimuth, rho)
    vlon = np.asarray(vlon)
    unwrapped = lon0[owner] + (vlon - lon0[owner] + 180.0) % 360.0 - 180.0
    crossing = np.zeros(len(rows), bool)
    crossing[owner[np.abs(unwrapped) > 180.0]] = True
    back = shapely.set_coordinates(buffered, np.column_stack([vlon, np.asarray(vlat)]))
    for j, i in enumerate(rows.tolist()):
        if crossing[j]:
            problems[i] = problems[i] or _antimeridian_problem(int(ids[i]))
        out[i] = back[j]
