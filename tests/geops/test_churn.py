"""Subscriptions changing between batches, applied incrementally: after every change each
strategy matches exactly what the brute-force oracle finds over the live set, for all 10
relations (DISJOINT included), with adds, updates of an existing id to a new geometry and
relation, tombstones, re-adds of a removed id, and new subscriptions far outside the
partitioner's original extent."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import shapely

from geops.model import Envelopes, Relation, Subscriptions
from geops.oracle import oracle_match
from geops.strategies import build_strategy, load_partition
from geops.strategies.churn import LiveSubscriptions, apply_deltas, fold_deltas
from geops.strategies.local import LocalRunner
from geops.strategies.strategy import KINDS, Layout

STRATEGIES = ("sPS", "sPIS", "RIhPS", "RIsPS")


def as_dict(keys, offsets, ids) -> dict[int, tuple[int, ...]]:
    return {int(k): tuple(ids[offsets[i]:offsets[i + 1]].tolist()) for i, k in enumerate(keys)}


def changes(cases, subs: Subscriptions, seed: int, rounds: int):
    """Rounds of (upserts, deletes): new ids, updates, tombstones and re-adds of removed ids."""
    rng = np.random.default_rng([seed, 5])
    live = set(subs.ids.tolist())
    removed: list[int] = []
    next_id = int(subs.ids.max()) + 1
    for r in range(rounds):
        n_new, n_upd, n_del = rng.integers(1, 8, 3)
        geoms = cases.lattice_geoms(rng, int(n_new + n_upd))
        new_ids = list(range(next_id, next_id + int(n_new)))
        next_id += int(n_new)
        if removed and r % 2:
            new_ids[0] = removed.pop()  # a re-add of an id that was removed
        upd = rng.choice(sorted(live), int(n_upd), replace=False).tolist()
        rels = rng.integers(0, len(Relation), len(geoms))
        if r == 1:  # far outside the extent the partitioner was built on
            geoms[0] = shapely.box(1e5, 1e5, 1e5 + 3, 1e5 + 3)
            rels[0] = int(Relation.INTERSECTS)
        if r == 2:
            rels[: len(rels) // 2] = int(Relation.DISJOINT)
        ups = Subscriptions(np.array(new_ids + upd, np.int64), geoms, rels)
        dels = rng.choice(sorted(live - set(upd)), int(n_del), replace=False)
        live = (live - set(dels.tolist())) | set(ups.ids.tolist())
        removed.extend(dels.tolist())
        yield ups, np.asarray(dels, np.int64)


@pytest.mark.parametrize("name", STRATEGIES)
def test_every_change_matches_the_oracle_over_the_live_set(name, cases):
    subs = cases.subscriptions(seed=3, n=150)
    strategy = build_strategy(name, subs, 8)
    cells = None if strategy.partitioner is None else strategy.partitioner.cells
    runner = LocalRunner(strategy)
    live = LiveSubscriptions(strategy, subs)  # the oracle's copy of the live set
    far = np.array([shapely.Point(1e5 + 1, 1e5 + 1), shapely.box(1e5 - 1, 1e5 - 1, 1e5 + 1,
                                                                 1e5 + 1)], object)
    for r, (ups, dels) in enumerate(changes(cases, subs, seed=r_seed(name), rounds=6)):
        runner.apply(ups, dels)
        live.apply(ups, dels)
        keys, geoms = cases.publications(seed=100 + r, subs=live.subscriptions(), cells=cells,
                                         n=60)
        geoms = np.concatenate([geoms, far])
        keys = np.concatenate([keys, [10**9, 10**9 + 1]])
        got = runner.match(keys, geoms)
        want = oracle_match(live.subscriptions(), keys, geoms)
        assert as_dict(got.keys, got.offsets, got.sub_ids) == as_dict(*want), f"round {r}"


def r_seed(name: str) -> int:
    return STRATEGIES.index(name) + 7


@pytest.mark.parametrize("name", STRATEGIES)
def test_a_partition_built_from_an_older_payload_catches_up(name, cases):
    """A worker that builds a partition from its cached (older) payload applies the pending
    deltas; a resident one skips what it has; after ``rebase`` the payload alone is current."""
    subs = cases.subscriptions(seed=4, n=120)
    strategy = build_strategy(name, subs, 6)
    live = LiveSubscriptions(strategy, subs)
    base = [strategy.partition_payload(p) for p in range(6)]
    resident = [load_partition(name, b) for b in base]
    applied = [0] * 6
    for ups, dels in changes(cases, subs, seed=9, rounds=4):
        result = live.apply(ups, dels)
        for pid, delta in result.partitions.items():  # the resident ones, change by change
            applied[pid] = apply_deltas(resident[pid], [delta], applied[pid])
    history = {pid: list(deltas) for pid, deltas in live.pending.items()}
    handed = live.rebase()
    assert not live.pending
    assert {pid: list(d) for pid, d in handed.items()} == history
    rebased = {pid: fold_deltas(base[pid], deltas) for pid, deltas in handed.items()}
    for pid, data in rebased.items():  # folding where the payload lives = the driver's view
        assert data == live.payload(pid)
    for pid in range(6):
        want = live.partition_subscriptions(pid).ids.tolist()
        late = load_partition(name, base[pid])  # built from the old payload, on catching up
        assert apply_deltas(late, history.get(pid, []), 0) == max(
            [d.seq for d in history.get(pid, [])], default=0)
        fresh = load_partition(name, rebased.get(pid, base[pid]))
        for m in (resident[pid], late, fresh):
            assert sorted(m.index.ids[m.index.live_slots()].tolist()) == want
            assert content(m) == content(fresh)


@pytest.mark.parametrize("name", STRATEGIES)
def test_a_partial_rebase_keeps_the_newest_changes_pending(name, cases):
    """Rebasing up to ``fold_point`` folds the older changes and leaves the newest pending: a
    payload folded up to there plus the pending deltas is the live partition."""
    subs = cases.subscriptions(seed=8, n=90)
    strategy = build_strategy(name, subs, 4)
    live = LiveSubscriptions(strategy, subs)
    base = [strategy.partition_payload(p) for p in range(4)]
    for ups, dels in changes(cases, subs, seed=13, rounds=6):
        live.apply(ups, dels)
    assert live.fold_point(2, 1) == live.seq  # the newest change alone is over the bytes
    upto = live.fold_point(2, 10**9)
    assert upto == live.seq - 2
    handed = live.rebase(upto)
    assert all(d.seq <= upto for ds in handed.values() for d in ds)
    assert all(d.seq > upto for ds in live.pending.values() for d in ds)
    for pid in range(4):
        m = load_partition(name, fold_deltas(base[pid], handed.get(pid, ())))
        apply_deltas(m, live.pending.get(pid, []), upto)
        assert content(m) == content(load_partition(name, live.payload(pid)))
    assert live.rebase() and not live.pending


def content(matcher) -> dict[int, tuple[int, bytes]]:
    """id -> (relation, WKB) of a matcher's live subscriptions."""
    idx = matcher.index
    slots = idx.live_slots()
    return {int(i): (int(r), shapely.to_wkb(g)) for i, r, g in
            zip(idx.ids[slots], idx.relations[slots], idx.shapes.geoms[slots], strict=True)}


@pytest.mark.parametrize("name", STRATEGIES)
def test_catching_up_from_any_change_merges_the_missed_ones(name, cases):
    """A matcher that missed changes (its worker's tasks ran in another Python process)
    applies them merged, and ends where applying them one by one does, from every point: the
    same id added, replaced, removed and re-added across the missed changes included."""
    subs = cases.subscriptions(seed=6, n=80)
    strategy = build_strategy(name, subs, 3)
    live = LiveSubscriptions(strategy, subs)
    base = [strategy.partition_payload(p) for p in range(3)]
    hot = int(subs.ids[0])
    rng = np.random.default_rng(11)
    for r, (ups, dels) in enumerate(changes(cases, subs, seed=12, rounds=6)):
        if r % 3 == 2:  # the hot id removed
            ups = ups.take(np.flatnonzero(ups.ids != hot))
            dels = np.union1d(dels, [hot])
        else:  # the hot id (re-)added or replaced with a new geometry and relation
            one = Subscriptions(np.array([hot]), cases.lattice_geoms(rng, 1),
                                np.array([r % len(Relation)], np.int8))
            keep = np.flatnonzero(ups.ids != hot)
            ups = Subscriptions.concat([ups.take(keep), one])
            dels = dels[dels != hot]
        live.apply(ups, dels)
    for pid in range(3):
        history = list(live.pending.get(pid, []))
        want = content(load_partition(name, live.payload(pid)))
        for k in range(len(history) + 1):
            m = load_partition(name, base[pid])
            applied = 0
            for delta in history[:k]:  # one by one up to change k, then the rest merged
                applied = apply_deltas(m, [delta], applied)
            assert apply_deltas(m, history, applied) == max((d.seq for d in history), default=0)
            assert content(m) == want, (pid, k)


def test_sizes_disjoint_and_a_delete_and_re_add_in_one_change(cases):
    subs = cases.subscriptions(seed=5, n=60)
    strategy = build_strategy("RIhPS", subs, 4)
    live = LiveSubscriptions(strategy, subs)
    victim = int(subs.ids[0])
    result = live.apply(Subscriptions.empty(), np.array([victim, 10**12]))  # one unknown id
    assert (result.removed, result.added) == (1, 0)
    assert live.partition_sizes().sum() == len(subs) - 1
    again = Subscriptions(np.array([victim]), np.array([shapely.box(0, 0, 1, 1)], object),
                          np.array([int(Relation.DISJOINT)]))
    result = live.apply(again, np.array([victim]))  # an id in both: upserted
    assert (result.added, result.removed) == (1, 0)
    assert victim in live.disjoint_ids().tolist()
    assert live.partition_sizes().sum() == len(subs)
    assert result.router is not None and result.router.ids.tolist() == [victim]


@pytest.mark.parametrize("name", STRATEGIES)
def test_a_live_set_of_envelopes_makes_the_same_deltas_as_one_with_shapes(name, cases):
    """The app's driver keeps envelopes only (``Layout`` over ``Envelopes``): every change must
    give the deltas, router, sizes and DISJOINT ids the live set with the shapes gives."""
    subs = cases.subscriptions(seed=11, n=150)
    strategy = build_strategy(name, subs, 8)
    layout = Layout(name, Envelopes.of(subs), 8)
    shapes, envelopes = LiveSubscriptions(strategy, subs), LiveSubscriptions(layout,
                                                                             Envelopes.of(subs))
    for ups, dels in changes(cases, subs, seed=r_seed(name) + 40, rounds=8):
        want, got = shapes.apply(ups, dels), envelopes.apply(ups, dels)
        assert sorted(got.partitions) == sorted(want.partitions)
        for pid, delta in want.partitions.items():
            mine, theirs = got.partitions[pid].subscriptions(), delta.subscriptions()
            assert (mine is None) == (theirs is None)
            if mine is not None:
                np.testing.assert_array_equal(mine.ids, theirs.ids)
                np.testing.assert_array_equal(mine.relations, theirs.relations)
                assert shapely.equals_identical(mine.geoms, theirs.geoms).all()
            np.testing.assert_array_equal(got.partitions[pid].deletes, delta.deletes)
        assert (got.router is None) == (want.router is None)
        if want.router is not None:
            for field in ("ids", "bounds", "partitions", "deletes"):
                np.testing.assert_array_equal(getattr(got.router, field),
                                              getattr(want.router, field))
        np.testing.assert_array_equal(envelopes.partition_sizes(), shapes.partition_sizes())
        np.testing.assert_array_equal(envelopes.disjoint_ids(), shapes.disjoint_ids())
        assert len(envelopes) == len(shapes)
    if KINDS[name].candidates:
        a, b = envelopes.router(), shapes.router()
        _, geoms = cases.publications(seed=5, subs=shapes.subscriptions(), cells=None, n=40)
        ra, rb = a.route(geoms), b.route(geoms)
        assert len(ra) > 0
        for field in ("pub_index", "partition", "cand_offsets", "cand_ids"):
            np.testing.assert_array_equal(getattr(ra, field), getattr(rb, field))
    with pytest.raises(RuntimeError, match="envelopes only"):
        envelopes.subscriptions()


def test_a_changes_partitions_share_its_upserts_written_and_decoded_once(cases):
    """sPIS places a subscription in every cell its envelope meets: the deltas of one change
    take rows of one encoding of its upserts, which a pickle of the change holds once and a
    process decodes once, and each partition gets exactly its own rows."""
    subs = cases.subscriptions(seed=21, n=150)
    strategy = build_strategy("sPIS", subs, 8)
    live = LiveSubscriptions(strategy, subs)
    ups, dels = next(changes(cases, subs, seed=3, rounds=1))
    big = shapely.box(-1e3, -1e3, 1e3, 1e3)  # meets every cell
    ups = Subscriptions(np.r_[ups.ids, 10**6], np.r_[ups.geoms, big],
                        np.r_[ups.relations, int(Relation.INTERSECTS)])
    result = live.apply(ups, dels)
    deltas = [d for d in result.partitions.values() if d.upserts is not None]
    assert len(deltas) == 8 and len({id(d.upserts) for d in deltas}) == 1
    shared = deltas[0].upserts
    copy = pickle.loads(pickle.dumps(result.partitions))
    assert len(pickle.dumps(result.partitions)) < len(shared.data) + 2_000
    decoded = [d.subscriptions() for d in copy.values() if d.upserts is not None]
    assert len({id(d.upserts) for d in copy.values() if d.upserts is not None}) == 1
    pool = {id(g) for s in decoded for g in s.geoms}
    assert len(pool) == len(ups)  # one decoding: a subscription in two cells is one object
    for pid, d in result.partitions.items():
        want = live.partition_subscriptions(pid)
        got = d.subscriptions()
        placed = set() if got is None else set(got.ids.tolist())
        assert placed == set(ups.ids.tolist()) & set(want.ids.tolist())
