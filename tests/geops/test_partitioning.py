"""Spatial partitioners: partition counts, placement rules, spatial order, determinism."""

from __future__ import annotations

import numpy as np
import pytest
import shapely

from geops.model import Subscriptions
from geops.partitioning import (
    PARTITIONERS,
    build_partitioner,
    hash_partition,
    quadtree_leaves,
    sample_size,
)
from schemas.assignment import initial_assignment


def _subs(n: int, seed: int = 0) -> Subscriptions:
    rng = np.random.default_rng(seed)
    centers = rng.normal(50, 15, (n, 2))
    geoms = shapely.buffer(shapely.points(centers), rng.uniform(0.1, 4, n), quad_segs=2)
    return Subscriptions(rng.permutation(n * 3)[:n], geoms, np.zeros(n))


def _closed_hits(cells: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(n, P) bool: envelope b[i] touches closed cell j."""
    return ((b[:, None, 0] <= cells[None, :, 2]) & (b[:, None, 2] >= cells[None, :, 0])
            & (b[:, None, 1] <= cells[None, :, 3]) & (b[:, None, 3] >= cells[None, :, 1]))


def _half_open_hits(cells: np.ndarray, xy: np.ndarray) -> np.ndarray:
    return ((xy[:, None, 0] >= cells[None, :, 0]) & (xy[:, None, 0] < cells[None, :, 2])
            & (xy[:, None, 1] >= cells[None, :, 1]) & (xy[:, None, 1] < cells[None, :, 3]))


def _edge_values(cells: np.ndarray, axis: int) -> np.ndarray:
    v = np.concatenate([cells[:, axis], cells[:, axis + 2]])
    return np.unique(v[np.isfinite(v)])


@pytest.mark.parametrize("kind", PARTITIONERS)
@pytest.mark.parametrize("requested", [1, 2, 3, 7, 16, 20, 64])
def test_partition_count_and_cells_cover_the_plane(kind, requested):
    p = build_partitioner(kind, _subs(500), requested)
    expected = quadtree_leaves(requested) if kind == "quadtree" else requested
    assert p.num_partitions == expected >= requested
    assert p.cells.shape == (expected, 4)
    # outermost cells reach infinity on every side
    assert np.isinf(p.cells[:, 0]).any() and np.isinf(p.cells[:, 1]).any()
    assert np.isinf(p.cells[:, 2]).any() and np.isinf(p.cells[:, 3]).any()
    # half-open cells tile the plane: every probe point, including every cell corner and
    # points far outside the boundary, is in exactly one cell
    xs = np.concatenate([_edge_values(p.cells, 0), [-1e9, 0.0, 50.0, 1e9]])
    ys = np.concatenate([_edge_values(p.cells, 1), [-1e9, 0.0, 50.0, 1e9]])
    xy = np.array(np.meshgrid(xs, ys)).reshape(2, -1).T
    assert (_half_open_hits(p.cells, xy).sum(axis=1) == 1).all()


def test_quadtree_leaf_rule():
    assert [quadtree_leaves(p) for p in (1, 2, 4, 5, 16, 17, 20, 100)] == \
        [1, 4, 4, 7, 16, 19, 22, 100]


@pytest.mark.parametrize("kind", PARTITIONERS)
@pytest.mark.parametrize("requested", [1, 5, 16])
def test_place_points_exactly_one_half_open_cell(kind, requested):
    p = build_partitioner(kind, _subs(300, seed=1), requested)
    rng = np.random.default_rng(2)
    xs, ys = _edge_values(p.cells, 0), _edge_values(p.cells, 1)
    on_edges = np.column_stack([rng.choice(np.concatenate([xs, [3.0]]), 400),
                                rng.choice(np.concatenate([ys, [3.0]]), 400)])
    xy = np.concatenate([on_edges, rng.normal(50, 40, (400, 2)), [[1e12, -1e12]]])
    gi, pid = p.place(shapely.points(xy))
    assert np.array_equal(gi, np.arange(len(xy)))
    hits = _half_open_hits(p.cells, xy)
    assert hits[np.arange(len(xy)), pid].all()


@pytest.mark.parametrize("kind", PARTITIONERS)
@pytest.mark.parametrize("requested", [1, 6, 16])
def test_place_envelopes_every_touched_closed_cell(kind, requested):
    p = build_partitioner(kind, _subs(300, seed=3), requested)
    rng = np.random.default_rng(4)
    xs = np.concatenate([_edge_values(p.cells, 0), [3.0, 50.0]])
    ys = np.concatenate([_edge_values(p.cells, 1), [3.0, 50.0]])
    # boxes with sides exactly on cell edges, random boxes, lines, multipoints, huge boxes
    x = np.sort(rng.choice(xs, (200, 2)), axis=1)
    y = np.sort(rng.choice(ys, (200, 2)), axis=1)
    aligned = shapely.box(x[:, 0], y[:, 0], x[:, 1], y[:, 1])
    c = rng.normal(50, 30, (200, 2))
    random_boxes = shapely.box(c[:, 0], c[:, 1], c[:, 0] + rng.uniform(0, 20, 200),
                               c[:, 1] + rng.uniform(0, 20, 200))
    lines = shapely.linestrings(np.stack([c, c + 7], axis=1))
    multi = shapely.multipoints(np.stack([c, c - 9], axis=1))
    geoms = np.concatenate([aligned, random_boxes, lines, multi,
                            [shapely.box(-1e9, -1e9, 1e9, 1e9)]])
    gi, pid = p.place(geoms)
    got = np.zeros((len(geoms), p.num_partitions), bool)
    got[gi, pid] = True
    assert np.array_equal(got, _closed_hits(p.cells, shapely.bounds(geoms)))
    # sorted by geometry, then partition, no duplicates
    key = gi * p.num_partitions + pid
    assert (np.diff(key) > 0).all()


def test_point_on_a_split_goes_to_the_upper_cell():
    p = build_partitioner("grid", Subscriptions([1, 2], [shapely.Point(0, 0),
                                                         shapely.Point(4, 2)], [0, 0]), 2)
    assert p.cells[0, 2] == 2.0 and p.cells[1, 0] == 2.0
    _, pid = p.place(np.array([shapely.Point(2, 1), shapely.Point(1.999, 1)]))
    assert pid.tolist() == [1, 0]
    _, pid = p.place(np.array([shapely.LineString([(0, 0), (2, 0)])]))
    assert pid.tolist() == [0, 1]


@pytest.mark.parametrize("kind", PARTITIONERS)
def test_build_is_deterministic_and_independent_of_order(kind):
    subs = _subs(2000, seed=5)
    a = build_partitioner(kind, subs, 16, sample_seed=7)
    perm = np.random.default_rng(6).permutation(len(subs))
    b = build_partitioner(kind, subs.take(perm), 16, sample_seed=7)
    assert np.array_equal(a.cells, b.cells)
    if kind != "grid":
        c = build_partitioner(kind, subs, 16, sample_seed=8)
        assert not np.array_equal(a.cells, c.cells)


def _block_is_rectangle(cells: np.ndarray) -> bool:
    clipped = np.clip(cells, -1e6, 1e6)
    area = ((clipped[:, 2] - clipped[:, 0]) * (clipped[:, 3] - clipped[:, 1])).sum()
    box = (clipped[:, 2].max() - clipped[:, 0].min()) * (clipped[:, 3].max()
                                                          - clipped[:, 1].min())
    return bool(np.isclose(area, box, rtol=1e-12))


@pytest.mark.parametrize("kind", ["kdbtree", "grid"])
@pytest.mark.parametrize("workers", [2, 4, 8])
def test_contiguous_id_blocks_are_rectangles(kind, workers):
    p = build_partitioner(kind, _subs(3000, seed=9), 16)
    owner = np.array(initial_assignment(p.num_partitions, workers))
    for w in range(workers):
        assert _block_is_rectangle(p.cells[owner == w])


@pytest.mark.parametrize("workers", [2, 4])
def test_quadtree_ids_follow_z_order(workers):
    """On evenly spread subscriptions the quadtree is full, so Z-order blocks are quadrants."""
    xy = np.array(np.meshgrid(np.arange(8.0), np.arange(8.0))).reshape(2, -1).T
    subs = Subscriptions(np.arange(64), shapely.points(xy), np.zeros(64))
    p = build_partitioner("quadtree", subs, 16)
    owner = np.array(initial_assignment(16, workers))
    for w in range(workers):
        assert _block_is_rectangle(p.cells[owner == w])
    # the first four ids are the south-west quadrant, in the order SW, SE, NW, NE
    first = p.cells[:4]
    assert first[0, 0] == first[2, 0] and first[0, 1] == first[1, 1]
    assert first[1, 0] == first[3, 0] and first[2, 1] == first[3, 1]


def test_grid_neighbouring_ids_are_adjacent_cells():
    p = build_partitioner("grid", _subs(500), 12)
    a, b = p.cells[:-1], p.cells[1:]
    shared_x = (a[:, 2] == b[:, 0]) | (a[:, 0] == b[:, 2])
    shared_y = (a[:, 3] == b[:, 1]) | (a[:, 1] == b[:, 3])
    assert (shared_x | shared_y).all()


def test_kdbtree_balances_the_sample():
    subs = _subs(20000, seed=10)
    p = build_partitioner("kdbtree", subs, 8)
    b = shapely.bounds(subs.geoms)
    centers = np.column_stack([(b[:, 0] + b[:, 2]) / 2, (b[:, 1] + b[:, 3]) / 2])
    counts = _half_open_hits(p.cells, centers).sum(axis=0)
    assert counts.min() > 0.8 * len(subs) / 8


def test_degenerate_inputs_still_partition():
    empty = build_partitioner("kdbtree", Subscriptions.empty(), 4)
    assert empty.num_partitions == 4
    one = Subscriptions([5], [shapely.Point(3, 3)], [0])
    for kind in PARTITIONERS:
        p = build_partitioner(kind, one, 9)
        gi, _ = p.place(np.array([shapely.Point(3, 3), shapely.Point(-7, 100)]))
        assert gi.tolist() == [0, 1]


def test_bad_arguments():
    with pytest.raises(ValueError, match="unknown partitioner"):
        build_partitioner("hilbert", _subs(10), 4)
    with pytest.raises(ValueError, match="at least one partition"):
        build_partitioner("grid", _subs(10), 0)


def test_sample_size_rule():
    assert sample_size(10_000, 16) == 100
    assert sample_size(10_000, 100) == 200
    assert sample_size(50, 100) == 50


def test_hash_partition_is_id_mod_p_and_never_negative():
    ids = np.array([0, 1, 17, -1, -17, 2**62], dtype=np.int64)
    assert hash_partition(ids, 16).tolist() == [0, 1, 1, 15, 15, 0]
    assert hash_partition(ids, 16).dtype == np.int32
