"""The split of a run's time that explains Dynamic LB STAL's gain over Static STAL."""

from __future__ import annotations

import pytest

from bench.paper.breakdown import gain_breakdown, run_breakdown


def _batches(rid: str, mode: str, epochs: list[int], durations: list[float],
             joins: list[float], records: int = 1000, gap: float = 100.0) -> list[dict]:
    rows, t = [], 0.0
    for i, (epoch, dur, join) in enumerate(zip(epochs, durations, joins, strict=True)):
        rows.append({"run_id": rid, "pipeline": "sPS", "mode": mode, "skew": "0.9",
                     "repeat": "0", "batch_id": str(i), "epoch": str(epoch),
                     "start_ms": str(t), "end_ms": str(t + dur), "records": str(records),
                     "duration_ms": str(dur), "join_stage_ms": str(join)})
        t += dur + gap
    return rows


STATIC = _batches("sPS-StaticSTAL-s90-r0", "Static STAL", [0] * 4,
                  [3000, 2000, 2000, 2000], [1600, 1600, 1600, 1600])
DYNAMIC = _batches("sPS-DynamicLBSTAL-s90-r0", "Dynamic LB STAL", [0, 0, 1, 1],
                   [3000, 2000, 1200, 1200], [1600, 1600, 800, 800])


def _run(rid: str, mode: str) -> dict:
    return {"run_id": rid, "pipeline": "sPS", "mode": mode, "skew": "0.9", "repeat": "0"}


def test_a_run_splits_into_the_batches_before_the_move_the_steady_state_and_gaps() -> None:
    split = run_breakdown(DYNAMIC)
    assert split["batches_before"] == 2
    assert split["batch_ms_per_k"] == pytest.approx(1200)
    assert split["join_ms_per_k"] == pytest.approx(800)
    assert split["outside_ms_per_k"] == pytest.approx(400)
    assert split["extra_before_s"] == pytest.approx((3000 - 1200 + 2000 - 1200) / 1000)
    assert split["span_s"] == pytest.approx(7.7) and split["gap_s"] == pytest.approx(0.3)
    static = run_breakdown(STATIC)  # no move: the steady state skips the warm-up batch
    assert (static["batches_before"], static["batch_ms_per_k"]) == (0, pytest.approx(2000))


def test_the_gain_is_compared_with_what_balancing_the_join_alone_would_give() -> None:
    runs = [_run("sPS-StaticSTAL-s90-r0", "Static STAL"),
            _run("sPS-DynamicLBSTAL-s90-r0", "Dynamic LB STAL")]
    (row,) = gain_breakdown(runs, STATIC + DYNAMIC)
    assert row["ratio"] == pytest.approx(9.3 / 7.7)
    assert row["join_ratio"] == pytest.approx(2.0)
    assert row["steady_ratio"] == pytest.approx(2000 / 1200)
    assert row["without_start"] == pytest.approx(9.3 / (7.7 - 2.6))
    assert (row["outside_static"], row["outside_dynamic"]) == (pytest.approx(400),
                                                               pytest.approx(400))


def test_a_point_without_both_modes_is_left_out() -> None:
    assert gain_breakdown([_run("sPS-StaticSTAL-s90-r0", "Static STAL")], STATIC) == []
