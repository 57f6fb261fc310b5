"""Every strategy × partitioner × partition count returns exactly the brute-force matches."""

from __future__ import annotations

import numpy as np
import pytest
import shapely

from geops.model import Relation, Subscriptions
from geops.oracle import oracle_match
from geops.partitioning import PARTITIONERS
from geops.strategies import LocalRunner, build_strategy

# RIhPS hashes ids, so its partitioner does not matter: one partitioner is enough for it.
COMBOS = [(s, k) for s in ("sPS", "sPIS", "RIsPS") for k in PARTITIONERS] + [("RIhPS", "kdbtree")]
PARTITION_COUNTS = [1, 3, 16, 200]  # 200 > the 120 subscriptions


def _assert_same(got, want):
    keys, offsets, ids = want
    assert np.array_equal(got.keys, keys)
    assert np.array_equal(got.offsets, offsets)
    assert np.array_equal(got.sub_ids, ids)


@pytest.mark.parametrize(("strategy", "partitioner"), COMBOS)
@pytest.mark.parametrize("partitions", PARTITION_COUNTS)
def test_strategy_equals_oracle(cases, strategy, partitioner, partitions):
    for seed in range(2):
        subs = cases.subscriptions(seed + 100 * partitions)
        built = build_strategy(strategy, subs, partitions, partitioner, sample_seed=seed)
        cells = None if built.partitioner is None else built.partitioner.cells
        keys, geoms = cases.publications(seed, subs, cells)
        got = LocalRunner(built).match(keys, geoms)
        _assert_same(got, oracle_match(subs, keys, geoms))


@pytest.mark.parametrize("strategy", ["sPS", "sPIS", "RIhPS", "RIsPS"])
def test_subscriptions_sharing_geometries_equal_oracle(cases, strategy):
    """Many subscriptions of one geometry under different relations (the payload stores it
    once and the partition matches the shared object): still exactly the oracle's matches."""
    pool = cases.subscriptions(7, n=30)
    rng = np.random.default_rng(5)
    pick = rng.integers(0, len(pool), 240)
    subs = Subscriptions(np.arange(240) * 3 - 100, pool.geoms[pick],
                         rng.integers(0, len(Relation), 240))
    built = build_strategy(strategy, subs, 8)
    cells = None if built.partitioner is None else built.partitioner.cells
    keys, geoms = cases.publications(7, subs, cells)
    _assert_same(LocalRunner(built).match(keys, geoms), oracle_match(subs, keys, geoms))


def test_cases_exercise_every_relation_and_the_cell_borders(cases):
    """The generated cases are hard: every relation matches, and geometries sit on borders."""
    seen = np.zeros(len(Relation), int)
    on_border = 0
    for seed in range(3):
        subs = cases.subscriptions(seed + 1600)
        built = build_strategy("sPIS", subs, 16, "kdbtree", sample_seed=seed)
        keys, geoms = cases.publications(seed, subs, built.partitioner.cells)
        _, _, ids = oracle_match(subs, keys, geoms)
        rel_of = dict(zip(subs.ids.tolist(), subs.relations.tolist(), strict=True))
        seen += np.bincount([rel_of[i] for i in ids.tolist()], minlength=len(Relation))
        edges = np.concatenate([built.partitioner.cells[:, 0], built.partitioner.cells[:, 1]])
        edges = edges[np.isfinite(edges)]
        b = np.concatenate([shapely.bounds(subs.geoms), shapely.bounds(geoms)])
        on_border += np.isin(b, edges).any(axis=1).sum()
        gi, _ = built.partitioner.place(geoms)
        assert (np.bincount(gi, minlength=len(geoms)) > 1).any()  # spans several cells
    assert (seen > 0).all(), dict(zip([r.name for r in Relation], seen.tolist(), strict=True))
    assert on_border > 20


@pytest.mark.parametrize("strategy", ["sPS", "sPIS", "RIhPS", "RIsPS"])
def test_disjoint_is_exact_far_outside_and_with_no_partition_reached(cases, strategy):
    subs = cases.subscriptions(7)
    subs.relations[:] = Relation.DISJOINT
    built = build_strategy(strategy, subs, 4)
    geoms = np.concatenate([subs.geoms[:5], [shapely.Point(1e9, 1e9), shapely.Point(-3, -3)]])
    keys = np.arange(len(geoms), dtype=np.int64) * 3
    got = LocalRunner(built).match(keys, geoms)
    _assert_same(got, oracle_match(subs, keys, geoms))
    # the far-away point matches every DISJOINT subscription
    far = np.flatnonzero(got.keys == keys[5])[0]
    assert np.array_equal(got.sub_ids[got.offsets[far]:got.offsets[far + 1]], np.sort(subs.ids))
