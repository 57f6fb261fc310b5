"""The pieces of a strategy: payloads, routed items, routers, partition layout, churn."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import shapely

from geops.model import Relation, Subscriptions
from geops.oracle import oracle_match
from geops.strategies import (
    STRATEGIES,
    LocalRunner,
    Routed,
    build_strategy,
    load_partition,
    merge,
)
from geops.strategies import payload as payload_codec
from geops.strategies.churn import RouterDelta
from geops.strategies.routers import CandidateRouter


def test_payload_round_trip_is_exact(cases):
    subs = cases.subscriptions(3, n=60)
    gc = shapely.GeometryCollection([shapely.Point(0.1, 0.2), shapely.box(0, 0, 1 / 3, 1)])
    subs = Subscriptions(np.r_[subs.ids, 2**62], np.r_[subs.geoms, gc],
                         np.r_[subs.relations, Relation.DISJOINT])
    cell = np.array([-np.inf, 0.5, 1 / 3, np.inf])
    back, back_cell = payload_codec.decode(payload_codec.encode(subs, cell))
    assert np.array_equal(back_cell, cell)
    assert np.array_equal(back.ids, subs.ids)
    assert np.array_equal(back.relations, subs.relations)
    assert shapely.equals_identical(back.geoms, subs.geoms).all()
    empty, whole = payload_codec.decode(payload_codec.encode(Subscriptions.empty()))
    assert len(empty) == 0 and np.isinf(whole).all()
    with pytest.raises(ValueError, match="magic"):
        payload_codec.decode(b"x" * 80)


def test_payload_stores_each_distinct_geometry_once():
    """Subscriptions with identical geometries (same WKB) share one stored, and after decoding
    one shared, geometry; a geometry equal but not identical (its ring reversed) stays apart."""
    pool = np.array([shapely.box(0, 0, 1, 1), shapely.box(1, 1, 3, 2), shapely.Point(0.5, 2),
                     shapely.LineString([(0, 0), (2, 1)]),
                     shapely.Polygon([(0, 0), (4, 0), (0, 3)])], dtype=object)
    reversed_ring = shapely.reverse(pool[0])
    rng = np.random.default_rng(3)
    geoms = np.r_[pool[rng.integers(0, len(pool), 200)], reversed_ring]
    subs = Subscriptions(np.arange(len(geoms)) * 7 - 50, geoms, rng.integers(0, 10, len(geoms)))
    data = payload_codec.encode(subs)
    distinct_wkb = sum(len(w) for w in shapely.to_wkb(np.r_[pool, reversed_ring]))
    # header, per subscription id + geometry number + relation, one collection of the distinct
    assert len(data) == payload_codec._HEADER.size + 13 * len(geoms) + 9 + distinct_wkb
    back, _ = payload_codec.decode(data)
    assert shapely.equals_identical(back.geoms, subs.geoms).all()
    assert np.array_equal(back.ids, subs.ids) and np.array_equal(back.relations, subs.relations)
    assert len({id(g) for g in back.geoms}) == len(pool) + 1
    corrupt = bytearray(data)
    number_at = payload_codec._HEADER.size + 8 * len(subs)
    corrupt[number_at:number_at + 4] = (len(pool) + 1).to_bytes(4, "little")
    with pytest.raises(ValueError, match="do not fit"):
        payload_codec.decode(bytes(corrupt))


def test_payload_collection_is_the_bytes_geos_writes(cases):
    """The collection joined from the parts' WKB is byte for byte GEOS's own; a part with Z or
    M (whose flag GEOS carries into the collection's type) takes GEOS's path and round-trips."""
    geoms = np.r_[cases.subscriptions(4, n=80).geoms, shapely.Point(),
                  shapely.GeometryCollection([shapely.Point(1, 2)]), shapely.Polygon()]
    parts = shapely.to_wkb(geoms, byte_order=1).tolist()
    assert payload_codec.collection_wkb(parts) == shapely.to_wkb(
        shapely.geometrycollections(geoms), byte_order=1)
    assert payload_codec.collection_wkb([]) == shapely.to_wkb(
        shapely.GeometryCollection(), byte_order=1)
    z = shapely.Point(1, 2, 3)
    assert payload_codec.collection_wkb([*parts, shapely.to_wkb(z, byte_order=1)]) is None
    subs = Subscriptions(np.arange(3), np.array([geoms[0], z, geoms[0]], object),
                         np.zeros(3, np.int8))
    back, _ = payload_codec.decode(payload_codec.encode(subs))
    assert shapely.equals_identical(back.geoms, subs.geoms).all()
    assert shapely.has_z(back.geoms[1])


@pytest.mark.parametrize("name", ["sPS", "RIhPS"])
def test_pieces_built_apart_merge_into_the_partitions_payload(name, cases):
    """Executors build a partition from pieces of the topic (``app.static.build``): merged,
    they are byte for byte the payload the whole set gives."""
    subs = cases.subscriptions(8, n=90)
    subs = subs.take(np.argsort(subs.ids))  # the app's set is sorted by id
    whole = build_strategy(name, subs, 4)
    rng = np.random.default_rng(1)
    slices = np.array_split(rng.permutation(len(subs)), 3)
    for pid in range(whole.num_partitions):
        cell = (payload_codec.WHOLE_PLANE if whole.partitioner is None
                else whole.partitioner.cells[pid])
        pieces = []
        for rows in slices:
            part = subs.take(np.sort(rows))
            members, pids = whole.place_subscriptions(part)
            mine = members[pids == pid]
            if len(mine):
                pieces.append(payload_codec.encode(part.take(mine), cell))
        assert payload_codec.merge(pieces[::-1], cell) == whole.partition_payload(pid)


def test_routed_take_and_by_partition_rebase_candidates():
    routed = Routed(np.array([0, 0, 1, 2]), np.array([3, 1, 3, 0], np.int32),
                    np.array([0, 2, 3, 6, 7]), np.array([10, 11, 12, 13, 14, 15, 16]))
    groups = {pid: r for pid, r in routed.by_partition()}
    assert list(groups) == [0, 1, 3]
    g3 = groups[3]
    assert g3.pub_index.tolist() == [0, 1]
    assert g3.cand_offsets.tolist() == [0, 2, 5]
    assert g3.cand_ids.tolist() == [10, 11, 13, 14, 15]
    assert groups[1].cand_ids.tolist() == [12] and groups[0].cand_ids.tolist() == [16]
    plain = Routed(np.array([4, 5]), np.array([1, 1], np.int32))
    assert [(p, r.pub_index.tolist(), r.cand_ids) for p, r in plain.by_partition()] == \
        [(1, [4, 5], None)]


def test_candidate_router_pickles_small_and_shares_one_index_per_process(cases):
    subs = cases.subscriptions(4)
    router = build_strategy("RIhPS", subs, 8).router()
    assert isinstance(router, CandidateRouter)
    _, geoms = cases.publications(4, subs, None)
    first = router.route(geoms)
    blob = pickle.dumps(router)
    assert len(blob) < 64 * len(subs) + 2000  # ids, boxes and partitions only
    copy = pickle.loads(blob)
    assert copy.index() is router.index()
    again = copy.route(geoms)
    for field in ("pub_index", "partition", "cand_offsets", "cand_ids"):
        assert np.array_equal(getattr(first, field), getattr(again, field))
    # every item's candidates live in its partition; one item per (publication, partition)
    assert (np.diff(first.pub_index * 8 + first.partition) > 0).all()
    counts = np.diff(first.cand_offsets)
    assert (counts > 0).all()
    assert (np.repeat(first.partition, counts) == first.cand_ids % 8).all()


def _items_of(routed, kept):
    """(publication, partition, its candidates) of each item whose partition is in ``kept``."""
    counts = np.diff(routed.cand_offsets)
    return [(int(q), int(p), sorted(routed.cand_ids[o:o + n].tolist()))
            for q, p, o, n in zip(routed.pub_index, routed.partition, routed.cand_offsets[:-1],
                                  counts, strict=True) if p in kept]


@pytest.mark.parametrize("name", ["RIhPS", "RIsPS"])
def test_candidate_router_of_some_partitions_finds_their_items_alone(cases, name):
    """A task that keeps some partitions' items gets exactly those the full router gives,
    also after subscription changes that add to, move out of and delete from its partitions."""
    subs = cases.subscriptions(6, n=120)
    router = build_strategy(name, subs, 8).router()
    _, geoms = cases.publications(6, subs, None, n=150)
    full = router.route(geoms)
    assert len(np.unique(full.partition)) > 3
    kept = np.array([0, 2, 5], np.int32)
    inside = np.flatnonzero(np.isin(router.partitions, kept))
    moved = router.ids[inside[:3]]  # to partition 7, which the task does not keep
    added = cases.subscriptions(7, n=20)
    deltas = (
        RouterDelta(1, added.ids + 10_000, shapely.bounds(added.geoms),
                    np.arange(20, dtype=np.int32) % 8, np.empty(0, np.int64)),
        RouterDelta(2, moved, router.bounds[inside[:3]], np.full(3, 7, np.int32),
                    router.ids[inside[3:6]]),
    )
    for part, changes in ((kept, ()), (np.array([], np.int32), ()), (kept, deltas[:1]),
                          (kept, deltas), (np.arange(8, dtype=np.int32), deltas)):
        some = router.route(geoms, changes, part)
        assert _items_of(some, set(part.tolist())) == _items_of(some, set(range(8)))
        assert _items_of(some, set(range(8))) == \
            _items_of(router.route(geoms, changes), set(part.tolist()))
    assert router.index(deltas, kept) is not router.index(deltas)
    assert router.index(deltas, np.arange(8, dtype=np.int32)) is router.index(deltas)
    assert not _items_of(router.route(geoms, deltas, kept), {7})
    # one index per worker's partitions stays cached for every worker of a move's assignments
    sets = [np.array([p], np.int32) for p in range(8)]
    first = [router.index((), one) for one in sets]
    assert all(router.index((), one) is index for one, index in zip(sets, first, strict=True))


@pytest.mark.parametrize("name", STRATEGIES)
def test_partition_layout(cases, name):
    subs = cases.subscriptions(5)
    s = build_strategy(name, subs, 20, "quadtree")
    sizes = s.partition_sizes()
    assert s.num_partitions == len(sizes) == (20 if name == "RIhPS" else 22)
    held = [load_partition(name, s.partition_payload(p)) for p in range(s.num_partitions)]
    assert [m.num_subscriptions for m in held] == sizes.tolist()
    ids = np.concatenate([s.partition_subscriptions(p).ids for p in range(s.num_partitions)])
    if name in ("RIhPS", "RIsPS"):
        assert sorted(ids.tolist()) == sorted(subs.ids.tolist())  # each in exactly one
    else:
        assert set(ids.tolist()) == set(subs.ids.tolist()) and len(ids) > len(subs)
    if name == "RIhPS":
        for p in range(20):
            assert (s.partition_subscriptions(p).ids % 20 == p).all()
    if name == "RIsPS":
        gi, pid = s.partitioner.place(subs.geoms)
        lowest = dict(zip(gi[::-1].tolist(), pid[::-1].tolist(), strict=True))
        for p in range(s.num_partitions):
            rows = np.flatnonzero(np.isin(subs.ids, s.partition_subscriptions(p).ids))
            assert all(lowest[r] == p for r in rows.tolist())
    disjoint = s.disjoint_ids()
    assert disjoint.tolist() == sorted(subs.ids[subs.relations == Relation.DISJOINT].tolist())
    with pytest.raises(IndexError):
        s.partition_payload(s.num_partitions)


def test_bad_strategy_arguments(cases):
    subs = cases.subscriptions(6, n=20)
    with pytest.raises(ValueError, match="unknown strategy"):
        build_strategy("RIS", subs, 4)
    with pytest.raises(ValueError, match="unknown partitioner"):
        build_strategy("sPIS", subs, 4, "voronoi")
    with pytest.raises(ValueError, match="at least one"):
        build_strategy("RIhPS", subs, 0)
    with pytest.raises(ValueError, match="unique"):
        build_strategy("sPS", Subscriptions([1, 1], subs.geoms[:2], [0, 0]), 4)
    with pytest.raises(ValueError, match="unknown strategy"):
        load_partition("RIS", build_strategy("sPS", subs, 2).partition_payload(0))


@pytest.mark.parametrize("name", STRATEGIES)
def test_matcher_follows_churn(cases, name):
    """After insert/delete on a loaded partition it matches like a fresh one holding the result."""
    subs = cases.subscriptions(8, n=80)
    s = build_strategy(name, subs, 1)
    matcher = load_partition(name, s.partition_payload(0))
    extra = cases.subscriptions(9, n=30)
    extra = Subscriptions(extra.ids + 10_000, extra.geoms, extra.relations)
    replaced = Subscriptions(subs.ids[:5], subs.geoms[5:10], subs.relations[5:10])
    matcher.insert(extra)
    matcher.insert(replaced)
    matcher.delete(subs.ids[10:20])
    assert matcher.num_subscriptions == 80 + 30 - 10
    kept = np.r_[5:10, 20:80]
    now = Subscriptions(np.r_[replaced.ids, subs.ids[kept], extra.ids],
                        np.r_[replaced.geoms, subs.geoms[kept], extra.geoms],
                        np.r_[replaced.relations, subs.relations[kept], extra.relations])
    keys, geoms = cases.publications(8, now, None, n=120)
    cand = build_strategy(name, now, 1).router().route(geoms) if name[:2] == "RI" else None
    part = matcher.match(keys, geoms) if cand is None else \
        matcher.match(keys[cand.pub_index], geoms[cand.pub_index], cand.cand_offsets,
                      cand.cand_ids)
    got = merge(keys, [part], np.sort(now.ids[now.relations == Relation.DISJOINT]))
    for a, b in zip(got, oracle_match(now, keys, geoms), strict=True):
        assert np.array_equal(a, b)


def test_local_runner_counts_items_and_candidates(cases):
    subs = cases.subscriptions(10)
    keys, geoms = cases.publications(10, subs, None)
    sps = LocalRunner(build_strategy("sPS", subs, 4)).match(keys, geoms)
    spis = LocalRunner(build_strategy("sPIS", subs, 4)).match(keys, geoms)
    assert sps.items == spis.items > len(keys) - 10
    assert sps.candidates > spis.candidates > 0
    # sPIS refines each envelope-intersecting pair once, however many cells both span
    tree = shapely.STRtree(subs.geoms)
    assert spis.candidates == tree.query(geoms).shape[1]


@pytest.mark.parametrize("name", STRATEGIES)
def test_empty_subscriptions_and_empty_batches(cases, name):
    keys, geoms = cases.publications(11, cases.subscriptions(11), None, n=20)
    empty = LocalRunner(build_strategy(name, Subscriptions.empty(), 4))
    got = empty.match(keys, geoms)
    assert len(got.keys) == 0 and got.offsets.tolist() == [0]
    runner = LocalRunner(build_strategy(name, cases.subscriptions(11), 4))
    got = runner.match(np.empty(0, np.int64), np.empty(0, dtype=object))
    assert len(got.keys) == 0 and got.items == 0


@pytest.mark.parametrize("name", STRATEGIES)
def test_place_subscriptions_follows_the_build_rule(cases, name):
    subs = cases.subscriptions(12)
    s = build_strategy(name, subs, 7, "grid")
    members, pids = s.place_subscriptions(subs)
    for p in range(s.num_partitions):
        assert sorted(subs.ids[members[pids == p]].tolist()) == \
            sorted(s.partition_subscriptions(p).ids.tolist())
