"""The engine beside a real-time app (BatchSummary ``join`` "real-time"): every task holds the
whole static side, reported as partition 0 of every worker, and reads its own publications
partitions. The engine reports the MLDC over the loads the tasks reported (not the even shares
of a replicated partition) and never commands, in every mode; epochs play no part."""

import pytest

from distributor import Engine, Params
from distributor.decisions import REAL_TIME_WHY
from distributor.policies import make_policy
from schemas.codec import codec
from tests.distributor.test_distributor_engine import APP, load, summary

MODES = {"dynamic": Params(mode="dynamic"), "adaptive": Params(mode="adaptive", metric="LB"),
         "observe": Params(mode="observe")}


def rt_summary(batch, workers=2):
    return {**summary(1, workers, batch=batch), "join": "real-time",
            "replicas": [{"partition": 0, "workers": list(range(workers))}]}


def play(engine, periods_of_tasks, *, first_batch=0, epoch=0):
    """Each task's period: its load of partition 0 first, then its summary, as the app writes
    them; ``periods_of_tasks`` is per task period a list of (items, ns) per task."""
    batch = first_batch
    for tasks in periods_of_tasks:
        for worker, (items, ns) in enumerate(tasks):
            assert engine.observe_load(load(0, worker, epoch=epoch, batch=batch, items=items,
                                            ns=ns)) is None
            assert engine.observe_batch({**rt_summary(batch, len(tasks)), "epoch": epoch}) is None
            batch += 1
    return batch


@pytest.mark.parametrize("mode", sorted(MODES))
def test_a_skewed_real_time_app_is_reported_by_its_tasks_loads_and_never_commanded(mode):
    engine = Engine(MODES[mode], make_policy("replicate"), app_id=APP)
    hot = [(900, 180_000_000), (100, 20_000_000)]     # task 0: 90% of items and time
    batch = 0
    for period in range(8):
        batch = play(engine, [hot] * 10, first_batch=batch)
        assert not engine.decision_due       # no batches to decide by: periods of D
        result = engine.end_period(1_000 * (period + 1))
        status = result.status
        assert result.command is None and status["decision"] == "none", status
        assert status["worker_loads"] == ([9000.0, 1000.0] if status["metric"] == "DB"
                                          else [1.8e9, 2e8])
        assert status["mldc"] == pytest.approx(0.8)
        assert status["over_threshold"] and status["mldc_predicted"] is None
        assert status["reason"].startswith("real-time app: MLDC 0.800 over its 2 tasks")
        codec().encode("DistributorStatus", status)   # exactly the Avro record
    assert engine.real_time and engine.epoch == 0 and not engine.awaiting
    assert engine.counters["real-time app"] == 1
    assert "location mismatch" not in engine.counters
    assert engine.counters["loads"] == 160


def test_the_first_loads_held_before_any_summary_count_for_a_real_time_app():
    engine = Engine(MODES["dynamic"], make_policy("greedy"), app_id=APP)
    assert engine.observe_load(load(0, 1, batch=7, items=50)) is None      # held
    assert engine.observe_batch(rt_summary(7)) is None
    play(engine, [[(30, 30_000), (0, 0)]], first_batch=8)
    status = engine.end_period(1_000).status
    assert status["worker_loads"] == [30_000.0, 50_000.0], status


def test_epochs_of_an_earlier_micro_batch_run_do_not_make_real_time_loads_stale():
    """The control topic holds epoch 5 of the same app id run in micro-batches: the real-time
    app reports epoch 0 and its loads still count; the engine commands nothing."""
    engine = Engine(MODES["dynamic"], make_policy("greedy"), app_id=APP)
    assert engine.restore(5, [0, 1, 0, 1]) is None
    play(engine, [[(400, 4_000_000), (100, 1_000_000)]] * 5)
    status = engine.end_period(1_000).status
    assert status["items"] == 2_500 and status["mldc"] == pytest.approx(0.6)
    assert status["decision"] == "none" and "stale epoch" not in engine.counters
    assert engine.highest_epoch == 5   # kept: a later micro-batch command still goes above it


def test_a_repeated_real_time_load_is_dropped_and_a_new_worker_count_relearnt():
    engine = Engine(MODES["dynamic"], make_policy("greedy"), app_id=APP)
    play(engine, [[(10, 10), (10, 10)]])
    assert engine.observe_load(load(0, 0, batch=0, items=10, ns=10)).startswith("duplicate")
    # restarted with W = 3: the loads count from its first summary (task 0's first load came
    # before it, under the old shape)
    play(engine, [[(10, 10), (10, 10), (10, 10)]] * 2, first_batch=100)
    assert engine.workers == 3 and engine.partitions == 1
    assert engine.end_period(1_000).status["worker_loads"] == [10.0, 20.0, 20.0]


def test_a_micro_batch_summary_after_real_time_ones_balances_again():
    engine = Engine(Params(mode="dynamic", metric="DB"), make_policy("greedy"), app_id=APP)
    play(engine, [[(100, 1), (100, 1)]])
    assert engine.real_time
    for b in range(3):
        assert engine.observe_batch(summary(4, 2, batch=100 + b)) is None
        for p, items in enumerate([400, 400, 100, 100]):
            assert engine.observe_load(load(p, p // 2, batch=100 + b, items=items)) is None
    assert not engine.real_time and engine.partitions == 4
    result = engine.end_period(1_000)
    assert result.status["decision"] == "rebalance" and result.command is not None


def test_the_why_names_the_tasks_and_their_partitions():
    assert "p % W == its index" in REAL_TIME_WHY and "no command" in REAL_TIME_WHY
