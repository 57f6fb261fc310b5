"""The adaptive mode in the trace-driven simulation (bench.paper.simulate): the engine asked after
every batch, MoveReports fed back, and the moving-hotspot trace."""

from __future__ import annotations

import numpy as np
import pytest

from bench.paper.simulate import CostModel, Trace, ideal_time_s, moving, simulate_mode

MS = 1e6


def model(partitions: int = 8, move_ms: float = 50.0) -> CostModel:
    return CostModel(
        pipeline="sPS", repeat=0, cost_run="x", subscriptions=10, partitions=partitions,
        batch_records=10, ns_per_item=np.full(partitions, 1 * MS),
        build_ns=np.full(partitions, 2 * MS), overhead_ms={"STAL": 100.0},
        move_ms=move_ms, move_source="test", physical_items=np.ones(partitions),
        physical_publications=10, physical_workers=2)


def trace(items: list[int], cycles: int) -> Trace:
    return Trace(np.array([items], np.int64), np.array([sum(items)]),
                 np.full(len(items), 100_000, np.int64), cycles)


SKEWED = [400, 400, 400, 400, 50, 50, 50, 50]   # P = 8 on W = 2: 89 % on worker 0


def test_adaptive_rebalances_a_skewed_trace_once_and_beats_static():
    t = trace(SKEWED, 30)
    static = simulate_mode(t, model(), "Static STAL", workers=2)
    adaptive = simulate_mode(t, model(), "Adaptive STAL", workers=2)
    assert len(adaptive.commands) == 1 and adaptive.moved_partitions >= 1
    assert adaptive.throughput > 1.4 * static.throughput
    assert len(adaptive.statuses) == 30                  # judged after every batch
    assert {s["mode"] for s in adaptive.statuses} == {"adaptive"}
    # the move was reported back: the decisions after it price moves from it
    assert "1 move(s) seen" in adaptive.statuses[-1]["reason"] or (
        "nothing better" in adaptive.statuses[-1]["reason"])


def test_adaptive_leaves_a_balanced_trace_alone():
    run = simulate_mode(trace([100] * 8, 30), model(), "Adaptive STAL", workers=2)
    assert run.commands == []


def test_moving_swaps_the_hot_workers_partitions_half_way():
    t = moving(trace(SKEWED, 4), workers=4, hot_workers=1)
    # P = 8 on W = 4: worker 0 owns partitions 0-1, worker 2 owns 4-5
    assert t.cycles == 1 and t.items.shape == (4, 8)
    assert t.items[:2].tolist() == [SKEWED] * 2
    assert t.items[2:].tolist() == [[50, 50, 400, 400, 400, 400, 50, 50]] * 2
    assert t.items.sum() == 4 * sum(SKEWED)


def test_adaptive_follows_a_moving_hotspot():
    hot = [800, 800, 50, 50, 50, 50, 50, 50]   # worker 0 of 4 (partitions 0, 1) is hot
    t = moving(trace(hot, 40), workers=4, hot_workers=1)
    run = simulate_mode(t, model(), "Adaptive STAL", workers=4)
    assert 2 <= len(run.commands) <= 4
    assert run.throughput > 0.8 * run.publications / ideal_time_s(t, model(), 4)


@pytest.mark.parametrize("mode", ["Static STAL", "Dynamic LB STAL"])
def test_the_other_modes_are_judged_by_period_as_before(mode):
    run = simulate_mode(trace(SKEWED, 30), model(), mode, workers=2, period_s=5.0)
    assert {s["mode"] for s in run.statuses} == {"observe" if mode.startswith("Static")
                                                 else "dynamic"}
    assert len(run.statuses) == int(run.time_s // 5.0)   # one per period D, not per batch
