"""When the app folds pending subscription changes into the static side: past the size limit
(keeping the newest changes pending under STAL), and after they have waited long enough
however small they are (STRL applies what is pending to every partition in every batch)."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from app.batch.runner import FOLD_AGE_BATCHES, REBASE_KEEP_CHANGES, BatchRunner
from geops.model import Subscriptions
from geops.strategies import build_strategy
from geops.strategies.churn import LiveSubscriptions
from geops.workload import generate_workload


class Static:
    """What ``_fold`` asks of the static side: its size, and the folds it is given."""

    total_bytes = 0

    def __init__(self):
        self.folds: list[tuple[list[int], int]] = []

    def rebase(self, deltas, seq):
        self.folds.append((sorted(deltas), seq))


def runner(join: str, fold_bytes: int) -> BatchRunner:
    w = generate_workload(seed=3, subscriptions=200, publications=10)
    r = object.__new__(BatchRunner)  # the fold policy alone: no Spark, no Kafka
    r.side = SimpleNamespace(
        live=LiveSubscriptions(build_strategy("sPIS", w.subscriptions, 8), w.subscriptions),
        static=Static())
    r.settings = SimpleNamespace(join_mode=join, fold_bytes=fold_bytes)
    r._changed_in = {}
    r._pool = generate_workload(seed=4, subscriptions=400, publications=10).subscriptions
    return r


def change(r: BatchRunner, batch_id: int, k: int) -> None:
    pool = r._pool
    rows = np.arange(k * 20, k * 20 + 20)
    r.side.live.apply(Subscriptions(pool.ids[rows] + 10_000, pool.geoms[rows],
                               pool.relations[rows]), np.empty(0, np.int64))
    r._changed_in[r.side.live.seq] = batch_id


@pytest.mark.parametrize("join", ["STAL", "STRL"])
def test_a_small_change_is_folded_once_it_has_waited(join):
    r = runner(join, 1 << 30)
    change(r, 0, 0)
    for b in range(FOLD_AGE_BATCHES):
        r._fold(b)
        assert not r.side.static.folds, f"folded at batch {b}"
    r._fold(FOLD_AGE_BATCHES)
    folds = r.side.static.folds
    assert folds == [(sorted(folds[0][0]), 1)] and not r.side.live.pending
    r._fold(FOLD_AGE_BATCHES + 1)
    assert len(r.side.static.folds) == 1 and r._changed_in == {}


@pytest.mark.parametrize("join", ["STAL", "STRL"])
def test_over_the_limit_stal_keeps_the_newest_changes_strl_none(join):
    r = runner(join, 1 << 30)
    for k in range(8):
        change(r, k, k)
    r.settings.fold_bytes = r.side.live.pending_bytes() - 1  # just over: half of it holds 3 changes
    r._fold(8)
    (_, upto), = r.side.static.folds
    keep = REBASE_KEEP_CHANGES if join == "STAL" else 0
    assert upto == 8 - keep
    assert {d.seq for ds in r.side.live.pending.values() for d in ds} == set(range(9 - keep, 9))
    assert set(r._changed_in) == set(range(9 - keep, 9))
