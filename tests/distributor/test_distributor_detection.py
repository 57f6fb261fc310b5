"""The four conditions of Section 3.2, each able to block a redistribution on its own."""

import pytest

from distributor.detection import judge
from distributor.params import Params

PARAMS = Params(threshold=0.5, min_items=1000, wait_periods=3, min_improvement=0.3)
# A period where everything holds: MLDC 0.8 -> 0.1, 5000 items, last change 3 periods ago.
GOOD = dict(mldc=0.8, mldc_predicted=0.1, period_items=5000, periods_since_change=3)


def test_all_conditions_hold():
    verdict = judge(PARAMS, **GOOD)
    assert verdict.rebalance
    assert (verdict.over_threshold, verdict.enough_items, verdict.cooled_down,
            verdict.improves_enough) == (True, True, True, True)
    assert "FAILED" not in verdict.reason


@pytest.mark.parametrize(("change", "failed", "field"), [
    (dict(mldc=0.5, mldc_predicted=0.0), "over threshold", "over_threshold"),  # not strictly >
    (dict(period_items=999), "enough items", "enough_items"),
    (dict(periods_since_change=2), "cooled down", "cooled_down"),
    (dict(mldc_predicted=0.6), "improves enough", "improves_enough"),
])
def test_each_condition_blocks_on_its_own(change, failed, field):
    verdict = judge(PARAMS, **{**GOOD, **change})
    assert not verdict.rebalance
    flags = {name: getattr(verdict, name) for name in
             ("over_threshold", "enough_items", "cooled_down", "improves_enough")}
    assert flags.pop(field) is False
    assert all(flags.values()), flags  # the other three held
    assert f"{failed} FAILED" in verdict.reason
    assert verdict.reason.count("FAILED") == 1


def test_boundaries_are_inclusive_where_the_paper_says_at_least():
    assert judge(PARAMS, **{**GOOD, "period_items": 1000}).enough_items
    assert judge(PARAMS, **{**GOOD, "periods_since_change": 3}).cooled_down
    assert not judge(PARAMS, **{**GOOD, "periods_since_change": 0}).cooled_down


def test_never_changed_counts_as_cooled_down_and_n_zero_never_waits():
    assert judge(PARAMS, **{**GOOD, "periods_since_change": None}).cooled_down
    assert judge(Params(wait_periods=0), **{**GOOD, "periods_since_change": 0}).cooled_down


def test_improvement_is_unknown_without_a_prediction_and_that_blocks():
    verdict = judge(PARAMS, **{**GOOD, "mldc_predicted": None})
    assert verdict.improves_enough is None
    assert not verdict.rebalance
    assert "improves enough unknown" in verdict.reason


def test_no_load_means_not_over_threshold():
    verdict = judge(PARAMS, None, None, 5000, None)
    assert not verdict.over_threshold and verdict.improves_enough is None
    assert "MLDC n/a" in verdict.reason


def test_params_defaults_are_table_1_and_mode_adaptive():
    p = Params()  # mode adaptive measured best; mode dynamic takes Table 1's values
    assert (p.metric, p.mode, p.threshold, p.min_items, p.wait_periods, p.min_improvement) == (
        "LB", "adaptive", 0.5, 1000, 3, 0.3)
    assert p.first_period == "min-items"  # ours; "full" is the paper's first period


@pytest.mark.parametrize("bad", [
    dict(metric="CPU"), dict(mode="auto"), dict(threshold=-0.1), dict(threshold=float("nan")),
    dict(min_items=-1), dict(min_items=1.5), dict(wait_periods=True),
    dict(min_improvement="0.3"), dict(first_period="soon"),
])
def test_params_reject_bad_values(bad):
    with pytest.raises(ValueError):
        Params(**bad)


def test_params_from_the_config_table_ignores_the_loops_keys():
    table = {"metric": "DB", "mode": "observe", "policy": "greedy", "threshold": 0.4,
             "min_items": 10, "wait_periods": 1, "period": 10.0, "min_improvement": 0.2}
    assert Params.from_settings(table) == Params("DB", "observe", 0.4, 10, 1, 0.2)
