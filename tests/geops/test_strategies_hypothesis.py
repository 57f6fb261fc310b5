"""Hypothesis explores small lattice worlds: every strategy still equals the oracle."""

from __future__ import annotations

import numpy as np
import shapely
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from geops.model import Relation, Subscriptions
from geops.oracle import oracle_match
from geops.partitioning import PARTITIONERS
from geops.strategies import STRATEGIES, LocalRunner, build_strategy

coord = st.integers(0, 8).map(lambda v: v / 2)


@st.composite
def geometry(draw):
    x, y = draw(coord), draw(coord)
    kind = draw(st.sampled_from(["point", "box", "line", "multi"]))
    if kind == "point":
        return shapely.Point(x, y)
    w, h = draw(st.integers(1, 6)) / 2, draw(st.integers(1, 6)) / 2
    if kind == "box":
        return shapely.box(x, y, x + w, y + h)
    if kind == "line":
        return shapely.LineString([(x, y), (x + w, y + draw(st.sampled_from([-h, 0, h])))])
    return shapely.MultiPolygon([shapely.box(x, y, x + w, y + h),
                                 shapely.box(x + w, y + h, x + 2 * w, y + 2 * h)])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sub_geoms=st.lists(geometry(), min_size=0, max_size=25),
       relations=st.lists(st.sampled_from(list(Relation)), min_size=25, max_size=25),
       pub_geoms=st.lists(geometry(), min_size=0, max_size=25),
       copies=st.lists(st.integers(0, 24), max_size=5),
       strategy=st.sampled_from(STRATEGIES), partitioner=st.sampled_from(PARTITIONERS),
       partitions=st.integers(1, 40))
def test_small_worlds(sub_geoms, relations, pub_geoms, copies, strategy, partitioner,
                      partitions):
    n = len(sub_geoms)
    subs = Subscriptions(np.arange(n) * 5 - 9, np.array(sub_geoms, dtype=object),
                         np.array(relations[:n], dtype=np.int8))
    pubs = pub_geoms + [sub_geoms[c] for c in copies if c < n]  # equal geometries too
    geoms = np.array(pubs, dtype=object)
    keys = np.arange(len(geoms), dtype=np.int64)[::-1] * 3
    got = LocalRunner(build_strategy(strategy, subs, partitions, partitioner)).match(keys,
                                                                                    geoms)
    for a, b in zip((got.keys, got.offsets, got.sub_ids), oracle_match(subs, keys, geoms),
                    strict=True):
        assert np.array_equal(a, b)
