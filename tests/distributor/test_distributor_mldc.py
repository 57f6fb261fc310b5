"""MLDC arithmetic (Section 3.2): LDC_i = (L_i - mean L) / mean L, MLDC = max LDC_i."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from distributor.mldc import assignment_mldc, load_distances, mldc, worker_loads


def test_worker_loads_sums_each_workers_partitions_and_keeps_idle_workers():
    assert worker_loads([5, 1, 2, 7], [0, 2, 0, 2], 4) == [7.0, 0.0, 8.0, 0.0]


def test_worker_loads_rejects_mismatched_lengths():
    with pytest.raises(ValueError, match="3 partition loads"):
        worker_loads([1, 2, 3], [0, 1], 2)


def test_paper_figure_2_start_is_three_times_the_others():
    # 60/20/20: mean 33.3, LDC = (1.0, -0.4, -0.4), MLDC = 0.8
    assert load_distances([60, 20, 20]) == pytest.approx([0.8, -0.4, -0.4])
    assert mldc([60, 20, 20]) == pytest.approx(0.8)


def test_two_workers_one_carrying_75_percent():
    assert mldc([75, 25]) == pytest.approx(0.5)
    assert mldc([80, 20]) == pytest.approx(0.6)


def test_balanced_is_zero_and_all_on_one_worker_is_w_minus_one():
    assert mldc([3, 3, 3]) == 0.0
    assert mldc([0, 0, 0, 12]) == pytest.approx(3.0)


def test_idle_workers_count_in_the_mean():
    assert mldc([10, 10, 0, 0]) == pytest.approx(1.0)


def test_undefined_without_load():
    assert mldc([0, 0]) is None
    assert mldc([]) is None
    assert load_distances([0.0, 0.0, 0.0]) is None


def test_assignment_mldc_uses_the_assignment():
    loads = [30, 30, 20, 20]
    assert assignment_mldc(loads, [0, 0, 1, 1], 2) == pytest.approx(0.2)
    assert assignment_mldc(loads, [0, 1, 0, 1], 2) == 0.0


@given(st.lists(st.floats(0, 1e12), min_size=1, max_size=64))
def test_mldc_is_scale_free_and_between_zero_and_w_minus_one(loads):
    value = mldc(loads)
    if sum(loads) <= 0:
        assert value is None
        return
    assert -1e-9 <= value <= len(loads) - 1 + 1e-9
    assert mldc([x * 7 for x in loads]) == pytest.approx(value, abs=1e-9)
