"""Concentrated and moving hot spots: ``--hot-partitions K`` and ``--moving-hotspot``."""

from __future__ import annotations

import json

import numpy as np
import pytest

from cli.main import main
from config.exitcodes import EXIT_OK, EXIT_USAGE
from geops.errors import ParameterError
from geops.workload import SkewSpec, generate_workload, synthetic_world
from geops.workload.skew import hot_side
from schemas.assignment import initial_assignment

SMALL = ["--world-size", "6,40,150", "--subscriptions", "300", "--publications", "500"]


@pytest.fixture(scope="module")
def world():
    return synthetic_world(5, 10, 100, 400)


def per_partition(workload, rows=slice(None)):
    _, pid = workload.partitioner.place(workload.publications.geoms[rows])
    return np.bincount(pid, minlength=workload.partitioner.num_partitions)


def test_hot_side_is_k_adjacent_partitions_of_the_hot_workers():
    assignment = initial_assignment(16, 4)
    spec = SkewSpec(workers=4, hot_workers=2, partitions=16)
    assert hot_side(assignment, spec) == list(range(8))
    assert hot_side(assignment, SkewSpec(workers=4, hot_workers=2, partitions=16,
                                         hot_partitions=3)) == [0, 1, 2]
    assert hot_side(assignment, spec, moved=True) == list(range(8, 16))
    assert hot_side(assignment, SkewSpec(workers=4, hot_workers=1, partitions=16,
                                         hot_partitions=2), moved=True) == [8, 9]


def test_hot_partitions_concentrate_the_share_in_k_partitions(world):
    spec = SkewSpec(workers=4, hot_workers=1, partitions=16, target=0.6, hot_partitions=1)
    wl = generate_workload(seed=2, subscriptions=2_000, publications=4_000, world=world,
                           skew=spec)
    counts = per_partition(wl)
    assert counts[0] / counts.sum() == pytest.approx(0.6, abs=0.01)
    assert wl.skew.measured == pytest.approx(0.6, abs=0.01)
    # the other partitions of the hot worker are not hot: the skew is in one partition
    assert counts[1:4].sum() / counts.sum() < 0.3
    assert wl.skew.to_json()["hot_side"] == [0]
    # without K the same share spreads over the hot worker's four partitions
    plain = generate_workload(seed=2, subscriptions=2_000, publications=4_000, world=world,
                              skew=SkewSpec(workers=4, hot_workers=1, partitions=16, target=0.6))
    assert per_partition(plain)[0] < counts[0]


def test_moving_hotspot_moves_half_way_to_another_workers_partitions(world):
    spec = SkewSpec(workers=4, hot_workers=1, partitions=16, target=0.7, hot_partitions=2,
                    moving=True)
    wl = generate_workload(seed=3, subscriptions=2_000, publications=4_000, world=world,
                           skew=spec)
    assert wl.skew.moved_at == 2_000
    assert wl.skew.hot_side == [0, 1] and wl.skew.moved_side == [8, 9]
    first, second = per_partition(wl, slice(0, 2_000)), per_partition(wl, slice(2_000, None))
    assert first[[0, 1]].sum() / first.sum() == pytest.approx(0.7, abs=0.01)
    assert second[[8, 9]].sum() / second.sum() == pytest.approx(0.7, abs=0.01)
    assert second[[0, 1]].sum() / second.sum() < 0.3
    assert wl.skew.measured == pytest.approx(0.7, abs=0.01)


@pytest.mark.parametrize("spec,message", [
    (SkewSpec(workers=4, target=0.5, hot_partitions=0), "hot_partitions must be >= 1"),
    (SkewSpec(workers=4, partitions=8, target=0.5, hot_partitions=9),
     "hot_partitions must be at most partitions"),
    (SkewSpec(workers=4, partitions=8, target=0.5, hot_partitions=3),
     "hot_partitions must be at most the 2 partitions of the hot_workers"),
    (SkewSpec(workers=4, hot_partitions=2), "hot_partitions needs skew"),
    (SkewSpec(workers=4, moving=True), "moving_hotspot needs skew"),
    (SkewSpec(workers=3, hot_workers=2, target=0.5, moving=True),
     "moving_hotspot needs workers >= 2 x hot_workers"),
])
def test_bad_hotspot_parameters_are_named(world, spec, message):
    with pytest.raises(ParameterError, match=message):
        generate_workload(seed=1, subscriptions=300, publications=200, world=world, skew=spec)


@pytest.mark.parametrize("args,message", [
    (["--hot-partitions", "2"], "--hot-partitions needs --skew"),
    (["--moving-hotspot"], "--moving-hotspot needs --skew"),
    (["--skew", "0.5", "--workers", "4", "--partitions", "8", "--hot-partitions", "0"],
     "--hot-partitions must be >= 1"),
    (["--skew", "0.5", "--workers", "3", "--hot-workers", "2", "--moving-hotspot"],
     "--moving-hotspot needs --workers >= 2 x --hot-workers"),
])
def test_bad_hotspot_flags_are_named(tmp_path, capsys, args, message):
    assert main(["generate", "--out", str(tmp_path), *SMALL, *args]) == EXIT_USAGE
    assert message in capsys.readouterr().err


def test_generate_writes_the_hot_side(tmp_path):
    assert main(["generate", "--out", str(tmp_path), *SMALL, "--skew", "0.5", "--workers", "4",
                 "--partitions", "8", "--hot-partitions", "1", "--moving-hotspot"]) == EXIT_OK
    skew = json.loads((tmp_path / "workload.json").read_text())["skew"]
    assert skew["hot_side"] == [0] and skew["moved_side"] == [4]
    assert skew["moved_at_publication"] == 250
    assert skew["measured"] == pytest.approx(0.5, abs=0.02)
