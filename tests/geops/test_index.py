"""R-tree indexes: bulk queries against brute force, and insert/delete for churn."""

from __future__ import annotations

import numpy as np
import pytest
import shapely

from geops.index import EnvelopeIndex, GlobalIndex, PartitionIndex
from geops.model import Relation, Subscriptions


def _boxes(rng, n):
    lo = rng.integers(0, 40, (n, 2)).astype(float)
    return np.column_stack([lo, lo + rng.integers(0, 6, (n, 2))])


def _brute(entries, alive, queries):
    q, e = queries[:, None, :], entries[None, :, :]
    hit = ((q[..., 0] <= e[..., 2]) & (q[..., 2] >= e[..., 0]) & (q[..., 1] <= e[..., 3])
           & (q[..., 3] >= e[..., 1]) & alive[None, :])
    return set(zip(*np.nonzero(hit), strict=True))


def test_envelope_index_queries_inserts_and_deletes():
    rng = np.random.default_rng(0)
    entries = _boxes(rng, 300)
    idx = EnvelopeIndex(entries)
    queries = _boxes(rng, 200)
    alive = np.ones(300, bool)
    assert set(zip(*idx.query(queries), strict=True)) == _brute(entries, alive, queries)
    new = _boxes(rng, 50)
    assert idx.insert(new).tolist() == list(range(300, 350))
    entries = np.concatenate([entries, new])
    alive = np.ones(350, bool)
    gone = rng.choice(350, 120, replace=False)
    idx.delete(gone)
    alive[gone] = False
    assert len(idx) == 230
    qidx, slots = idx.query(queries)
    assert qidx.dtype == slots.dtype == np.int64
    assert set(zip(qidx.tolist(), slots.tolist(), strict=True)) == _brute(entries, alive, queries)
    with pytest.raises(KeyError):
        idx.delete(gone[:1])


def test_envelope_index_churn_in_small_steps_matches_brute_force():
    """Deletes only mark slots dead until enough pile up for a rebuild: queries are right in
    both states, through many rebuilds."""
    rng = np.random.default_rng(3)
    entries = _boxes(rng, 200)
    idx = EnvelopeIndex(entries)
    alive = np.ones(200, bool)
    queries = _boxes(rng, 60)
    stale_seen = rebuilt = 0
    for _ in range(80):
        gone = rng.choice(np.flatnonzero(alive), 7, replace=False)
        stale_before = idx._stale
        idx.delete(gone)
        alive[gone] = False
        rebuilt += idx._stale < stale_before + len(gone)
        new = _boxes(rng, 6)
        assert idx.insert(new).tolist() == list(range(len(entries), len(entries) + 6))
        entries = np.concatenate([entries, new])
        alive = np.concatenate([alive, np.ones(6, bool)])
        stale_seen += idx._stale > 0
        assert len(idx) == alive.sum()
        got = set(zip(*idx.query(queries), strict=True))
        assert got == _brute(entries, alive, queries)
    assert stale_seen and rebuilt >= 2
    with pytest.raises(KeyError):
        idx.delete(np.flatnonzero(~alive)[:1])


def test_envelope_index_big_tree_takes_its_overflow_without_reloading():
    """In a tree too big to reload for a few hundred inserts, the overflow (queried by brute
    force meanwhile) is inserted into the tree once it passes its limit."""
    rng = np.random.default_rng(5)
    entries = _boxes(rng, 5000)
    idx = EnvelopeIndex(entries)
    tree = idx._tree
    queries = _boxes(rng, 50)
    for _ in range(10):
        new = _boxes(rng, 30)
        idx.insert(new)
        entries = np.concatenate([entries, new])
        qidx, slots = idx.query(queries)
        assert (np.diff(qidx) >= 0).all()  # grouped by query
        got = set(zip(qidx.tolist(), slots.tolist(), strict=True))
        assert got == _brute(entries, np.ones(len(entries), bool), queries)
    assert idx._tree is tree and 5000 < idx._indexed < len(entries)  # flushed, then more


def test_envelope_index_starts_empty_and_touching_counts():
    idx = EnvelopeIndex(np.empty((0, 4)))
    assert len(idx.query(np.array([[0.0, 0, 1, 1]]))[0]) == 0
    idx.insert(np.array([[0.0, 0, 1, 1]]))
    qidx, slots = idx.query(np.array([[1.0, 1, 2, 2], [1.5, 0, 2, 1]]))
    assert qidx.tolist() == [0] and slots.tolist() == [0]


def test_global_index_entries_and_churn():
    rng = np.random.default_rng(1)
    boxes = _boxes(rng, 100)
    ids = np.arange(100, dtype=np.int64) * 7 - 300
    idx = GlobalIndex(ids, boxes, np.arange(100) % 5)
    q = np.array([[0.0, 0, 50, 50]])
    _, pids, got = idx.query(q)
    assert sorted(got.tolist()) == sorted(ids.tolist())
    assert (pids == (got + 300) // 7 % 5).all()
    idx.delete(ids[:10])
    idx.delete([123456])  # unknown: ignored
    idx.insert(np.array([ids[20], 999]), np.array([[60.0, 60, 61, 61], [70.0, 70, 71, 71]]),
               np.array([3, 4]))
    assert len(idx) == 91
    _, pids, got = idx.query(np.array([[60.0, 60, 80, 80]]))
    assert sorted(zip(got.tolist(), pids.tolist(), strict=True)) == [(int(ids[20]), 3), (999, 4)]
    _, _, got = idx.query(q)
    assert set(got.tolist()) == set(ids[10:].tolist()) - {int(ids[20])}


def test_partition_index_under_endless_churn_stays_small_and_right():
    """Updates leave dead slots; compaction keeps the columns near the live size, and the
    partition answers like one built from its live subscriptions."""
    rng = np.random.default_rng(4)
    boxes = _boxes(rng, 40)
    subs = Subscriptions(np.arange(40), shapely.box(*boxes.T), np.full(40, Relation.INTERSECTS))
    idx = PartitionIndex(subs, tree=True)
    truth = dict(zip(range(40), boxes.tolist(), strict=True))
    queries = _boxes(rng, 30)
    for _ in range(300):
        ids = rng.choice(60, 5, replace=False)
        new = _boxes(rng, 5)
        idx.insert(Subscriptions(ids, shapely.box(*new.T), np.full(5, Relation.INTERSECTS)))
        truth.update(zip(ids.tolist(), new.tolist(), strict=True))
        gone = rng.choice(60, 2, replace=False)
        idx.delete(gone)
        for i in gone.tolist():
            truth.pop(i, None)
        assert len(idx.ids) <= 2 * len(truth) + 256 + 5
    keys = np.array(sorted(truth))
    rebuilt = PartitionIndex(Subscriptions(keys, shapely.box(*np.array(
        [truth[k] for k in keys.tolist()]).T), np.full(len(keys), Relation.INTERSECTS)), tree=True)
    for index in (idx, rebuilt):
        assert sorted(index.ids[index.live_slots()].tolist()) == keys.tolist()
    assert _hits(idx, queries) == _hits(rebuilt, queries)
    assert len(idx.ids) < 300 * 5  # compacted: without it every insert adds a slot


def _hits(index: PartitionIndex, queries: np.ndarray) -> set[tuple[int, int]]:
    qidx, slots = index.query(queries)
    return set(zip(qidx.tolist(), index.ids[slots].tolist(), strict=True))


def test_partition_index_upsert_delete_and_tree_follow_churn():
    geoms = shapely.box(np.arange(10.0), 0, np.arange(10.0) + 1, 1)
    subs = Subscriptions(np.arange(10) * 2, geoms, np.full(10, Relation.INTERSECTS))
    idx = PartitionIndex(subs, tree=True)
    assert len(idx) == 10 and shapely.is_prepared(idx.shapes.geoms).all()
    assert idx.slots_of(np.array([4, 5, 18, -2])).tolist() == [2, -1, 9, -1]
    idx.delete(np.array([4, 6, 77]))
    idx.insert(Subscriptions([8, 100], [shapely.box(50, 50, 51, 51), shapely.Point(2.5, 0.5)],
                             [Relation.WITHIN, Relation.TOUCHES]))
    assert len(idx) == 9
    live = idx.live_slots()
    assert sorted(idx.ids[live].tolist()) == [0, 2, 8, 10, 12, 14, 16, 18, 100]
    assert idx.relations[idx.slots_of(np.array([8]))[0]] == Relation.WITHIN
    qidx, slots = idx.query(np.array([[2.2, 0.2, 3.8, 0.8], [50.0, 50, 50, 50]]))
    assert sorted(zip(qidx.tolist(), idx.ids[slots].tolist(), strict=True)) == [(0, 100), (1, 8)]
    with pytest.raises(ValueError, match="unique"):
        PartitionIndex(Subscriptions([1, 1], geoms[:2], [0, 0]), tree=False)
    with pytest.raises(TypeError):
        PartitionIndex(subs, tree=False).query(np.zeros((1, 4)))


@pytest.mark.parametrize("tree", [True, False])
def test_partition_index_update_is_a_delete_then_an_upsert(tree):
    """``update`` (one pass) leaves what ``delete`` then ``insert`` leave, over many rounds of
    deletes of known and unknown ids and upserts of new and known ids, through compactions."""
    rng = np.random.default_rng(7)

    def boxes(n):
        lo = rng.uniform(0, 100, (n, 2))
        return shapely.box(lo[:, 0], lo[:, 1], lo[:, 0] + 3, lo[:, 1] + 3)

    start = Subscriptions(np.arange(300), boxes(300), rng.integers(0, 10, 300))
    one, two = PartitionIndex(start, tree=tree), PartitionIndex(start, tree=tree)
    next_id = 300
    queries = np.column_stack([rng.uniform(0, 100, (50, 2)), np.zeros((50, 2))])
    queries[:, 2:] = queries[:, :2] + 10
    for step in range(40):
        live = one.ids[one.live_slots()]
        known = rng.choice(live, min(len(live), 15), replace=False)
        deletes = np.concatenate([known[:5], [10_000 + step]])  # and an unknown id
        ids = np.concatenate([known[5:], np.arange(next_id, next_id + 8)])
        next_id += 8
        upserts = Subscriptions(ids, boxes(len(ids)), rng.integers(0, 10, len(ids)))
        one.update(deletes, upserts if step % 5 else None)
        two.delete(deletes)
        if step % 5:
            two.insert(upserts)
        slots_one, slots_two = one.live_slots(), two.live_slots()  # in id order
        assert one.ids[slots_one].tolist() == two.ids[slots_two].tolist()
        assert one.relations[slots_one].tolist() == two.relations[slots_two].tolist()
        assert shapely.equals(one.shapes.geoms[slots_one], two.shapes.geoms[slots_two]).all()
        if tree:
            assert _hits(one, queries) == _hits(two, queries)
    assert len(one.ids) < 2 * 300 + 256  # compacted along the way
    one.update(np.empty(0, np.int64), None)  # nothing to do
    with pytest.raises(ValueError, match="unique"):
        one.update(np.empty(0, np.int64), Subscriptions([1, 1], boxes(2), [0, 0]))
