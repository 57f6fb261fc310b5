"""The migration-aware policies (llfd, minmig, mixed) and replication (replicate) on crafted
loads: a single partition above the fair share, many small ones, a moving hotspot."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from distributor.mldc import owner_loads, owners_mldc
from distributor.policies import (
    POLICIES,
    GreedyPolicy,
    LLFDPolicy,
    MinMigPolicy,
    MixedPolicy,
    ReplicatePolicy,
    added_owners,
    make_policy,
    propose_owners,
)
from distributor.policies.migration import shipped_bytes
from schemas.assignment import initial_assignment

W = 4
P = 16


def singles(assignment):
    return [(w,) for w in assignment]


def start(partitions=P, workers=W):
    return singles(initial_assignment(partitions, workers))


def test_owner_loads_split_a_replicated_partition_evenly():
    assert owner_loads([6.0, 2.0], [(0, 1, 2), (1,)], 3) == [2.0, 4.0, 2.0]
    assert owner_loads([6.0, 2.0], [(0,), (1,)], 3) == [6.0, 2.0, 0.0]
    assert owners_mldc([6.0, 0.0], [(0, 1, 2), (0,)], 3) == pytest.approx(0.0)
    with pytest.raises(ValueError):
        owner_loads([1.0], [(0,), (1,)], 2)


def test_one_partition_above_the_fair_share_is_replicated_with_k_from_its_load():
    # W = 4, mean 6.5: partition 0 carries 8, 1.23 x the fair share -> 2 owners
    loads = [8.0] + [0.6] * 30
    new = ReplicatePolicy().propose_owners(loads, start(31), W, [100.0] * 31)
    assert len(new[0]) == 2 and new[0][0] == 0          # primary kept first
    assert all(len(o) == 1 for o in new[1:])
    assert owners_mldc(loads, new, W) <= 0.05 + 1e-9
    # 3.5 x the fair share needs 4 owners: k grows with the load
    loads = [35.0] + [0.5] * 15
    total = sum(loads)
    new = ReplicatePolicy().propose_owners(loads, start(), W, [100.0] * P)
    assert len(new[0]) == math.ceil(35.0 / (1.05 * total / W)) == 4


def test_moving_cannot_balance_a_hot_partition_but_replication_can():
    loads = [10.0] + [1.0] * 15
    before = owners_mldc(loads, start(), W)
    for name in ("greedy", "llfd", "minmig", "mixed"):
        new = propose_owners(make_policy(name), loads, start(), W, [100.0] * P)
        assert all(len(o) == 1 for o in new), name
        assert owners_mldc(loads, new, W) == pytest.approx(10 / 6.25 - 1), name
        assert owners_mldc(loads, new, W) < before
    new = propose_owners(make_policy("replicate"), loads, start(), W, [100.0] * P)
    assert owners_mldc(loads, new, W) < 0.05 + 1e-9


def test_many_small_partitions_are_moved_not_replicated():
    # everything on worker 0 at first: 64 partitions of load ~1, no one near the fair share
    loads = [1.0 + (p % 5) / 10 for p in range(64)]
    owners = [(0,)] * 64
    for cls in (ReplicatePolicy, MinMigPolicy, LLFDPolicy, MixedPolicy):
        new = cls().propose_owners(loads, owners, W, [1e6] * 64)
        assert all(len(o) == 1 for o in new), cls.name
        assert owners_mldc(loads, new, W) <= 0.05 + 1e-9, cls.name


def test_a_balanced_assignment_is_left_alone():
    loads = [1.0] * P
    for name in POLICIES:
        assert propose_owners(make_policy(name), loads, start(), W) == start(), name


def test_moving_hotspot_replicas_follow_and_old_replicas_are_dropped():
    policy = ReplicatePolicy()
    costs = [1e5] * P
    first = [12.0] + [0.5] * 15                  # hot spot in partition 0 (worker 0)
    owners = policy.propose_owners(first, start(), W, costs)
    assert len(owners[0]) >= 2
    moved = [0.5] * 15 + [12.0]                  # it moves to partition 15 (worker 3)
    again = policy.propose_owners(moved, owners, W, costs)
    assert len(again[15]) >= 2                   # the new hot partition is replicated
    assert len(again[0]) == 1                    # the old one's replicas are dropped
    assert owners_mldc(moved, again, W) <= 0.05 + 1e-9


def test_minmig_moves_load_per_byte_llfd_the_heaviest():
    # worker 0 holds a heavy 1 GB partition and two lighter 1 kB ones: 11 against 4 and 4
    loads = [6.0, 2.5, 2.5, 2.0, 2.0, 2.0, 2.0]
    costs = [1e9] + [1e3] * 6
    owners = singles([0, 0, 0, 1, 1, 2, 2])
    mean = sum(loads) / 3
    llfd = LLFDPolicy().propose_owners(loads, owners, 3, costs)
    minmig = MinMigPolicy().propose_owners(loads, owners, 3, costs)
    assert llfd[0] != owners[0]                   # the heaviest goes
    assert minmig[0] == owners[0]                 # the 1 GB partition stays
    assert shipped_bytes(owners, minmig, costs) < shipped_bytes(owners, llfd, costs)
    assert max(owner_loads(loads, minmig, 3)) <= 1.05 * mean + 1e-9
    assert max(owner_loads(loads, llfd, 3)) < 11


def test_mixed_keeps_at_most_table_max_partitions_away_from_home():
    loads = [1.0 + (p % 5) / 10 for p in range(64)]
    owners = [(0,)] * 64                          # 48 partitions away from their home
    home = initial_assignment(64, W)
    new = MixedPolicy(table_max=4).propose_owners(loads, owners, W, [1e6] * 64)
    away = sum(1 for p in range(64) if new[p] != (home[p],))
    assert away <= 4
    assert owners_mldc(loads, new, W) <= 0.05 + 1e-9
    free = MinMigPolicy().propose_owners(loads, owners, W, [1e6] * 64)
    assert sum(1 for p in range(64) if free[p] != (home[p],)) > 4


def test_single_owner_policies_through_propose_owners():
    loads = [5.0, 1.0, 1.0, 1.0]
    owners = [(0,), (0,), (1,), (1,)]
    greedy = propose_owners(GreedyPolicy(), loads, owners, 2)
    assert greedy == singles(GreedyPolicy().propose(loads, [0, 0, 1, 1], 2))
    # nothing better: the owners in force come back, replicas included
    replicated = [(0, 1), (0,), (1,), (1,)]
    assert propose_owners(GreedyPolicy(), [4.0, 0.0, 1.0, 1.0], replicated, 2) == replicated
    # the single-owner form of an owners policy: MinMig's answer
    assert ReplicatePolicy().propose(loads, [0, 0, 1, 1], 2) == MinMigPolicy().propose(
        loads, [0, 0, 1, 1], 2)


def test_added_owners_are_moves_from_the_old_primary():
    old = [(0,), (1,), (2, 3), (0,)]
    new = [(0, 2), (3,), (2,), (0,)]
    assert added_owners(old, new) == [(0, 0, 2), (1, 1, 3)]
    assert shipped_bytes(old, new, [10.0, 20.0, 30.0, 40.0]) == 30.0


@st.composite
def instances(draw):
    workers = draw(st.integers(2, 6))
    partitions = draw(st.integers(1, 24))
    loads = draw(st.lists(st.floats(0, 100), min_size=partitions, max_size=partitions))
    hot = draw(st.integers(0, partitions - 1))
    loads[hot] *= draw(st.sampled_from([1, 5, 30]))
    owners = [(draw(st.integers(0, workers - 1)),) for _ in range(partitions)]
    costs = draw(st.lists(st.floats(0, 1e7), min_size=partitions, max_size=partitions))
    return loads, owners, workers, costs


@settings(max_examples=150, deadline=None)
@given(instances(), st.sampled_from(["llfd", "minmig", "mixed", "replicate"]))
def test_never_worse_than_now_valid_and_deterministic(instance, name):
    loads, owners, workers, costs = instance
    policy = make_policy(name)
    new = propose_owners(policy, loads, owners, workers, costs)
    assert new == propose_owners(make_policy(name), loads, owners, workers, costs)
    assert len(new) == len(owners)
    for o in new:
        assert o and len(set(o)) == len(o) and all(0 <= w < workers for w in o)
    assert max(owner_loads(loads, new, workers)) <= max(
        owner_loads(loads, owners, workers)) * (1 + 1e-9) + 1e-9
    if name != "replicate":
        assert all(len(o) == 1 for o in new)
    else:   # never less balanced than greedy's moves
        greedy = propose_owners(GreedyPolicy(), loads, owners, workers, costs)
        assert max(owner_loads(loads, new, workers)) <= max(
            owner_loads(loads, greedy, workers)) * (1 + 1e-9) + 1e-9


def test_replicate_makes_no_copies_where_moving_suffices():
    # greedy balances this exactly by moves; replicate must not copy anything
    loads = [3.0, 3.0, 1.0, 1.0]
    owners = [(0,), (0,), (1,), (1,)]
    new = ReplicatePolicy().propose_owners(loads, owners, 2, [10.0] * 4)
    assert all(len(o) == 1 for o in new)
    assert max(owner_loads(loads, new, 2)) == 4.0
