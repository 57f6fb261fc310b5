"""Static partitions built from topic records on the executors equal the driver's payloads."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import shapely

from app.static_build import BuildSpec, merge_pieces, place_pieces
from geops.model import Subscriptions
from geops.strategies import build_strategy


@pytest.mark.parametrize("strategy", ["sPIS", "RIhPS"])
def test_pieces_of_shared_invalid_and_deleted_records_make_the_drivers_payloads(strategy):
    """Records of one slice: many subscriptions of a few geometries (each read once), a
    bowtie and unreadable bytes (dropped, as the driver dead-letters them) and a tombstone."""
    pool = np.array([shapely.box(0, 0, 2, 2), shapely.box(5, 5, 9, 6), shapely.Point(3, 7),
                     shapely.box(1, 6, 4, 9)], dtype=object)
    rng = np.random.default_rng(2)
    n = 120
    subs = Subscriptions(np.arange(n) * 5 + 1, pool[rng.integers(0, len(pool), n)],
                         rng.integers(0, 10, n))
    built = build_strategy(strategy, subs, 4)
    rows = [(int(i), (0, k, wkb, int(r))) for k, (i, wkb, r) in
            enumerate(zip(subs.ids, shapely.to_wkb(subs.geoms), subs.relations, strict=True))]
    bowtie = shapely.to_wkb(shapely.Polygon([(0, 0), (1, 1), (1, 0), (0, 1)]))
    rows += [(-1, (0, n, bowtie, 0)), (-2, (0, n + 1, b"\x01\x03junk", 0)),
             (-3, (0, n + 2, None, 0))]
    partitioner = None if built.partitioner is None else SimpleNamespace(value=built.partitioner)
    spec = BuildSpec(strategy, built.num_partitions, partitioner, {}, "subscriptions", {})
    pieces = list(place_pieces(spec, rows[::-1]))
    got = dict(merge_pieces(partitioner, pieces))
    assert got == {p: built.partition_payload(p) for p in range(built.num_partitions)
                   if built.partition_sizes()[p]}
