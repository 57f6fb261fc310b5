"""Trace replay through the real engine: the decision logic a simulation will reuse."""

import random

import pytest

from distributor import GreedyPolicy, Params, replay
from distributor.errors import ReplayInputError
from distributor.mldc import worker_loads
from schemas.assignment import initial_assignment


def skewed_trace(periods, partitions, workers, hot_workers, hot_share, seed=0, jitter=0.2):
    """Per-period item counts and processing times where ``hot_workers`` of the initial
    assignment carry ``hot_share`` of the load; each partition varies by +-``jitter``."""
    rng = random.Random(seed)
    start = initial_assignment(partitions, workers)
    hot = [p for p in range(partitions) if start[p] < hot_workers]
    base = [hot_share / len(hot) if p in hot else (1 - hot_share) / (partitions - len(hot))
            for p in range(partitions)]
    items = [[round(2000 * partitions * b * rng.uniform(1 - jitter, 1 + jitter)) for b in base]
             for _ in range(periods)]
    ns = [[n * 50_000 for n in row] for row in items]  # ~50 us per item
    return items, ns


def test_skewed_two_workers_rebalance_exactly_once_then_stay_below_threshold():
    items, ns = skewed_trace(40, 8, 2, hot_workers=1, hot_share=0.8)
    share = worker_loads(ns[0], initial_assignment(8, 2), 2)
    assert share[0] >= 0.75 * sum(share)
    result = replay(items, ns, workers=2)
    assert len(result.commands) == 1
    when = next(i for i, s in enumerate(result.statuses) if s["decision"] == "rebalance")
    assert result.mldc[when] > 0.5
    after = result.mldc[when + 1:]
    assert len(after) >= 30 and all(m is not None and m < 0.5 for m in after)
    assert all(a == result.commands[0]["assignment"] for a in result.assignments[when + 1:])
    assert [s["period"] for s in result.statuses] == list(range(40))


def test_the_same_trace_in_observe_mode_never_commands():
    items, ns = skewed_trace(40, 8, 2, hot_workers=1, hot_share=0.8)
    result = replay(items, ns, workers=2, params=Params(mode="observe"))
    assert result.commands == []
    assert all(s["decision"] == "observe" for s in result.statuses)
    assert all(m > 0.5 for m in result.mldc)


def test_paper_scale_sixteen_workers_three_hot():
    # the paper's skew coefficient: share of the stream on partitions of 3 of 16 workers
    items, ns = skewed_trace(30, 128, 16, hot_workers=3, hot_share=0.5, seed=3)
    result = replay(items, ns, workers=16)
    assert len(result.commands) == 1
    command = result.commands[0]
    assert command["mldc_before"] > 1.5 and command["mldc_predicted"] < 0.2
    when = next(i for i, s in enumerate(result.statuses) if s["decision"] == "rebalance")
    assert all(m < 0.5 for m in result.mldc[when + 1:])


def test_db_metric_needs_only_item_counts_and_lb_needs_times():
    items, _ = skewed_trace(10, 8, 2, hot_workers=1, hot_share=0.8)
    result = replay(items, workers=2, params=Params(mode="dynamic", metric="DB"),
                    policy=GreedyPolicy())
    assert len(result.commands) == 1 and result.commands[0]["metric"] == "DB"
    with pytest.raises(ValueError, match="LB needs processing_ns"):
        replay(items, workers=2)


def test_replay_checks_its_trace():
    assert replay([], workers=2, params=Params(mode="dynamic", metric="DB")).statuses == []
    with pytest.raises(ReplayInputError, match="period 1 has 3 partitions"):
        replay([[1, 2, 3, 4], [1, 2, 3]], workers=2, params=Params(mode="dynamic", metric="DB"))
    with pytest.raises(ReplayInputError, match="period 0, partition 0: malformed"):
        replay([[-1, 2]], workers=2, params=Params(mode="dynamic", metric="DB"))


def test_a_trickle_at_the_end_of_a_stream_does_not_trigger_a_second_rebalance():
    """M applies to the period judged: a 4-item period after a balanced epoch is not evidence."""
    skew = [100] * 4 + [10] * 4
    result = replay([skew] * 7 + [[0, 3, 1, 0, 0, 0, 0, 0]], workers=2,
                    params=Params(mode="dynamic", metric="DB", min_items=400, wait_periods=2))
    assert len(result.commands) == 1
    assert result.statuses[-1]["enough_items"] is False
