"""The hot-partition physical runs through the paper harness: the replicate mode's distributor
policy, hot-spot points' workloads and their order (pure: no Spark, no Kafka)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.paper.evaluation import run_order
from bench.paper.plan import HOT_SPOT, MODES, REPLICATE, RUN_MODES, full_plan
from bench.paper.runner import DistributorSettings, distributor_args
from bench.paper.workloads import WorkloadKey
from cli.main import main

THREE = ("Static STAL", "Dynamic LB STAL", REPLICATE)


def _policy(args: list[str]) -> str:
    return args[args.index("--policy") + 1]


def test_replicate_mode_runs_policy_replicate_and_the_paper_modes_greedy() -> None:
    assert REPLICATE in RUN_MODES and REPLICATE not in MODES  # not in the paper's default six
    plan = full_plan(1, ("sPIS",), (*MODES, REPLICATE), (0.9,))
    policies = {s.mode: _policy(distributor_args(s, DistributorSettings())) for s in plan}
    assert policies.pop(REPLICATE) == "replicate"
    assert set(policies.values()) == {"greedy"}
    args = distributor_args(next(s for s in plan if s.mode == REPLICATE), DistributorSettings())
    assert args[args.index("--mode") + 1] == "dynamic"
    assert args[args.index("--metric") + 1] == "LB"


def test_hot_spot_points_carry_hot_partitions_into_the_workload_and_run_id() -> None:
    plan = full_plan(1, ("sPIS", "RIhPS"), THREE, (0.7,), hot_spots=(HOT_SPOT,))
    hot = [s for s in plan if s.hot_partitions is not None]
    assert {s.pipeline for s in hot} == {"sPIS"}  # hashing spreads a hot spot: no such point
    assert len(hot) == 3 and {(s.hot_partitions, s.skew) for s in hot} == {(1, 0.8)}
    assert WorkloadKey.of(hot[0]).hot_partitions == 1
    assert hot[0].run_id == "sPIS-StaticSTAL-s80-hp1-r0"
    plain = [s for s in plan if s.hot_partitions is None and s.pipeline == "sPIS"]
    assert WorkloadKey.of(plain[0]).hot_partitions is None
    assert plain[0].run_id == "sPIS-StaticSTAL-s70-r0"  # the paper's run ids are unchanged
    assert len({s.run_id for s in plan}) == len(plan)


def test_run_order_interleaves_the_modes_within_each_point() -> None:
    plan = full_plan(3, ("sPIS",), THREE, (0.7, 0.9), hot_spots=(HOT_SPOT,))
    order = run_order(plan)
    points = [order[i:i + 3] for i in range(0, len(order), 3)]
    for point in points:  # a point's modes run back to back on one workload
        assert len({WorkloadKey.of(s) for s in point}) == 1
    assert [s.mode for s in points[0]] == list(THREE)
    assert [s.mode for s in points[3]] == list(reversed(THREE))  # repeat 1: reversed
    assert [(s.skew, s.hot_partitions) for s in (p[0] for p in points[:3])] == [
        (0.9, None), (0.7, None), (0.8, 1)]


@pytest.mark.parametrize("argv, message", [
    (["--hot-partitions", "0"], "--hot-partitions must be at least 1"),
    (["--quick", "--hot-partitions", "1"], "--hot-partitions applies to --full"),
    (["--hot-partitions", "1", "--hot-skews", "0.2"], "--hot-skews: each skew"),
    (["--modes", "Dynamic LB STAL replicat"], "--modes: unknown"),
    (["--skews", "none"], "--skews: expected numbers"),  # 'none' only with --hot-partitions
])
def test_bad_hot_spot_flags_are_usage_errors(argv: list[str], message: str, tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["bench", "paper", *argv, "--out", str(tmp_path / "out")])
    assert code == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
