"""A synthetic country standing in for Great Britain: clustered population, nested postcode layers.

GeoPS used UK car accidents (points) and GB postcode polygons in three nested layers (≈120 areas,
≈3,000 districts, ≈11,000 sectors). Neither dataset is reachable here, so ``synthetic_world``
builds an equivalent with the same structure in a lon/lat box of roughly the UK's extent:

- an irregular, star-shaped outline (random harmonics on an ellipse);
- a population: Gaussian "cities" with Zipf-distributed sizes plus a uniform rural background,
  from which accident locations are drawn;
- sectors: the Voronoi cells of seeds drawn from the population (small in cities, large in the
  countryside, as postcode sectors are). A ring of "sea" seeds just outside the outline closes the
  diagram, so the land cells alone tile the country and the coastline is made of Voronoi edges:
  no clipping, hence the cells form an exact coverage;
- districts: sectors grouped by their nearest district seed (a random subset of the sector
  seeds, so no district is empty), merged with a coverage union; areas likewise from districts.
  Every sector therefore lies in exactly one district and every district in exactly one area,
  with shared boundaries that are bit-identical.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import shapely

LAYERS: tuple[str, ...] = ("area", "district", "sector")
DEFAULT_SIZES: dict[str, int] = {"area": 120, "district": 3_000, "sector": 11_000}

# The outline: an ellipse centred on the UK's middle, semi-axes in degrees, perturbed.
_CENTRE = (-3.0, 54.5)
_SEMI_AXES = (3.6, 4.3)
_OUTLINE_VERTICES = 512
_HARMONICS = range(2, 24)
_CITIES = 60
_RURAL_SHARE = 0.15
_SEED_GRID = 1e-4  # sector seeds are snapped to ~10 m and de-duplicated

Log = Callable[[str], None]


class Population:
    """Where accidents happen: a mixture of Gaussian cities and a rural background, on land."""

    def __init__(self, land: shapely.Geometry, centres: np.ndarray, weights: np.ndarray,
                 sigmas: np.ndarray, rural_share: float):
        self.land = land
        shapely.prepare(land)
        self.centres = centres
        self.sigmas = sigmas
        self.probs = np.r_[(1 - rural_share) * weights / weights.sum(), rural_share]

    def sample(self, rng: np.random.Generator, m: int) -> np.ndarray:
        """``m`` locations as an (m, 2) lon/lat array, rejection-sampled to lie on land."""
        out = np.empty((0, 2))
        while len(out) < m:
            want = 2 * (m - len(out)) + 16
            comp = rng.choice(len(self.probs), size=want, p=self.probs)
            city = comp < len(self.centres)
            pts = np.empty((want, 2))
            pts[~city] = _uniform_in(rng, self.land, int((~city).sum()))
            pts[city] = (self.centres[comp[city]]
                         + rng.normal(size=(int(city.sum()), 2)) * self.sigmas[comp[city], None])
            pts = pts[shapely.contains_xy(self.land, pts[:, 0], pts[:, 1])]
            out = np.concatenate([out, pts])
        return out[:m]


@dataclass
class World:
    """Polygon layers (``area``/``district``/``sector`` → geometries) and a population.

    ``parent`` maps a layer to the index of each cell's enclosing cell in the next coarser layer
    (sector → district, district → area) when the layers are known to nest (synthetic worlds).
    """

    layers: dict[str, np.ndarray]
    population: Population | PointPool
    parent: dict[str, np.ndarray] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)


class PointPool:
    """Accident locations given as data (e.g. a CSV file): drawn uniformly with replacement."""

    def __init__(self, points: np.ndarray):
        if len(points) == 0:
            raise ValueError("no accident locations to draw from")
        self.points = np.asarray(points, dtype=float).reshape(-1, 2)

    def sample(self, rng: np.random.Generator, m: int) -> np.ndarray:
        return self.points[rng.integers(0, len(self.points), size=m)]


def _uniform_in(rng: np.random.Generator, region: shapely.Geometry, m: int) -> np.ndarray:
    """``m`` points uniform in a (prepared) polygon, by rejection from its bounding box."""
    xmin, ymin, xmax, ymax = region.bounds
    fill = region.area / ((xmax - xmin) * (ymax - ymin))
    out = np.empty((0, 2))
    while len(out) < m:
        want = int((m - len(out)) / fill * 1.2) + 16
        pts = np.c_[rng.uniform(xmin, xmax, want), rng.uniform(ymin, ymax, want)]
        out = np.concatenate([out, pts[shapely.contains_xy(region, pts[:, 0], pts[:, 1])]])
    return out[:m]


def _outline(rng: np.random.Generator) -> shapely.Polygon:
    """A star-shaped (hence simple) irregular outline around the UK's centre."""
    theta = np.linspace(0.0, 2 * np.pi, _OUTLINE_VERTICES, endpoint=False)
    radius = np.ones_like(theta)
    for k in _HARMONICS:
        radius += rng.normal(0.0, 0.22 / k) * np.cos(k * theta + rng.uniform(0, 2 * np.pi))
    radius = np.clip(radius, 0.35, None)
    x = _CENTRE[0] + _SEMI_AXES[0] * radius * np.cos(theta)
    y = _CENTRE[1] + _SEMI_AXES[1] * radius * np.sin(theta)
    return shapely.Polygon(np.c_[x, y])


def _distinct_seeds(rng: np.random.Generator, population: Population, n: int) -> np.ndarray:
    """``n`` distinct population-distributed seeds snapped to a ~10 m grid, in draw order."""
    seeds = np.empty((0, 2))
    while len(seeds) < n:
        fresh = np.round(population.sample(rng, n - len(seeds) + 16) / _SEED_GRID) * _SEED_GRID
        both = np.concatenate([seeds, fresh])
        _, first = np.unique(both, axis=0, return_index=True)
        seeds = both[np.sort(first)]
    return seeds[:n]


def _nearest(targets: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """Index into ``targets`` of the nearest target point of each query point."""
    tree = shapely.STRtree(shapely.points(targets))
    src, dst = tree.query_nearest(shapely.points(queries), all_matches=False)
    out = np.empty(len(queries), dtype=np.int64)
    out[src] = dst
    return out


def group_union(polygons: np.ndarray, group: np.ndarray, groups: int) -> np.ndarray:
    """Coverage union of ``polygons`` per group id (0..groups-1), in one vectorised call.

    The polygons are laid out in a (groups × largest group) array padded with None, which
    ``coverage_union_all`` reduces along its rows.
    """
    order = np.argsort(group, kind="stable")
    g = group[order]
    counts = np.bincount(g, minlength=groups)
    starts = np.r_[0, np.cumsum(counts)[:-1]]
    table = np.full((groups, int(counts.max())), None, dtype=object)
    table[g, np.arange(len(g)) - starts[g]] = polygons[order]
    return shapely.coverage_union_all(table, axis=1)


def synthetic_world(seed: int = 0, areas: int = DEFAULT_SIZES["area"],
                    districts: int = DEFAULT_SIZES["district"],
                    sectors: int = DEFAULT_SIZES["sector"], log: Log | None = None) -> World:
    """A deterministic synthetic country with ``areas`` ⊇ ``districts`` ⊇ ``sectors`` cells."""
    if not 1 <= areas <= districts <= sectors:
        raise ValueError(f"need 1 <= areas <= districts <= sectors, got {areas}, {districts}, "
                         f"{sectors}")
    if log:
        log(f"building a synthetic country: {areas:,} areas, {districts:,} districts, "
            f"{sectors:,} sectors")
    rng = np.random.default_rng([seed, 0])
    outline = _outline(rng)
    shapely.prepare(outline)
    centres = _uniform_in(rng, outline, _CITIES)
    weights = 1.0 / np.arange(1, _CITIES + 1) ** 1.1
    sigmas = 0.04 + 0.25 * np.sqrt(weights / weights[0])
    on_outline = Population(outline, centres, weights, sigmas, _RURAL_SHARE)
    seeds = _distinct_seeds(rng, on_outline, sectors)

    # Sea seeds on a ring just outside the outline close every land cell; four far corners
    # keep the ring itself off the convex hull.
    spacing = 1.2 * np.sqrt(outline.area / sectors)
    ring = shapely.segmentize(shapely.buffer(outline, 0.75 * spacing, quad_segs=4).exterior,
                              spacing)
    sea = shapely.get_coordinates(ring)[:-1]
    (cx, cy), reach = _CENTRE, 10 * max(_SEMI_AXES)
    corners = np.array([[cx - reach, cy - reach], [cx + reach, cy - reach],
                        [cx + reach, cy + reach], [cx - reach, cy + reach]])
    cells = shapely.get_parts(shapely.voronoi_polygons(
        shapely.multipoints(np.concatenate([seeds, sea, corners])), ordered=True))
    sector_cells = cells[:sectors]

    district_of = _nearest(seeds[:districts], seeds)
    area_of = _nearest(seeds[:areas], seeds[:districts])
    district_cells = group_union(sector_cells, district_of, districts)
    area_cells = group_union(district_cells, area_of, areas)

    land = shapely.coverage_union_all(area_cells)
    population = Population(land, centres, weights, sigmas, _RURAL_SHARE)
    return World(
        layers={"area": area_cells, "district": district_cells, "sector": sector_cells},
        population=population,
        parent={"sector": district_of, "district": area_of},
        sources={name: "synthetic" for name in ("points", *LAYERS)},
    )
