"""Seeded generators of awkward geometry cases for the matching tests (fixture ``cases``).

Coordinates sit on a coarse lattice (multiples of 1/4), so shared edges, shared vertices,
equal geometries and points on boundaries happen often; partitioner splits land on the same
lattice often enough that geometries lie exactly on cell borders, and ``aligned_to_cells`` adds
publications built from the actual cell edges.
"""

from __future__ import annotations

import sys
from types import ModuleType

import numpy as np
import pytest
import shapely

from geops.model import Relation, Subscriptions

STEP = 0.25
SPAN = 16.0


def _lattice(rng: np.random.Generator, size, lo: float = 0.0, hi: float = SPAN) -> np.ndarray:
    return rng.integers(round(lo / STEP), round(hi / STEP) + 1, size) * STEP


def _box(rng: np.random.Generator) -> shapely.Geometry:
    x0, y0 = _lattice(rng, 2, 0, SPAN - 1)
    w, h = rng.integers(1, 24, 2) * STEP
    return shapely.box(x0, y0, x0 + w, y0 + h)


def lattice_geoms(rng: np.random.Generator, n: int) -> np.ndarray:
    """n valid geometries of mixed types on the lattice (some in general position)."""
    out: list[shapely.Geometry] = []
    while len(out) < n:
        kind = rng.integers(0, 8)
        if kind == 0:
            g = shapely.Point(*_lattice(rng, 2))
        elif kind == 1:
            g = _box(rng)
        elif kind == 2:
            g = shapely.Polygon(_lattice(rng, (3, 2)))
        elif kind == 3:
            g = shapely.LineString(_lattice(rng, (int(rng.integers(2, 4)), 2)))
        elif kind == 4:
            a = _box(rng)
            x1 = a.bounds[2] + STEP * rng.integers(0, 4)  # the second part may touch the first
            b = shapely.box(x1, a.bounds[1], x1 + STEP * rng.integers(1, 12),
                            a.bounds[3] + STEP * rng.integers(0, 6))
            g = shapely.MultiPolygon([a, b])
        elif kind == 5:
            g = shapely.Point(*rng.uniform(0, SPAN, 2)).buffer(rng.uniform(0.2, 3), 3)
        elif kind == 6:
            g = shapely.MultiPoint(_lattice(rng, (int(rng.integers(2, 4)), 2)))
        else:
            g = shapely.MultiLineString([_lattice(rng, (2, 2)), _lattice(rng, (2, 2))])
        if not g.is_empty and g.is_valid:
            out.append(g)
    return np.array(out, dtype=object)


def boundary_points(rng: np.random.Generator, geoms: np.ndarray, n: int) -> np.ndarray:
    """Points on the given geometries: vertices and (for lattice edges) edge midpoints."""
    coords = shapely.get_coordinates(shapely.boundary(geoms[shapely.get_dimensions(geoms) == 2]))
    pick = coords[rng.integers(0, len(coords), n)]
    half = n // 2
    mid = (pick[:half] + coords[rng.integers(0, len(coords), half)]) / 2
    return shapely.points(np.concatenate([pick[half:], mid]))


def variants(rng: np.random.Generator, geoms: np.ndarray, n: int) -> np.ndarray:
    """Copies of some geometries: identical ones and equal-but-reordered (reversed) ones."""
    pick = geoms[rng.integers(0, len(geoms), n)]
    copies = shapely.from_wkb(shapely.to_wkb(pick))
    return np.where(rng.random(n) < 0.5, copies, shapely.reverse(copies))


def aligned_to_cells(rng: np.random.Generator, cells: np.ndarray, n: int) -> np.ndarray:
    """Geometries whose coordinates are cell edges: corner points, edge boxes, edge lines."""
    xs = np.unique(np.concatenate([cells[:, 0], cells[:, 2], [0.0, SPAN / 2]]))
    ys = np.unique(np.concatenate([cells[:, 1], cells[:, 3], [0.0, SPAN / 2]]))
    xs, ys = xs[np.isfinite(xs)], ys[np.isfinite(ys)]
    out = []
    for _ in range(n):
        kind = rng.integers(0, 4)
        x0, x1 = np.sort(rng.choice(xs, 2))
        y0, y1 = np.sort(rng.choice(ys, 2))
        if kind == 0:
            out.append(shapely.Point(x0, y0))
        elif kind == 1 and x0 < x1 and y0 < y1:
            out.append(shapely.box(x0, y0, x1, y1))
        elif kind == 2:
            out.append(shapely.Point(x0, _lattice(rng, 1)[0]))
        elif x0 < x1 or y0 < y1:
            out.append(shapely.LineString([(x0, y0), (x1, y1)]))
    return np.array(out, dtype=object)


def far_away() -> np.ndarray:
    """Publications outside every subscription and every finite cell."""
    return np.array([shapely.Point(1e6, -1e6), shapely.box(-5e5, -5e5, -4e5, -4e5),
                     shapely.LineString([(1e5, 1e5), (2e5, 3e5)])], dtype=object)


def subscriptions(seed: int, n: int = 120) -> Subscriptions:
    """Lattice subscriptions with relations uniform over all ten (DISJOINT included)."""
    rng = np.random.default_rng([seed, 11])
    geoms = lattice_geoms(rng, n)
    ids = rng.permutation(10 * n)[:n] - 3 * n  # unique, unordered, some negative
    return Subscriptions(ids, geoms, rng.integers(0, len(Relation), n))


def publications(seed: int, subs: Subscriptions, cells: np.ndarray | None, n: int = 200
                 ) -> tuple[np.ndarray, np.ndarray]:
    """(keys, geometries): lattice shapes, copies of subscriptions, boundary points, shapes on
    the cell edges and far-away ones; keys unique and unordered."""
    rng = np.random.default_rng([seed, 22])
    parts = [lattice_geoms(rng, n), variants(rng, subs.geoms, n // 4),
             boundary_points(rng, subs.geoms, n // 4), far_away()]
    if cells is not None:
        parts.append(aligned_to_cells(rng, cells, n // 4))
    geoms = np.concatenate(parts)
    keys = rng.permutation(20 * len(geoms))[: len(geoms)].astype(np.int64) - 7 * len(geoms)
    return keys, geoms


@pytest.fixture(scope="session")
def cases() -> ModuleType:
    """These generators: tests call ``cases.subscriptions(seed)`` and so on."""
    return sys.modules[__name__]
