"""Moving objects for the workload: tracks of positions, and fences that detect them.

``tracks``: N objects, each starting at a location of the (possibly skewed) stream and moving
at its own speed (walking to motorway: ``SPEED_M_S``) with a heading that wanders
(``TURN_SD_DEG`` a step), one position per step; a step lasts the time between two positions of
the object (N publications of ``interval_ms``), so the distance travelled is the speed times
that. A step that would leave the world's extent turns the object around instead. Distances
are measured on the ellipsoid (``Geod.fwd``), all objects in one call per step.

``fences``: a share ``FENCE_SHARE`` of the subscriptions detect: mostly enter and exit, some
only one of them, some inside too (``DETECT_MIX``), and one in ``CROSS_EVERY`` cross too;
``outside`` is left out, since it reports every position outside a fence and would drown the
other events. Cross stays a small share because the events query keeps the shape of every
fence that asks for it in each bucket's state. A third of the fences are
points with a distance (a depot: 100 m to 2 km around a point of the polygon), a sixth
polygons with a distance (50 to 500 m around it), the rest the polygons themselves; a
distance fence ``geops.fences`` would refuse keeps its plain polygon instead.

``roams``: when asked, a share of the plain subscriptions (none of the fences above) become
roaming fences (``geops.roam``) too: a distance of ``ROAM_M`` metres and a glob of
``ROAM_GLOBS`` (every object, about a tenth of them, or a handful), so that pairs of the
generated objects (``object-K``) meet and part.
"""

from __future__ import annotations

import numpy as np
import shapely

from geops.fences import GEOD, fence_geometries
from geops.model import ROAMING_KINDS, DetectKind

SPEED_M_S = (1.5, 30.0)
TURN_SD_DEG = 20.0
FENCE_SHARE = 0.2
_E, _X, _I = int(DetectKind.ENTER), int(DetectKind.EXIT), int(DetectKind.INSIDE)
DETECT_MIX: tuple[tuple[int, float], ...] = ((_E | _X, 0.6), (_E, 0.15), (_X, 0.1),
                                             (_E | _X | _I, 0.15))
CROSS_EVERY = 50
POINT_FENCE_M = (100.0, 2_000.0)
POLYGON_FENCE_M = (50.0, 500.0)
ROAM_M = (100.0, 2_000.0)
ROAM_GLOBS = ("object-*", "object-1*", "object-2?")


def object_names(objects: int, publications: int) -> np.ndarray:
    """The object id of every publication: publication i is a position of object i mod N."""
    names = np.array([f"object-{k}" for k in range(objects)], dtype=object)
    return names[np.arange(publications) % objects]


def tracks(rng: np.random.Generator, starts: np.ndarray, publications: int,
           interval_ms: int, bounds: tuple[float, float, float, float]) -> np.ndarray:
    """The (publications, 2) lon/lat positions of N = len(starts) objects: publication i is
    step i // N of object i mod N, so each object's positions are N publications apart."""
    n = len(starts)
    steps = -(-publications // n)
    step_s = n * interval_ms / 1000.0
    speed = rng.uniform(*SPEED_M_S, n)
    heading = rng.uniform(0.0, 360.0, n)
    lon, lat = starts[:, 0].astype(float).copy(), starts[:, 1].astype(float).copy()
    out = np.empty((steps, n, 2))
    out[0, :, 0], out[0, :, 1] = lon, lat
    x0, y0, x1, y1 = bounds
    for s in range(1, steps):
        heading = heading + rng.normal(0.0, TURN_SD_DEG, n)
        nlon, nlat, _ = GEOD.fwd(lon, lat, heading, speed * step_s)
        nlon, nlat = np.asarray(nlon), np.asarray(nlat)
        outside = (nlon < x0) | (nlon > x1) | (nlat < y0) | (nlat > y1)
        heading = np.where(outside, heading + 180.0, heading)
        lon, lat = np.where(outside, lon, nlon), np.where(outside, lat, nlat)
        out[s, :, 0], out[s, :, 1] = lon, lat
    return out.reshape(-1, 2)[:publications]


def fences(rng: np.random.Generator, geoms: np.ndarray
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(geometries, detect bit masks, distances in metres with NaN for none) of subscriptions
    whose geometries are ``geoms``: ``FENCE_SHARE`` of them made fences (module docstring)."""
    n = len(geoms)
    geoms = np.asarray(geoms, dtype=object).copy()
    detect = np.zeros(n, np.uint8)
    distance = np.full(n, np.nan)
    rows = rng.permutation(n)[:round(FENCE_SHARE * n)]
    masks, weights = zip(*DETECT_MIX, strict=True)
    detect[rows] = rng.choice(np.array(masks, np.uint8), len(rows), p=np.array(weights))
    detect[rows[::CROSS_EVERY]] |= int(DetectKind.CROSS)  # a random 50th: rows are shuffled
    points, polygons = rows[: len(rows) // 3], rows[len(rows) // 3: len(rows) // 2]
    original = geoms[points]
    geoms[points] = shapely.point_on_surface(original)
    distance[points] = rng.uniform(*POINT_FENCE_M, len(points))
    distance[polygons] = rng.uniform(*POLYGON_FENCE_M, len(polygons))
    # a distance fence geops.fences refuses (real data near a pole or the antimeridian, a
    # polygon larger than it takes) stays its plain geometry, so every reader takes the file
    fenced = np.concatenate([points, polygons])
    _, problems = fence_geometries(fenced, geoms[fenced], distance[fenced])
    for k in [k for k, problem in enumerate(problems) if problem]:
        row = fenced[k]
        distance[row] = np.nan
        if k < len(points):
            geoms[row] = original[k]
    return geoms, detect, distance


def roams(rng: np.random.Generator, detect: np.ndarray, share: float
          ) -> tuple[np.ndarray, list[tuple[float, str] | None]]:
    """(detect masks with the roaming kinds added, each subscription's roam or None): a
    ``share`` of all subscriptions, drawn among the plain ones (``detect`` 0), become roaming
    fences of a distance in ``ROAM_M`` (to the decimetre) and a glob of ``ROAM_GLOBS``."""
    detect = np.asarray(detect, np.uint8).copy()
    out: list[tuple[float, str] | None] = [None] * len(detect)
    plain = np.flatnonzero(detect == 0)
    rows = rng.permutation(plain)[:min(len(plain), round(share * len(detect)))]
    distances = np.round(rng.uniform(*ROAM_M, len(rows)), 1)
    globs = rng.integers(0, len(ROAM_GLOBS), len(rows))
    for row, d, g in zip(rows.tolist(), distances.tolist(), globs.tolist(), strict=True):
        out[row] = (d, ROAM_GLOBS[g])
    detect[rows] |= ROAMING_KINDS
    return detect, out
