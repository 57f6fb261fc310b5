"""Subscriptions changing between batches, applied incrementally: after every change each
strategy matches exactly what the brute-force oracle finds over the live set, for all 10
relations (DISJOINT included), with adds, updates of an existing id to a new geometry and
relation, tombstones, re-adds of a removed id, and new subscriptions far outside the
partitioner's original extent."""

from __future__ import annotations

import numpy as np
import pytest
import shapely

from geops.model import Relation, Subscriptions
from geops.oracle import oracle_match
from geops.strategies import build_strategy, load_partition
from geops.strategies.churn import LiveSubscriptions, apply_deltas, fold_deltas
from geops.strategies.local import LocalRunner

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
