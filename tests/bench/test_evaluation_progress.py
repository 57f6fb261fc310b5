"""The evaluation (``bench.paper.evaluation``): how long the rest of the plan will take, and
the order runs go in."""

from __future__ import annotations

import pytest

from bench.paper import evaluation


def test_time_to_go_extrapolates_the_mean_run_so_far(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(evaluation.time, "monotonic", lambda: 1000.0)
    assert evaluation._eta(1000.0 - 120, 1, 288) == "; about 9.6 h to go"  # 287 runs x 120 s
    assert evaluation._eta(1000.0 - 240, 2, 4) == "; about 4 min to go"
    assert evaluation._eta(1000.0 - 240, 4, 4) == ""


def test_odd_repeats_run_a_points_modes_in_reverse_so_drift_does_not_favour_one() -> None:
    from bench.paper.plan import MODES, full_plan

    plan = full_plan(repeats=2, pipelines=("sPS", "sPIS"), skews=(0.5, 0.9))
    order = evaluation.run_order(plan)
    assert len(order) == len(plan) and set(order) == set(plan)
    points = [(s.repeat, s.skew, s.pipeline) for s in order]
    assert len(points) == len({p: None for p in points}) * len(MODES)
    assert all(len(set(points[i:i + len(MODES)])) == 1 for i in range(0, len(points), len(MODES)))
    first = [s.mode for s in order if (s.repeat, s.skew, s.pipeline) == (0, 0.9, "sPS")]
    second = [s.mode for s in order if (s.repeat, s.skew, s.pipeline) == (1, 0.9, "sPS")]
    assert first == list(MODES) and second == list(reversed(MODES))


def test_a_repeat_runs_its_highest_skew_then_the_balanced_one() -> None:
    """The 'kept' target divides the highest skew by the balanced one: measure them together."""
    from bench.paper.plan import full_plan

    plan = full_plan(repeats=2, pipelines=("sPS",), skews=(0.5, 0.6, 0.7, 0.8, 0.9))
    skews = [(s.repeat, s.skew) for s in evaluation.run_order(plan)]
    seen = list(dict.fromkeys(skews))
    assert seen == [(r, k) for r in (0, 1) for k in (0.9, 0.5, 0.6, 0.7, 0.8)]
    resumed = [s for s in plan if s.skew in (0.6, 0.8)]  # what is left decides, not the plan
    assert list(dict.fromkeys(s.skew for s in evaluation.run_order(resumed))) == [0.8, 0.6]
