"""bench.studies.hot_split: replication vs splitting of a hot partition, on small generated data."""

from __future__ import annotations

import gzip

import numpy as np
import pytest
import shapely

from bench.studies import hot_split
from geops.model import Publications, Subscriptions
from geops.partitioning.kdbtree import build_kdbtree


def test_candidate_pairs_are_the_envelope_intersections() -> None:
    rng = np.random.default_rng(4)
    lo = rng.uniform(0, 10, (40, 2))
    subs = shapely.box(lo[:, 0], lo[:, 1], lo[:, 0] + 1.5, lo[:, 1] + 1.5)
    items = shapely.points(rng.uniform(0, 11, (60, 2)))
    brute = sum(shapely.intersects(shapely.box(*shapely.bounds(s)), i)
                for s in subs for i in items)
    assert hot_split.candidate_pairs(subs, items) == brute
    assert hot_split.candidate_pairs(subs[:0], items) == 0


@pytest.fixture(scope="module")
def divisions() -> list[hot_split.Division]:
    return hot_split.measure([1], [0.8], subscriptions=2_000, publications=8_000, workers=2,
                             partitions=16, ks=(2, 4), log=lambda _m: None)


def test_every_way_of_dividing_is_measured_once_per_k(divisions) -> None:
    got = sorted((d.method, d.k) for d in divisions)
    assert got == sorted((m, k) for k in (2, 4) for m in
                         ("replicate", "split-subscriptions", "split-items", "split-load"))
    assert len({(d.items, d.subscriptions, d.partition_bytes) for d in divisions}) == 1
    assert divisions[0].items > 0.5 * 8_000  # the hot partition holds the skewed share


def test_replicas_hold_whole_copies_and_split_the_items_evenly(divisions) -> None:
    for d in (d for d in divisions if d.method == "replicate"):
        assert d.held_over_partition == pytest.approx(d.k)
        assert d.shipped_bytes == (d.k - 1) * d.partition_bytes
        assert 1.0 <= d.max_over_mean < 1.1


def test_children_hold_every_subscription_at_least_once(divisions) -> None:
    for d in (d for d in divisions if d.method.startswith("split")):
        assert 1.0 <= d.held_over_partition <= d.k
        assert 0 < d.shipped_bytes < d.held_over_partition * d.partition_bytes
        assert d.max_over_mean >= 1.0


def test_children_split_the_candidate_pairs_without_losing_any() -> None:
    # a 4 x 4 grid of unit boxes and points inside: every child keeps its items' candidates
    x, y = np.meshgrid(np.arange(4.0), np.arange(4.0))
    subs = Subscriptions(np.arange(16), shapely.box(x.ravel(), y.ravel(), x.ravel() + 1,
                                                   y.ravel() + 1), np.zeros(16, np.int8))
    pts = shapely.points(np.column_stack([x.ravel() + 0.5, y.ravel() + 0.5]))
    pubs = Publications(np.arange(16), pts, np.zeros(16, np.int64))
    one = build_kdbtree(np.array([[2.0, 2.0]]), np.array([0.0, 0.0, 4.0, 4.0]), 1)
    rows = hot_split.divide(subs, pubs, one, [2])
    for d in rows:
        assert d.items == 16 and d.subscriptions == 16
        if d.method != "replicate":  # a clean split: boxes on one side, 8 pairs each
            assert d.max_over_mean == pytest.approx(1.0)


def test_the_command_writes_its_files_and_rejects_bad_flags(tmp_path, capsys) -> None:
    hot_split.main(["--seeds", "2", "--skews", "0.7", "--ways", "2", "--subscriptions", "1500",
                    "--publications", "5000", "--partitions", "8", "--out", str(tmp_path)])
    assert "| 0.7 | 2 | replicate |" in capsys.readouterr().out
    with gzip.open(tmp_path / "divisions.csv.gz", "rt") as f:
        assert len(f.read().splitlines()) == 1 + 4
    assert (tmp_path / "summary.csv").exists()
    for flag, value in (("--skews", "1.5"), ("--skews", "x"), ("--ways", "0"),
                        ("--workers", "1"), ("--seeds", "a")):
        with pytest.raises(SystemExit):
            hot_split.main([flag, value, "--out", str(tmp_path)])
        assert flag in capsys.readouterr().err
