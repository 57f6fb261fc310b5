"""merge: union per publication, duplicates across partitions, DISJOINT set arithmetic."""

from __future__ import annotations

import numpy as np

from geops.strategies import PartialMatches, merge, pairs_to_csr


def _p(keys=(), subs=(), ex_keys=(), ex_subs=()) -> PartialMatches:
    a = [np.array(v, np.int64) for v in (keys, subs, ex_keys, ex_subs)]
    return PartialMatches(*a, candidates=len(a[0]) + len(a[2]))


def _as_dict(result):
    keys, offsets, ids = result
    return {int(k): ids[offsets[i]:offsets[i + 1]].tolist() for i, k in enumerate(keys)}


def test_union_without_duplicates_sorted():
    parts = [_p([5, 5, 9], [40, 3, 7]), _p([5, 9], [3, 2]), _p([5], [41])]
    got = merge(np.array([9, 5, 1]), parts, np.empty(0, np.int64))
    assert _as_dict(got) == {5: [3, 40, 41], 9: [2, 7]}
    keys, offsets, ids = got
    assert keys.dtype == offsets.dtype == ids.dtype == np.int64


def test_disjoint_subscriptions_minus_every_exclusion():
    disjoint = np.array([10, 20, 30])
    parts = [_p([1], [4], ex_keys=[1, 2], ex_subs=[10, 20]),
             _p([2], [5], ex_keys=[2, 1], ex_subs=[30, 10])]  # 10 excluded twice for key 1
    got = merge(np.array([1, 2, 3]), parts, disjoint)
    # key 3 reached no partition: it matches all of D
    assert _as_dict(got) == {1: [4, 20, 30], 2: [5, 10], 3: [10, 20, 30]}


def test_nothing_matched():
    keys, offsets, ids = merge(np.array([1, 2]), [_p(), _p()], np.empty(0, np.int64))
    assert len(keys) == 0 and offsets.tolist() == [0] and len(ids) == 0
    keys, offsets, ids = merge(np.array([1]), [_p(ex_keys=[1], ex_subs=[8])], np.array([8]))
    assert len(keys) == 0 and offsets.tolist() == [0]


def test_negative_and_large_keys():
    big = 2**62
    got = merge(np.array([-big, big]), [_p([big, -big, big], [-1, 2, -1])], np.array([-5]))
    assert _as_dict(got) == {-big: [-5, 2], big: [-5, -1]}


def test_pairs_to_csr_matches_a_set_per_key():
    rng = np.random.default_rng(0)
    keys = rng.integers(-50, 50, 5000)
    subs = rng.integers(-20, 20, 5000)
    want: dict[int, set[int]] = {}
    for k, s in zip(keys.tolist(), subs.tolist(), strict=True):
        want.setdefault(k, set()).add(s)
    assert _as_dict(pairs_to_csr(keys, subs)) == {k: sorted(v) for k, v in sorted(want.items())}
