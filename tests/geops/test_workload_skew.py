"""Skewed streams: the hot share the app will see (its own partitioner, initial assignment)."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
import shapely

from cli.main import main
from config.exitcodes import EXIT_OK, EXIT_USAGE
from geops.errors import ParameterError
from geops.partitioning import build_partitioner
from geops.workload import LAYERS, SkewSpec, generate_workload, measured_skew, synthetic_world
from schemas.assignment import initial_assignment

# (S, H, W, P): the paper's 3-of-16 shape and a two-worker machine.
CASES = [(0.5, 1, 2, 16), (0.7, 1, 2, 16), (0.9, 1, 2, 16), (0.3, 3, 16, 64),
         (0.5, 3, 16, 64)]


@pytest.fixture(scope="module")
def world():
    return synthetic_world(4, 12, 150, 600)


def _app_view(w, kind, partitions, workers, hot_workers):
    """The hot share as the app computes it: its partitioner from the same subscriptions."""
    p = build_partitioner(kind, w.subscriptions, partitions, sample_seed=0)
    return measured_skew(p, w.publications.geoms, initial_assignment(p.num_partitions, workers),
                         hot_workers)


@pytest.mark.parametrize("kind", ["kdbtree", "quadtree", "grid"])
@pytest.mark.parametrize("target,hot,workers,partitions", CASES)
def test_measured_skew_is_within_0_02_of_the_target(world, kind, target, hot, workers,
                                                    partitions):
    spec = SkewSpec(workers=workers, hot_workers=hot, partitions=partitions, partitioner=kind,
                    target=target)
    w = generate_workload(seed=1, subscriptions=1_000, publications=3_000, world=world,
                          skew=spec)
    seen = _app_view(w, kind, partitions, workers, hot)
    assert seen == pytest.approx(target, abs=0.02)
    assert w.skew.measured == pytest.approx(seen, abs=1e-12)
    lo, hi = w.skew.reachable
    assert lo <= target <= hi


def test_skew_keeps_the_publication_mix_and_the_subscriptions(world):
    plain = generate_workload(seed=2, subscriptions=500, publications=2_000, world=world)
    spec = SkewSpec(workers=2, partitions=16, target=0.9)
    skewed = generate_workload(seed=2, subscriptions=500, publications=2_000, world=world,
                               skew=spec)
    assert skewed.publication_layers.tolist() == plain.publication_layers.tolist()
    assert (skewed.subscriptions.geoms == plain.subscriptions.geoms).all()
    assert (skewed.subscriptions.relations == plain.subscriptions.relations).all()


@pytest.mark.parametrize("kind", ["kdbtree", "quadtree"])
def test_every_publication_kind_is_skewed_alike(world, kind):
    spec = SkewSpec(workers=16, hot_workers=3, partitions=64, partitioner=kind, target=0.6)
    w = generate_workload(seed=3, subscriptions=1_000, publications=4_000, world=world,
                          skew=spec)
    hot = set(w.skew.hot_partitions)
    for layer in ("point", *LAYERS):
        _, pid = w.partitioner.place(w.publications.geoms[w.publication_layers == layer])
        assert np.isin(pid, list(hot)).mean() == pytest.approx(0.6, abs=0.02), layer
    # Hot points are drawn from the population, not one extreme location repeated.
    points = w.publications.geoms[w.publication_layers == "point"]
    assert len(set(shapely.to_wkb(points))) > 0.8 * len(points)


def test_without_a_target_the_natural_hot_share_is_measured(world):
    spec = SkewSpec(workers=2, partitions=16, partitioner="quadtree")
    w = generate_workload(seed=0, subscriptions=800, publications=1_500, world=world, skew=spec)
    assert w.skew.reachable is None
    assert w.skew.measured == pytest.approx(_app_view(w, "quadtree", 16, 2, 1), abs=1e-12)
    # Measuring does not change the stream: it still follows the population.
    plain = generate_workload(seed=0, subscriptions=800, publications=1_500, world=world)
    assert shapely.to_wkb(plain.publications.geoms).tolist() == \
        shapely.to_wkb(w.publications.geoms).tolist()


@pytest.mark.parametrize("kind", ["kdbtree", "quadtree"])
def test_near_one_with_polygons_spanning_hot_and_cold_cells(kind):
    # Two huge areas: every area publication spans hot and cold cells, so a hot share near 1
    # needs the points (and small polygons) to make up for them.
    big = synthetic_world(6, 2, 40, 300)
    spec = SkewSpec(workers=16, hot_workers=1, partitions=16, partitioner=kind, target=0.5)
    lo, hi = generate_workload(seed=0, subscriptions=600, publications=3_000, world=big,
                               skew=spec).skew.reachable
    assert hi < 1.0
    for target in (lo, hi - 0.03, hi):
        spec = SkewSpec(workers=16, hot_workers=1, partitions=16, partitioner=kind,
                        target=target)
        w = generate_workload(seed=0, subscriptions=600, publications=3_000, world=big,
                              skew=spec)
        assert _app_view(w, kind, 16, 16, 1) == pytest.approx(target, abs=0.005)
    spec = SkewSpec(workers=16, hot_workers=1, partitions=16, partitioner=kind,
                    target=min(1.0, hi + 0.01))
    with pytest.raises(ParameterError, match=r"is unreachable: .* can only range over "
                                             r"\[\d\.\d{4}, \d\.\d{4}\]"):
        generate_workload(seed=0, subscriptions=600, publications=3_000, world=big, skew=spec)


def test_cli_writes_requested_and_measured_skew(tmp_path, capsys):
    code = main(["generate", "--out", str(tmp_path), "--world-size", "12,150,600",
                 "--subscriptions", "800", "--publications", "2000", "--skew", "0.7",
                 "--workers", "2", "--partitions", "16", "--partitioner", "quadtree"])
    assert code == EXIT_OK
    doc = json.loads((tmp_path / "workload.json").read_text())
    skew = doc["skew"]
    assert skew["requested"] == 0.7 and abs(skew["measured"] - 0.7) <= 0.02
    assert (skew["hot_workers"], skew["workers"], skew["partitioner"]) == (1, 2, "quadtree")
    assert skew["balanced"] == 0.5
    assert skew["hot_partitions"] == [p for p in range(skew["num_partitions"])
                                      if p * 2 // skew["num_partitions"] < 1]
    out = capsys.readouterr().out
    assert re.search(r"skew: measured 0\.\d{4} \(requested 0\.7; balanced 0\.5000", out)


def test_cli_refuses_an_unreachable_skew_and_a_missing_worker_count(tmp_path, capsys):
    args = ["generate", "--out", str(tmp_path), "--world-size", "2,40,300",
            "--subscriptions", "300", "--publications", "500", "--point-share", "0",
            "--workers", "16", "--partitions", "16"]
    assert main([*args, "--skew", "1.0"]) == EXIT_USAGE
    assert "--skew 1.0 is unreachable" in capsys.readouterr().err
    assert main(["generate", "--out", str(tmp_path), "--skew", "0.5"]) == EXIT_USAGE
    assert "--skew needs --workers" in capsys.readouterr().err
