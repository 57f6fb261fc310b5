"""The synthetic country: exact counts, valid geometries, layers that really nest, determinism."""

from __future__ import annotations

import numpy as np
import pytest
import shapely

from geops.model import geometry_problems
from geops.workload import LAYERS, synthetic_world
from geops.workload.generate import locate
from geops.workload.world import DEFAULT_SIZES, group_union

SIZES = (12, 150, 600)


@pytest.fixture(scope="module")
def world():
    return synthetic_world(3, *SIZES)


def test_layers_have_the_requested_number_of_cells(world):
    assert [len(world.layers[layer]) for layer in LAYERS] == list(SIZES)


def test_every_cell_is_a_usable_geometry(world):
    for layer in LAYERS:
        assert geometry_problems(world.layers[layer]) == [None] * len(world.layers[layer])
        assert set(shapely.get_type_id(world.layers[layer])) <= {3, 6}  # (Multi)Polygon


@pytest.mark.parametrize("fine,coarse", [("sector", "district"), ("district", "area")])
def test_each_cell_lies_within_exactly_one_cell_of_the_coarser_layer(world, fine, coarse):
    tree = shapely.STRtree(world.layers[coarse])
    src, dst = tree.query(world.layers[fine], predicate="within")
    assert np.array_equal(src, np.arange(len(world.layers[fine])))
    assert np.array_equal(dst, world.parent[fine])
    # ... and every coarse cell is exactly the union of its finer cells.
    rebuilt = group_union(world.layers[fine], world.parent[fine], len(world.layers[coarse]))
    assert shapely.equals(rebuilt, world.layers[coarse]).all()


def test_layers_tile_the_same_country_without_overlap(world):
    country = shapely.coverage_union_all(world.layers["area"])
    for layer in LAYERS:
        cells = world.layers[layer]
        assert shapely.coverage_is_valid(cells)
        assert shapely.area(cells).sum() == pytest.approx(country.area, rel=1e-9)


def test_population_lies_on_land_and_is_clustered(world):
    pts = world.population.sample(np.random.default_rng(0), 20_000)
    sector = locate(world, pts)["sector"]
    assert (sector >= 0).all()
    # Clustered: the densest tenth of the land holds far more than a tenth of the accidents.
    cells = world.layers["sector"]
    area = shapely.area(cells)
    density = np.bincount(sector, minlength=len(cells)) / area
    order = np.argsort(density)[::-1]
    densest = order[np.cumsum(area[order]) <= 0.1 * area.sum()]
    assert np.isin(sector, densest).mean() > 0.4


def test_sectors_are_small_where_people_are(world):
    # Like postcode sectors, cells hold comparable numbers of people whatever their size:
    # accident counts per sector vary far less than sector areas do.
    pts = world.population.sample(np.random.default_rng(1), 60_000)
    counts = np.bincount(locate(world, pts)["sector"], minlength=len(world.layers["sector"]))
    area = shapely.area(world.layers["sector"])

    def spread(x):
        return np.quantile(x, 0.9) / np.quantile(x, 0.1)

    assert spread(area) > 5 * spread(counts)


def test_same_seed_same_world_other_seed_other_world():
    a, b, c = (synthetic_world(s, 5, 40, 120) for s in (7, 7, 8))
    for layer in LAYERS:
        assert list(shapely.to_wkb(a.layers[layer])) == list(shapely.to_wkb(b.layers[layer]))
    assert list(shapely.to_wkb(a.layers["sector"])) != list(shapely.to_wkb(c.layers["sector"]))
    rng = np.random.default_rng
    assert np.array_equal(a.population.sample(rng(0), 50), b.population.sample(rng(0), 50))


def test_the_world_lies_in_a_uk_like_box():
    w = synthetic_world(0, 3, 10, 40)
    xmin, ymin, xmax, ymax = shapely.total_bounds(w.layers["area"])
    assert -12 < xmin < xmax < 6 and 48 < ymin < ymax < 62


def test_default_sizes_match_gb_postcodes():
    assert DEFAULT_SIZES == {"area": 120, "district": 3_000, "sector": 11_000}


@pytest.mark.parametrize("sizes", [(0, 10, 20), (10, 5, 20), (3, 10, 5)])
def test_sizes_must_nest(sizes):
    with pytest.raises(ValueError, match="areas <= districts <= sectors"):
        synthetic_world(0, *sizes)
