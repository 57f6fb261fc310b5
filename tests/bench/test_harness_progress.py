"""The harness: how long the rest of the plan will take, and the order runs go in."""

from __future__ import annotations

import pytest

from bench.paper import harness


def test_time_to_go_extrapolates_the_mean_run_so_far(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(harness.time, "monotonic", lambda: 1000.0)
    assert harness._eta(1000.0 - 120, 1, 288) == "; about 9.6 h to go"  # 287 runs x 120 s
    assert harness._eta(1000.0 - 240, 2, 4) == "; about 4 min to go"
    assert harness._eta(1000.0 - 240, 4, 4) == ""


def test_odd_repeats_run_a_points_modes_in_reverse_so_drift_does_not_favour_one() -> None:
    from bench.paper.plan import MODES, full_plan

    plan = full_plan(repeats=2, pipelines=("sPS", "sPIS"), skews=(0.5, 0.9))
    order = harness.run_order(plan)
    assert len(order) == len(plan) and set(order) == set(plan)
    points = [(s.repeat, s.skew, s.pipeline) for s in order]
    assert points == sorted(points)  # grouped by workload, each point's runs together
    first = [s.mode for s in order if (s.repeat, s.skew, s.pipeline) == (0, 0.9, "sPS")]
    second = [s.mode for s in order if (s.repeat, s.skew, s.pipeline) == (1, 0.9, "sPS")]
    assert first == list(MODES) and second == list(reversed(MODES))
