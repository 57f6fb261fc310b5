"""The harness's progress line says how long the rest of the plan will take."""

from __future__ import annotations

import pytest

from bench.paper import harness


def test_time_to_go_extrapolates_the_mean_run_so_far(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(harness.time, "monotonic", lambda: 1000.0)
    assert harness._eta(1000.0 - 120, 1, 288) == "; about 9.6 h to go"  # 287 runs x 120 s
    assert harness._eta(1000.0 - 240, 2, 4) == "; about 4 min to go"
    assert harness._eta(1000.0 - 240, 4, 4) == ""
