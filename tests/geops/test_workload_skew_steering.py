"""The skew steering on its own: reachable range, candidate sides, the greedy, the measurement."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import shapely

from geops.workload.skew import hot_mask, measured_skew, reachable, sides, steer


def _brute_force(kinds, counts):
    """Extreme hot shares when each kind repeats one of its candidates (which is optimal)."""
    ratios = []
    for pick in itertools.product(*[range(len(h)) for h, _ in kinds]):
        hot = sum(c * h[j] for (h, _), j, c in zip(kinds, pick, counts, strict=True))
        items = sum(c * n[j] for (_, n), j, c in zip(kinds, pick, counts, strict=True))
        ratios.append(hot / items)
    return min(ratios), max(ratios)


@pytest.mark.parametrize("seed", range(30))
def test_reachable_range_is_the_exact_optimum(seed):
    rng = np.random.default_rng(seed)
    kinds, counts = [], []
    for _ in range(rng.integers(1, 4)):
        n = rng.integers(1, 12, size=rng.integers(1, 5))
        h = rng.integers(0, n + 1)
        kinds.append((h, n))
        counts.append(int(rng.integers(1, 50)))
    lo, hi = reachable([h for h, _ in kinds], [n for _, n in kinds], counts)
    assert (lo, hi) == pytest.approx(_brute_force(kinds, counts), abs=1e-12)


def test_reachable_prefers_small_spanning_polygons_to_big_ones_with_the_same_ratio():
    # Ten fully hot points; areas either (9 of 10 hot) or (45 of 50 hot): both 0.9, but the
    # smaller one dilutes the points less.
    lo, hi = reachable([np.array([1]), np.array([9, 45])], [np.array([1]), np.array([10, 50])],
                       [10, 1])
    assert hi == pytest.approx(19 / 20)
    assert lo == pytest.approx(55 / 60)


def test_candidates_without_items_are_never_used():
    lo, hi = reachable([np.array([0, 1])], [np.array([0, 1])], [5])
    assert (lo, hi) == (1.0, 1.0)
    up, down = sides(np.array([0, 1, 0]), np.array([0, 1, 1]), 0.5)
    assert up.tolist() == [1] and down.tolist() == [2]


def test_sides_split_at_the_target_and_fall_back_to_the_least_shortfall():
    h, n = np.array([0, 3, 4, 9, 1]), np.array([1, 4, 4, 10, 2])
    up, down = sides(h, n, 0.75)
    assert up.tolist() == [1, 2, 3] and down.tolist() == [0, 1, 4]
    # extreme: only the candidates with the largest / smallest h - 0.75 n.
    up, down = sides(h, n, 0.75, extreme=True)
    assert up.tolist() == [3] and down.tolist() == [0]
    # Nothing reaches 0.95: the raising side is the candidate with the largest h - 0.95 n
    # (9 of 10 hot beats 3 of 4 hot).
    up, down = sides(h[[0, 1, 3, 4]], n[[0, 1, 3, 4]], 0.95)
    assert up.tolist() == [2] and down.tolist() == [0, 1, 2, 3]


@pytest.mark.parametrize("target", [0.0, 0.1, 0.5, 0.83, 0.999, 1.0])
def test_steer_lands_on_the_target(target):
    rng = np.random.default_rng(1)
    m = 5_000
    n_up, n_down = rng.integers(1, 20, m), rng.integers(1, 20, m)
    h_up = np.where(rng.random(m) < 0.5, n_up, np.ceil(target * n_up)).astype(np.int64)
    h_down = np.floor(target * n_down * rng.random(m)).astype(np.int64)
    take = steer(target, h_up, n_up, h_down, n_down)
    hot = np.where(take, h_up, h_down).sum()
    items = np.where(take, n_up, n_down).sum()
    assert hot / items == pytest.approx(target, abs=20 / items)
    assert 0 < take.sum() < m or target in (0.0, 1.0)


class _Fixed:
    """A partitioner stub: geometry i goes to the partitions listed for it."""

    def __init__(self, cells):
        self.cells = cells
        self.num_partitions = 4

    def place(self, geoms):
        cells = self.cells[:len(geoms)]
        gi = np.repeat(np.arange(len(geoms)), [len(c) for c in cells])
        return gi, np.array([p for c in cells for p in c], dtype=np.int32)


def test_measured_skew_counts_items_not_publications():
    # Worker 0 owns partitions 0 and 1 of the contiguous assignment [0, 0, 1, 1].
    part = _Fixed([[0], [2], [1, 2, 3]])
    geoms = np.array([shapely.Point(0, 0)] * 3, dtype=object)
    assert hot_mask([0, 0, 1, 1], 1).tolist() == [True, True, False, False]
    assert measured_skew(part, geoms, [0, 0, 1, 1], 1) == pytest.approx(2 / 5)
    with pytest.raises(ValueError, match="empty stream"):
        measured_skew(part, geoms[:0], [0, 0, 1, 1], 1)
