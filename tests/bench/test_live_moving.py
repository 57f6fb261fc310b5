"""`geops bench live --scenario moving`: its pure pieces (the workload's two sides and the
phases that send them, rebalances per shift, the ideal run's owners, capacity against the
ideal) and the summary and report from made-up measurements. The live run itself is not run
here (two apps, minutes): docs/results/adaptive/moving records one."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

from bench.harness.phase import PhaseResult
from bench.harness.publisher import Offer
from bench.live import moving_calc, report
from bench.live.moving import summarise
from bench.live.spec import LiveSpec
from distributor.mldc import owner_loads
from distributor.policies import make_policy
from geops.workload import SkewSpec, generate_workload
from geops.workload.skew import measured_share, side_mask

# -- the workload and its phases -------------------------------------------------------------


def test_the_two_pools_put_the_hot_share_on_one_side_then_the_other():
    w = generate_workload(seed=5, subscriptions=300, publications=400,
                          skew=SkewSpec(workers=2, partitions=16, target=0.9, moving=True))
    first, second = moving_calc.split_pools(w.publications.geoms, w.skew.moved_at)
    assert len(first) == len(second) == 200
    for pool, side in ((first, w.skew.hot_side), (second, w.skew.moved_side)):
        hot, items = measured_share(w.partitioner, pool, side_mask(16, side))
        assert hot / items == pytest.approx(0.9, abs=0.02)
    assert w.skew.hot_side == list(range(8)) and w.skew.moved_side == list(range(8, 16))


def test_split_pools_refuses_a_hot_spot_that_does_not_move():
    with pytest.raises(ValueError, match="move inside"):
        moving_calc.split_pools(np.arange(10), 10)


def test_phases_alternate_between_the_two_sides():
    assert [moving_calc.pool_of_phase(k) for k in range(4)] == [0, 1, 0, 1]
    assert moving_calc.hot_workers_of_phase(0, 2, 1) == [0]
    assert moving_calc.hot_workers_of_phase(1, 2, 1) == [1]
    assert moving_calc.hot_workers_of_phase(1, 8, 2) == [4, 5]


# -- rebalances per shift --------------------------------------------------------------------


def test_phase_bounds_and_rebalances_per_phase():
    bounds = moving_calc.phase_bounds(0, [60_000, 120_000], 185_000)
    assert bounds == [(0, 60_000), (60_000, 120_000), (120_000, 185_000)]
    commands = [3_000, 64_000, 66_000, 119_999, 130_000, 184_000, 190_000]
    assert moving_calc.count_per_phase(commands, bounds) == [1, 3, 2]
    with pytest.raises(ValueError, match="must not decrease"):
        moving_calc.phase_bounds(0, [60_000, 50_000], 100_000)


@pytest.mark.parametrize(("per_phase", "ok"), [
    ([1, 1, 2], True),    # every shift followed by 1-2 rebalances
    ([0, 1, 1], True),    # phase 0 is the start, not a shift
    ([1, 0, 1], False),   # a shift not followed
    ([1, 3, 1], False),   # more than 2
    ([1], False),         # no shift at all
])
def test_following_every_shift(per_phase, ok):
    assert moving_calc.follows_every_shift(per_phase) is ok


def test_a_shift_that_left_the_stream_balanced_needs_no_rebalance():
    # the moves after the first shift left each worker part of both hot regions (MLDC 0.22)
    assert moving_calc.follows_every_shift([1, 1, 0], [0.63, 0.42, 0.22])
    assert not moving_calc.follows_every_shift([1, 1, 0], [0.63, 0.42, 0.6])
    assert not moving_calc.follows_every_shift([1, 0, 0], [0.63, 0.7, None])
    assert not moving_calc.follows_every_shift([1, 1, 3], [0.63, 0.42, 0.22])


# -- the ideal -------------------------------------------------------------------------------


def test_owners_in_force_are_the_newest_command_before():
    commands = [{"time": 100, "assignment": [1, 1, 0, 1], "replicas": []},
                {"time": 300, "assignment": [0, 1, 0, 1],
                 "replicas": [{"partition": 0, "workers": [0, 1]}]}]
    assert moving_calc.owners_in_force(commands, 100, 4, 2) == [(0,), (0,), (1,), (1,)]
    assert moving_calc.owners_in_force(commands, 200, 4, 2) == [(1,), (1,), (0,), (1,)]
    assert moving_calc.owners_in_force(commands, 301, 4, 2) == [(0, 1), (1,), (0,), (1,)]


def test_partition_loads_sum_the_window_per_partition():
    loads = [(100, 0, 5), (150, 0, 7), (160, 1, 3), (160, 1, 4), (300, 2, 9), (90, 3, 1),
             (120, 9, 1)]
    got = moving_calc.partition_loads(loads, 100, 300, 4)
    assert got.tolist() == [12, 7, 0, 0]


def test_ideal_owners_balance_the_phase_loads():
    loads = [10.0] * 8 + [1.0] * 8       # hot on worker 0's half (initial assignment)
    owners, mldc = moving_calc.ideal_owners(make_policy("greedy"), loads, 2)
    per_worker = owner_loads(loads, owners, 2)
    assert max(per_worker) == pytest.approx(44) and mldc < 0.05
    # nothing to gain: the initial owners, unchanged
    owners, _ = moving_calc.ideal_owners(make_policy("replicate"), [1.0] * 4, 2)
    assert owners == [(0,), (0,), (1,), (1,)]


def _cap(records: int, busy_s: float) -> dict:
    return {"records": records, "busy_s": busy_s,
            "per_busy_s": records / busy_s if busy_s else None}


def test_ideal_ratio_per_phase_and_overall():
    run = [_cap(1000, 2.0), _cap(1000, 1.0)]
    ideal = [_cap(1000, 1.0), _cap(1000, 1.0)]
    r = moving_calc.ideal_ratio(run, ideal)
    assert r["phases"] == [0.5, 1.0]
    assert r["run_per_busy_s"] == pytest.approx(2000 / 3) and r["ideal_per_busy_s"] == 1000
    assert r["overall"] == pytest.approx(2 / 3)
    empty = moving_calc.ideal_ratio([_cap(0, 0.0)], [_cap(10, 1.0)])
    assert empty["phases"] == [None] and empty["overall"] is None


# -- summary and report from made-up measurements --------------------------------------------


def _batch(bid: int, start: int, end: int, records: int, epoch: int = 0) -> dict:
    return {"batch_id": bid, "epoch": epoch, "start_time": start, "end_time": end,
            "records": records, "duration_ms": end - start, "job_ms": end - start - 10,
            "write_ms": 10, "join_stage_ms": end - start - 20}


def _phase(label: str, t0: int, seconds: int, batch_ms: int, epoch: int = 0) -> PhaseResult:
    """A phase at 100 publications/s in 1 s batches of ``batch_ms``; latency 200 ms."""
    batches = [_batch(i, t0 + 1000 * i, t0 + 1000 * i + batch_ms, 100, epoch)
               for i in range(seconds)]
    event = t0 + np.arange(0, seconds * 1000, 10, dtype=np.int64)
    offer = Offer(100.0, seconds, 0, len(event), t0, t0 + seconds * 1000,
                  np.full(seconds + 1, 100))
    return PhaseResult(label, "500ms", 0.7, offer, [], batches, np.arange(len(event)),
                       event, event + 200, drain_s=0.0, load=1.5)


def _command(epoch: int, time: int) -> dict:
    return {"epoch": epoch, "time": time, "assignment": [0, 1, 0, 0, 1, 1, 1, 1],
            "moves": [{"partition": 1, "from_worker": 0, "to_worker": 1}],
            "replicas": [], "mldc_before": 0.7, "mldc_predicted": 0.02, "reason": "adaptive: x"}


def test_summary_and_report_of_a_run_that_follows_both_shifts(tmp_path: Path):
    spec = LiveSpec(out=tmp_path / "out", scenario="moving", duration_s=10, shifts=2)
    run = _phase("moving hot spot (adaptive)", 0, 30, 600)
    ideal = [_phase(f"ideal phase {k}", 100_000 + 20_000 * k, 10, 500, epoch=k + 1)
             for k in range(3)]
    bounds = moving_calc.phase_bounds(0, [10_000, 20_000], 31_000)
    commands = [_command(1, 2_500), _command(2, 12_500), _command(3, 22_500)]
    moves = [{"epoch": c["epoch"], "time": c["time"] + 400, "partitions_moved": [1],
              "bytes": 250_000, "duration_ms": 300} for c in commands]
    # the hot side's 4 partitions (of 8) alternate: 0-3 in phases 0 and 2, 4-7 in phase 1
    loads = [(t, p, 30 if (p < 4) == (t // 10_000 != 1) else 10)
             for t in range(0, 30_000, 1000) for p in range(8)]
    result = summarise(spec, run, ideal, bounds, commands, moves, [2.0, 2.5], loads, 8)
    assert result["per_phase"] == [1, 1, 1] and result["follows"]
    assert result["ratio"]["overall"] == pytest.approx(500 / 600)
    assert not result["within"]
    assert [r["first_command_s"] for r in result["phases"]] == [2.5, 2.5, 2.5]
    # up to the first command: phase 0 on the initial owners (w0 360 vs w1 120), phase 1 on
    # epoch 1's (partition 1 on w1: 90 vs 390), phase 2 on epoch 2's, the same (270 vs 210)
    assert [r["mldc_at_start"] for r in result["phases"]] == pytest.approx([0.5, 0.625, 0.125])
    assert [r["loadavg_1m"] for r in result["phases"]] == [2.0, 2.5, 1.5]
    assert [c["after_shift_s"] for c in result["commands"]] == [2.5, 2.5, 2.5]
    assert result["commands"][0]["moved_bytes"] == 250_000
    names = [w["window"] for w in result["windows"]]
    assert names[:3] == ["phase 0 before", "phase 0 during", "phase 0 after"]
    assert all(w["p50"] == 200 for w in result["windows"] if w["count"])

    plans = [{"owners": [(0,), (1,), (1,), (1,)], "mldc": 0.01},
             {"owners": [(0,), (0,), (0, 1), (1,)], "mldc": None}]
    result.update({"max_rate": 140.0, "verdicts": [], "rate": 100.0, "plans": plans,
                   "ideal_moves": moves, "policy": "replicate",
                   "distributor_log": "period 1 epoch 0: ... -> rebalance\n"})
    report.write_moving(spec, result, lambda _msg: None)
    out = spec.out
    readme = (out / "README.md").read_text()
    assert "ratio **0.83**" in readme and "not met" in readme
    assert "phase 0: 1 partition(s) off their initial worker, 0 replicated, MLDC 0.010" in readme
    assert "phase 1: 1 partition(s) off their initial worker, 1 replicated, MLDC -" in readme
    for name in ("moving.csv", "windows.csv", "commands.csv", "timeline.csv", "batches.csv",
                 "ideal_moves.csv", "latency_raw.csv.xz", "distributor.log.gz", "timeline.png"):
        assert (out / name).stat().st_size > 0, name
    with open(out / "moving.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert [r["rebalances"] for r in rows] == ["1", "1", "1"]
