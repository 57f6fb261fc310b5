"""The engine the service drives: input checks, periods, epochs, conditions, modes, records."""

import json
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from distributor import Engine, GreedyPolicy, Params
from distributor.mldc import worker_loads
from schemas.assignment import initial_assignment, moves_between
from schemas.codec import SCHEMA_DIR, codec

APP = "app-1"
DB = Params(mode="dynamic", metric="DB")  # item counts: loads are easy to read in the tests
SKEW = [400, 400, 100, 100]  # under the initial assignment [0, 0, 1, 1]: 80% on worker 0


def load(partition, worker, *, epoch=0, batch=0, items=100, ns=None, app=APP, **extra):
    return {"app_id": app, "batch_id": batch, "epoch": epoch, "partition": partition,
            "worker": worker, "items": items,
            "processing_ns": items * 1000 if ns is None else ns, "time": 1_000, **extra}


def summary(partitions=4, workers=2, *, epoch=0, batch=0, app=APP):
    return {"app_id": app, "batch_id": batch, "epoch": epoch, "strategy": "sPS",
            "join": "STAL", "workers": workers, "partitions": partitions}


def report(engine, items, *, epoch=None, batch=0, assignment=None):
    """Play the app: one batch under ``epoch`` with the given item count per partition."""
    epoch = engine.epoch if epoch is None else epoch
    assignment = assignment or engine.assignment
    assert engine.observe_batch(summary(len(items), engine.workers, epoch=epoch,
                                        batch=batch)) in (None, f"stale epoch: batch of epoch "
                                                          f"{epoch}, in force {engine.epoch}")
    return [engine.observe_load(load(p, assignment[p], epoch=epoch, batch=batch, items=n))
            for p, n in enumerate(items)]


def skewed_for(assignment, hot=0):
    """Loads that put 80% on ``hot`` under ``assignment`` (4 partitions, 2 workers)."""
    return [400 if w == hot else 100 for w in assignment]


def new_engine(params=DB, **kwargs):
    engine = Engine(params, GreedyPolicy(), app_id=APP, **kwargs)
    assert engine.observe_batch(summary()) is None
    return engine


# -- records are exactly the Avro schemas ------------------------------------------------------

def schema_fields(name):
    return [f["name"] for f in json.loads(Path(SCHEMA_DIR, f"{name}.avsc").read_text())["fields"]]


def assert_is_record(name, record):
    assert list(record) == schema_fields(name)
    assert codec().decode_as(name, codec().encode(name, record)) == record


def test_status_and_command_are_exactly_the_avro_records():
    engine = new_engine()
    report(engine, SKEW)
    result = engine.end_period(5_000)
    assert_is_record("DistributorStatus", result.status)
    assert_is_record("RebalanceCommand", result.command)
    waiting = engine.end_period(6_000).status
    assert_is_record("DistributorStatus", waiting)
    assert waiting["mldc"] is None and waiting["improves_enough"] is None


# -- one rebalance, end to end -----------------------------------------------------------------

def test_skew_triggers_a_command_with_full_assignment_and_moves():
    engine = new_engine()
    assert report(engine, SKEW) == [None] * 4
    result = engine.end_period(5_000)
    status, command = result.status, result.command
    assert (status["decision"], status["epoch"], status["period"]) == ("rebalance", 0, 0)
    assert status["worker_loads"] == [800.0, 200.0]
    assert status["mldc"] == pytest.approx(0.6) and status["items"] == 1000
    assert command["epoch"] == 1 and command["time"] == 5_000 and command["app_id"] == APP
    new = command["assignment"]
    assert len(new) == 4 and worker_loads(SKEW, new, 2) == [500.0, 500.0]
    assert [(m["partition"], m["from_worker"], m["to_worker"]) for m in command["moves"]] == (
        moves_between(initial_assignment(4, 2), new))
    assert command["mldc_before"] == pytest.approx(0.6)
    assert command["mldc_predicted"] == pytest.approx(0.0)
    assert command["metric"] == "DB" and "0.600" in command["reason"]
    assert engine.epoch == 1 and engine.assignment == new and engine.awaiting


def test_after_a_command_it_waits_for_the_apps_new_epoch_and_never_mixes_old_loads():
    engine = new_engine()
    report(engine, SKEW)
    command = engine.end_period(5_000).command
    # the app still runs epoch 0 for a while: those loads are ignored
    old = report(engine, SKEW, epoch=0, batch=1, assignment=initial_assignment(4, 2))
    assert all(r.startswith("stale epoch: load of epoch 0, in force 1") for r in old)
    status = engine.end_period(6_000).status
    assert status["decision"] == "waiting" and "epoch 1" in status["reason"]
    assert status["worker_loads"] == [0.0, 0.0] and status["mldc"] is None
    # the app switches mid-period: only the epoch-1 batch counts
    report(engine, SKEW, epoch=0, batch=2, assignment=initial_assignment(4, 2))
    assert report(engine, [10, 20, 30, 40], epoch=1, batch=3) == [None] * 4
    status = engine.end_period(7_000).status
    assert status["decision"] == "none" and status["epoch"] == 1
    assert status["worker_loads"] == worker_loads([10, 20, 30, 40], command["assignment"], 2)
    assert status["items"] == 100
    assert engine.counters["stale epoch"] == 8 + 2  # 8 loads + 2 batch summaries


def test_cool_down_counts_periods_including_waiting_ones():
    engine = new_engine(Params(mode="dynamic", metric="DB", wait_periods=3, min_items=0))
    report(engine, SKEW)
    assert engine.end_period(1).command is not None          # period 0: command epoch 1
    decisions = []
    for period in range(1, 5):
        if period in (2, 3):          # the app runs epoch 1 from period 2, still skewed
            report(engine, skewed_for(engine.assignment), batch=period)
        result = engine.end_period(period)
        decisions.append((result.status["decision"], result.status["cooled_down"]))
    assert decisions == [("waiting", False), ("none", False), ("rebalance", True),
                         ("waiting", False)]
    assert engine.epoch == 2


def test_epochs_strictly_increase_over_many_commands():
    engine = new_engine(Params(mode="dynamic", metric="DB", wait_periods=0, min_items=0))
    epochs = []
    for period in range(12):
        report(engine, skewed_for(engine.assignment, hot=period % 2), batch=period)
        command = engine.end_period(period).command
        if command:
            epochs.append(command["epoch"])
    assert epochs == list(range(1, len(epochs) + 1)) and len(epochs) >= 5


# -- each condition blocks on its own, in the engine ---------------------------------------------

@pytest.mark.parametrize(("params", "restore", "failed"), [
    (replace(DB, threshold=0.7), False, "over_threshold"),         # MLDC is 0.6
    (replace(DB, min_items=1001), False, "enough_items"),          # 1000 items seen
    (DB, True, "cooled_down"),                                     # restored just now
    (replace(DB, min_improvement=0.6), False, "improves_enough"),  # 0.6 -> 0.0
])
def test_each_condition_blocks_the_engine_on_its_own(params, restore, failed):
    engine = new_engine(params)
    if restore:
        assert engine.restore(0, initial_assignment(4, 2)) is None
    report(engine, SKEW)
    result = engine.end_period(1)
    flags = {k: result.status[k] for k in
             ("over_threshold", "enough_items", "cooled_down", "improves_enough")}
    assert flags.pop(failed) is False
    assert all(flags.values())
    assert result.status["decision"] == "none" and result.command is None
    assert engine.epoch == 0


def test_observe_mode_reports_but_never_commands():
    engine = new_engine(Params(metric="DB", mode="observe", wait_periods=0, min_items=0))
    for period in range(10):
        report(engine, SKEW, batch=period)
        result = engine.end_period(period)
        assert result.command is None
        assert result.status["decision"] == "observe" and result.status["mode"] == "observe"
        assert result.status["mldc"] == pytest.approx(0.6)
        assert result.status["mldc_predicted"] == pytest.approx(0.0)
    assert engine.epoch == 0 and engine.assignment == initial_assignment(4, 2)


def test_lb_metric_uses_processing_time():
    engine = new_engine(Params(mode="dynamic", metric="LB"))
    for p, w in enumerate(initial_assignment(4, 2)):
        engine.observe_load(load(p, w, items=1000, ns=[10, 10, 10, 70][p]))
    status = engine.end_period(1).status
    assert status["worker_loads"] == [20.0, 80.0] and status["metric"] == "LB"
    assert status["mldc"] == pytest.approx(0.6) and status["items"] == 4000


def test_static_bytes_steer_which_equal_partition_moves():
    loads = [200, 200, 200, 100, 50, 0]    # 600/150: moving any one 200 gives 400/350
    for static_bytes, moved in (([0] * 6, 0), ([5000, 10, 3000, 0, 0, 0], 1)):
        engine = Engine(Params(mode="dynamic", metric="DB", min_items=0), app_id=APP)
        engine.observe_batch(summary(6, 2))
        for p, w in enumerate(initial_assignment(6, 2)):
            engine.observe_load(load(p, w, items=loads[p], static_bytes=static_bytes[p]))
        command = engine.end_period(1).command
        assert [m["partition"] for m in command["moves"]] == [moved]


# -- restart ----------------------------------------------------------------------------------

def test_restore_from_the_control_topic_waits_and_continues_the_epochs():
    engine = Engine(DB, app_id=APP)
    restored = [1, 0, 0, 1]
    assert engine.restore(5, restored) is None
    assert engine.observe_batch(summary(epoch=4)).startswith("stale epoch")  # learns P, W
    assert engine.end_period(1).status["decision"] == "waiting"
    assert engine.observe_load(load(0, 1, epoch=4)).startswith("stale epoch")
    assert engine.awaiting
    decisions = []
    for period in range(1, 4):   # restored in period 0: cooled down from period 3 on
        report(engine, skewed_for(restored), epoch=5, batch=period)
        result = engine.end_period(period)
        decisions.append(result.status["decision"])
    assert decisions == ["none", "none", "rebalance"]
    assert result.command["epoch"] == 6
    assert engine.restore(5, restored).startswith("invalid restore: epoch 5 is older than 6")


def test_restart_without_control_topic_adopts_the_apps_epoch_and_never_reuses_it():
    engine = new_engine(Params(mode="dynamic", metric="DB", wait_periods=0))
    running = [1, 1, 0, 0]   # what some earlier distributor commanded as epoch 7
    # the app reports epoch 7; only three partitions so far: the assignment is not known
    for p in range(3):
        assert engine.observe_load(load(p, running[p], epoch=7, items=400 if p < 2 else 100)) \
            is None
    assert engine.epoch == 7 and engine.assignment is None
    status = engine.end_period(1).status
    assert status["decision"] == "none" and "3 of 4 partitions seen" in status["reason"]
    assert status["epoch"] == 7 and status["worker_loads"] == [100.0, 800.0]
    report(engine, skewed_for(running, hot=1), epoch=7, batch=1, assignment=running)
    assert engine.assignment == running
    command = engine.end_period(2).command
    assert command["epoch"] == 8
    assert engine.counters["adopted epochs"] == 1


@pytest.mark.parametrize(("epoch", "assignment", "why"), [
    (-1, None, "not an integer"),
    ("3", None, "not an integer"),
    (True, None, "not an integer"),
    (2, [0, 1, 2, 0], "outside 0..1"),
    (2, [0, 1], "expected 4 partitions"),
    (2, [], "non-empty list"),
    (2, [0, None, 1, 1], "non-empty list"),
    (2, "0101", "non-empty list"),
])
def test_restore_rejects_unusable_input_without_raising(epoch, assignment, why):
    engine = new_engine()
    reason = engine.restore(epoch, assignment)
    assert reason.startswith("invalid restore") and why in reason
    assert engine.epoch == 0


@pytest.mark.parametrize("restored", [[0, 3, 1, 2], [0, 1, 1, 0, 1]])
def test_restored_assignment_that_does_not_fit_the_apps_shape_is_learnt_instead(restored):
    engine = Engine(DB, app_id=APP)
    assert engine.restore(3, restored) is None              # W not known yet
    assert engine.observe_batch(summary(epoch=3)) is None   # W = 2: that cannot be running
    assert engine.assignment is None and engine.counters["restored assignment dropped"] == 1
    report(engine, [1, 1, 1, 1], epoch=3, assignment=[0, 1, 1, 0])
    engine.end_period(1)
    assert engine.assignment == [0, 1, 1, 0]


# -- bad input is counted, rejected with a reason, and never raises ------------------------------

def test_loads_before_p_and_w_are_known_are_held_until_the_first_summary():
    engine = Engine(DB, app_id=APP)
    assert [engine.observe_load(load(p, w, items=n)) for p, (w, n) in
            enumerate(zip([0, 0, 1, 1], SKEW, strict=True))] == [None] * 4
    status = engine.end_period(1).status    # nothing can be judged without P and W
    assert status["decision"] == "waiting" and status["worker_loads"] == []
    assert_is_record("DistributorStatus", status)
    assert engine.observe_batch(summary()) is None   # the app writes it after the loads
    assert engine.period_items == sum(SKEW) and engine.counters["held"] == 4
    assert engine.end_period(2).command is not None  # the first batch counts


def test_held_loads_are_checked_like_any_once_p_and_w_are_known():
    engine = Engine(DB, app_id=APP)
    assert engine.observe_load(load(9, 0)) is None             # partition 9 of P = 4
    assert engine.observe_load(load(0, 0, epoch=0)) is None
    assert engine.observe_batch(summary(epoch=1)) is None      # the app already runs epoch 1
    assert engine.counters["out of range"] == 1 and engine.counters["stale epoch"] == 1
    assert engine.period_items == 0


def test_held_loads_are_bounded(monkeypatch):
    monkeypatch.setattr("distributor.engine.MAX_HELD_LOADS", 2)
    engine = Engine(DB, app_id=APP)
    assert engine.observe_load(load(0, 0)) is None and engine.observe_load(load(1, 0)) is None
    assert engine.observe_load(load(2, 1)).startswith("unknown shape")


# -- the first period ends once M items are in (unless first_period = full) ---------------------

def test_first_period_is_due_once_m_items_are_in():
    engine = new_engine(Params(mode="dynamic", metric="DB", min_items=1000))
    assert not engine.first_period_due
    report(engine, SKEW)                                 # 1,000 items: exactly M
    assert engine.first_period_due
    assert engine.end_period(1).command is not None
    assert not engine.first_period_due                   # only the first period


def test_first_period_is_not_due_before_m_items_nor_when_full():
    engine = new_engine(Params(mode="dynamic", metric="DB", min_items=1001))
    report(engine, SKEW)
    assert not engine.first_period_due
    full = new_engine(Params(mode="dynamic", metric="DB", first_period="full"))
    report(full, SKEW)
    assert not full.first_period_due


def test_first_period_is_not_due_after_a_period_with_items_or_a_restore():
    judged = new_engine()
    report(judged, [1, 1, 1, 1])
    judged.end_period(1)                                 # judged: balanced, nothing to do
    report(judged, SKEW, batch=1)
    assert not judged.first_period_due
    restored = Engine(DB, app_id=APP, partitions=4, workers=2)
    assert restored.restore(2, [0, 1, 0, 1]) is None
    report(restored, SKEW, epoch=2, assignment=[0, 1, 0, 1])
    assert not restored.first_period_due                 # the cool-down rules after a restart


@pytest.mark.parametrize(("record", "kind", "detail"), [
    ({k: v for k, v in load(0, 0).items() if k != "items"}, "malformed", "missing field(s) items"),
    (load(0, 0, items="100"), "malformed", "'items' is str"),
    (load(0, 0, items=True), "malformed", "'items' is bool"),
    (load(0, 0, items=-1), "malformed", "expected >= 0"),
    (load(0, 0, epoch=1.0), "malformed", "'epoch' is float"),
    (load(0, 0, static_bytes=-5), "malformed", "'static_bytes'"),
    (load(0, 0, epoch=2**63), "malformed",
     "'epoch' is 9223372036854775808, out of the range of an Avro long"),
    (load(2**31, 0), "malformed", "'partition' is 2147483648, out of the range of an Avro int"),
    (None, "malformed", "got NoneType"),
    ([1, 2], "malformed", "got list"),
    (load(4, 0), "out of range", "partition 4 outside 0..3"),
    (load(-1, 0), "out of range", "partition -1"),
    (load(0, 2), "out of range", "worker 2 outside 0..1"),
    (load(0, 0, app="other"), "foreign app", "'other'"),
])
def test_bad_loads_are_rejected_with_a_reason_and_counted(record, kind, detail):
    engine = new_engine()
    reason = engine.observe_load(record)
    assert reason.startswith(f"{kind}: ") and detail in reason
    assert engine.counters[kind] == 1 and "loads" not in engine.counters
    assert engine.end_period(1).status["items"] == 0


@pytest.mark.parametrize(("record", "kind"), [
    ({**summary(), "workers": 0}, "malformed"),
    ({**summary(), "partitions": "4"}, "malformed"),
    (summary(partitions=8), "shape mismatch"),
    (summary(workers=3), "shape mismatch"),
    (summary(app="other"), "foreign app"),
    ("not a record", "malformed"),
])
def test_bad_batch_summaries_are_rejected(record, kind):
    engine = new_engine()
    assert engine.observe_batch(record).startswith(f"{kind}: ")
    assert (engine.partitions, engine.workers) == (4, 2)


def test_repeated_records_are_dropped_within_and_across_one_period_boundary():
    engine = new_engine()
    assert engine.observe_load(load(0, 0, batch=7)) is None
    assert engine.observe_load(load(0, 0, batch=7)).startswith("duplicate: batch 7 partition 0")
    engine.end_period(1)
    assert engine.observe_load(load(0, 0, batch=7)).startswith("duplicate")
    assert engine.observe_load(load(0, 0, batch=8)) is None
    assert engine.counters["duplicate"] == 2


def test_a_load_on_another_worker_than_assigned_is_counted_not_dropped():
    engine = new_engine()
    assert engine.observe_load(load(0, 1)) is None
    assert engine.counters["location mismatch"] == 1
    assert engine.end_period(1).status["worker_loads"] == [100.0, 0.0]


def test_any_app_id_is_accepted_when_none_is_configured():
    engine = Engine(DB)
    assert engine.observe_batch(summary(app="x")) is None
    assert engine.observe_load(load(0, 0, app="y")) is None


values = st.one_of(st.none(), st.booleans(), st.integers(-5, 10**20), st.floats(),
                   st.text(max_size=5), st.lists(st.integers(), max_size=2))
fields = st.sampled_from(["app_id", "batch_id", "epoch", "partition", "worker", "items",
                          "processing_ns", "time", "static_bytes", "workers", "partitions"])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(values, st.dictionaries(fields, values),
                          st.builds(lambda r, k, v: {**r, k: v},
                                    st.sampled_from([load(1, 0), summary()]), fields, values)),
                max_size=20))
def test_fuzzed_records_never_raise(records):
    engine = new_engine()
    for record in records:
        for observe in (engine.observe_load, engine.observe_batch):
            reason = observe(record)
            assert reason is None or isinstance(reason, str)
    status = engine.end_period(1).status
    assert_is_record("DistributorStatus", status)


def test_explicit_shape_and_settings_constructor():
    engine = Engine.from_settings({"metric": "DB", "mode": "observe", "policy": "greedy",
                                   "period": 10.0}, partitions=4, workers=2, app_id=APP)
    assert engine.params.mode == "observe" and engine.policy.name == "greedy"
    assert engine.assignment == initial_assignment(4, 2)
    assert engine.observe_load(load(3, 1)) is None
    with pytest.raises(ValueError, match="give both"):
        Engine(DB, partitions=4)


def test_the_apps_new_number_of_workers_is_adopted_with_its_newer_epoch():
    """Executors lost: the app runs one worker under epoch 1, chosen by itself; the engine
    balances that worker alone, then two again when the app reports them with epoch 2."""
    engine = new_engine()
    # the batch's loads come before its summary: their epoch is adopted first
    assert engine.observe_load(load(0, 0, epoch=1, batch=1)) is None
    assert engine.observe_batch(summary(workers=1, epoch=1, batch=1)) is None
    assert (engine.workers, engine.epoch, engine.counters["reshaped"]) == (1, 1, 1)
    assert report(engine, SKEW, batch=2, assignment=[0, 0, 0, 0]) == [None] * 4
    status = engine.end_period(5_000).status
    assert status["worker_loads"] == [1000.0] and status["decision"] == "none"
    assert engine.observe_batch(summary(workers=2, epoch=2, batch=3)) is None
    commands = []
    for batch in range(4, 9):   # a change of workers is a change: the cool-down applies
        report(engine, SKEW, batch=batch, assignment=[0, 0, 0, 1])
        commands.append(engine.end_period(batch * 1_000).command)
    command = next(c for c in commands if c is not None)
    assert command["epoch"] == 3
    assert max(command["assignment"]) == 1


def test_another_number_of_workers_without_a_newer_epoch_is_a_mismatch_unless_awaited():
    engine = new_engine()
    assert engine.observe_batch(summary(workers=1, epoch=0, batch=1)).startswith(
        "shape mismatch")
    report(engine, SKEW)
    assert engine.end_period(5_000).command["epoch"] == 1     # awaiting epoch 1 now
    # the app chose epoch 1 for one worker at the same time: it is what the app runs
    assert engine.observe_batch(summary(workers=1, epoch=1, batch=2)) is None
    assert (engine.workers, engine.epoch, engine.awaiting) == (1, 1, False)
