"""The GeoPS mix: subscription and publication layer shares, relations, ids, times, determinism."""

from __future__ import annotations

import numpy as np
import pytest
import shapely

from geops.errors import ParameterError
from geops.model import MIXED_RELATIONS, Relation, geometry_problems
from geops.workload import LAYERS, SkewSpec, generate_workload, synthetic_world
from geops.workload.generate import locate, split_counts


@pytest.fixture(scope="module")
def world():
    return synthetic_world(5, 10, 100, 400)


@pytest.fixture(scope="module")
def workload(world):
    return generate_workload(seed=5, subscriptions=4_000, publications=6_000, world=world)


def test_subscription_layer_shares_are_20_30_50(workload):
    labels = workload.subscription_layers
    assert [np.count_nonzero(labels == layer) for layer in LAYERS] == [800, 1200, 2000]


def test_subscription_geometries_are_cells_of_their_layer(workload, world):
    for layer in LAYERS:
        cells = set(shapely.to_wkb(world.layers[layer]))
        geoms = workload.subscriptions.geoms[workload.subscription_layers == layer]
        assert set(shapely.to_wkb(geoms)) <= cells
    # Drawn uniformly with replacement: most sectors are used, some more than once.
    sectors = workload.subscriptions.geoms[workload.subscription_layers == "sector"]
    distinct = len(set(shapely.to_wkb(sectors)))
    assert 0.8 * len(world.layers["sector"]) < distinct < len(sectors)


def test_relations_are_uniform_over_the_nine_mixed_ones(workload):
    counts = np.bincount(workload.subscriptions.relations, minlength=len(Relation))
    assert counts[Relation.DISJOINT] == 0
    shares = counts[list(MIXED_RELATIONS)] / len(workload.subscriptions)
    assert np.all(np.abs(shares - 1 / 9) < 0.02)


def test_a_fixed_relation_is_used_for_every_subscription(world):
    w = generate_workload(seed=1, subscriptions=300, publications=10, world=world,
                          relation=Relation.WITHIN)
    assert set(w.subscriptions.relations) == {int(Relation.WITHIN)}


def test_publication_shares_are_40_points_and_1_2_3_polygons(workload):
    labels = workload.publication_layers
    counts = [np.count_nonzero(labels == k) for k in ("point", *LAYERS)]
    assert counts == [2400, 600, 1200, 1800]
    # Interleaved, not in blocks.
    assert len(np.flatnonzero(labels[1:] != labels[:-1])) > 0.5 * len(labels)


@pytest.mark.parametrize("share", [0.0, 0.25, 1.0])
def test_point_share_is_configurable(world, share):
    w = generate_workload(seed=2, subscriptions=100, publications=1_200, point_share=share,
                          world=world)
    labels = w.publication_layers
    assert np.count_nonzero(labels == "point") == round(share * 1_200)
    polygons = [np.count_nonzero(labels == layer) for layer in LAYERS]
    assert polygons == [round((1 - share) * 1_200 * k / 6) for k in (1, 2, 3)]


def test_publication_geometries_match_their_layer(workload, world):
    pubs, labels = workload.publications, workload.publication_layers
    kinds = shapely.get_type_id(pubs.geoms)
    assert np.all((kinds == 0) == (labels == "point"))
    for layer in LAYERS:
        cells = set(shapely.to_wkb(world.layers[layer]))
        assert set(shapely.to_wkb(pubs.geoms[labels == layer])) <= cells
    assert geometry_problems(pubs.geoms) == [None] * len(pubs)


def test_polygon_publications_follow_the_population(workload, world):
    # Publications are the cells covering accident locations, so the sectors published most
    # are where the accident points cluster: compare with the sectors of the point publications.
    pubs, labels = workload.publications, workload.publication_layers
    pts = shapely.get_coordinates(pubs.geoms[labels == "point"])
    point_sector = locate(world, pts)["sector"]
    sector_wkb = {w: i for i, w in enumerate(shapely.to_wkb(world.layers["sector"]))}
    published = [sector_wkb[w] for w in shapely.to_wkb(pubs.geoms[labels == "sector"])]
    a = np.bincount(point_sector, minlength=len(sector_wkb)) / len(point_sector)
    b = np.bincount(published, minlength=len(sector_wkb)) / len(published)
    by_population = np.corrcoef(a, b)[0, 1]
    by_area = np.corrcoef(shapely.area(world.layers["sector"]), b)[0, 1]
    assert by_population > 0.5 and by_population > by_area + 0.2


def test_ids_and_event_times(world):
    w = generate_workload(seed=1, subscriptions=50, publications=70, world=world,
                          start_time_ms=1_000, interval_ms=5)
    assert np.array_equal(w.subscriptions.ids, np.arange(50))
    assert np.array_equal(w.publications.ids, np.arange(70))
    assert np.array_equal(w.publications.event_time, 1_000 + 5 * np.arange(70))


def _fingerprint(w):
    return (list(shapely.to_wkb(w.subscriptions.geoms)), w.subscriptions.relations.tolist(),
            list(shapely.to_wkb(w.publications.geoms)), w.publication_layers.tolist())


def test_same_seed_same_workload_other_seed_other_workload():
    a, b, c = (generate_workload(seed=s, subscriptions=200, publications=300,
                                 world=synthetic_world(s, 5, 30, 90)) for s in (4, 4, 9))
    assert _fingerprint(a) == _fingerprint(b)
    fa, fc = _fingerprint(a), _fingerprint(c)
    assert all(x != y for x, y in zip(fa, fc, strict=True))


def test_the_default_world_is_built_from_the_seed():
    a = generate_workload(seed=11, subscriptions=20, publications=20)
    assert [len(a.world.layers[layer]) for layer in LAYERS] == [120, 3_000, 11_000]
    assert _fingerprint(a) == _fingerprint(generate_workload(seed=11, subscriptions=20,
                                                             publications=20))


def test_split_counts_is_exact_and_sums_to_the_total():
    assert split_counts(10, [0.4, 0.1, 0.2, 0.3]).tolist() == [4, 1, 2, 3]
    assert split_counts(7, [1, 1, 1]).sum() == 7
    assert split_counts(0, [0.2, 0.3, 0.5]).tolist() == [0, 0, 0]


@pytest.mark.parametrize("kwargs,message", [
    ({"point_share": 1.5}, r"point_share must be within \[0, 1\]"),
    ({"subscriptions": -1}, "subscriptions must be >= 0"),
    ({"publications": -5}, "publications must be >= 0"),
    ({"skew": SkewSpec(workers=2, target=1.2)}, r"skew must be within \[0, 1\]"),
    ({"skew": SkewSpec(workers=4, hot_workers=4)}, "hot_workers must be >= 1 and < workers"),
    ({"skew": SkewSpec(workers=1)}, "workers must be >= 2"),
    ({"skew": SkewSpec(workers=8, partitions=4)}, "partitions must be >= workers"),
    ({"skew": SkewSpec(workers=2, partitioner="hilbert")}, "partitioner must be one of"),
    ({"skew": SkewSpec(workers=2), "subscriptions": 0}, "subscriptions must be > 0"),
])
def test_bad_parameters_are_named(world, kwargs, message):
    with pytest.raises(ParameterError, match=message):
        generate_workload(world=world, **{"subscriptions": 10, "publications": 10, **kwargs})


def test_parameter_errors_render_as_flags():
    exc = ParameterError("hot_workers", "must be < {workers}")
    assert exc.render(lambda p: "--" + p.replace("_", "-")) == "--hot-workers must be < --workers"
