"""The engine never waits forever for an epoch the app does not run, and never writes an epoch
or a sum an Avro long cannot hold. Pure engine tests: no Kafka."""

import pytest

import config
from config import ConfigError
from distributor import Engine, GreedyPolicy, Params
from distributor.service import build_engine
from schemas.assignment import initial_assignment
from schemas.codec import codec

APP = "app-1"
LONG_MAX = 2**63 - 1
R = 6                                    # the default resync_periods
SKEW = [400, 400, 100, 100]              # 80% on worker 0 under [0, 0, 1, 1]


def load(partition, worker, *, epoch, batch=0, items=100, ns=None):
    return {"app_id": APP, "batch_id": batch, "epoch": epoch, "partition": partition,
            "worker": worker, "items": items,
            "processing_ns": items * 1000 if ns is None else ns, "time": 1_000}


def summary(*, epoch, batch=0, partitions=4, workers=2):
    return {"app_id": APP, "batch_id": batch, "epoch": epoch, "strategy": "sPS",
            "join": "STAL", "workers": workers, "partitions": partitions}


def play(engine, epoch, assignment, items, batch):
    """The app runs one batch: P loads, then its BatchSummary; returns the engine's answers."""
    answers = [engine.observe_load(load(p, w, epoch=epoch, batch=batch, items=n))
               for p, (w, n) in enumerate(zip(assignment, items, strict=True))]
    answers.append(engine.observe_batch(summary(epoch=epoch, batch=batch)))
    return answers


def encodes(status):
    """The status (or command) is a record the Avro codec writes and reads back unchanged."""
    name = "RebalanceCommand" if "moves" in status else "DistributorStatus"
    assert codec().decode_as(name, codec().encode(name, status)) == status
    return True


def engine_with(**params):
    return Engine(Params(mode="dynamic", metric="DB", **params), GreedyPolicy(), app_id=APP)


# -- a forged command the app rejects ---------------------------------------------------------

def test_a_forged_epoch_never_reported_is_given_up_after_n_periods_then_a_newer_epoch_follows():
    engine = engine_with(wait_periods=2, min_items=0)
    # another tool wrote epoch 99 with workers the app does not have; the service restores it
    assert engine.restore(99, [5, 7, 5, 7]) is None
    running = [1, 0, 1, 0]                          # what the app really runs, as epoch 3
    statuses = []
    for period in range(R + 1):
        answers = play(engine, 3, running, SKEW, batch=period)
        if period:   # the first batch's loads are held until its BatchSummary tells P and W
            assert all(a.startswith("stale epoch") for a in answers)
        result = engine.end_period(period)
        assert result.command is None and encodes(result.status)
        statuses.append(result.status)
    assert [s["decision"] for s in statuses] == ["waiting"] * R + ["resync"]
    assert all(s["epoch"] == 99 for s in statuses)
    assert "waiting for the app to report epoch 99 (0 period(s) so far; re-synchronising " \
           f"after {R})" in statuses[0]["reason"]
    reason = statuses[-1]["reason"]
    assert f"has not reported epoch 99 for {R} period(s)" in reason
    assert "re-synchronised with epoch 3" in reason and "next command gets epoch 100" in reason
    assert (engine.epoch, engine.highest_epoch, engine.assignment) == (3, 99, running)
    assert not engine.awaiting and engine.counters["resyncs"] == 1
    assert engine.counters["restored assignment dropped"] == 1     # W = 2 has no worker 5
    assert engine.counters["stale epoch"] == (R + 1) * 5 and "loads" not in engine.counters

    # the app's loads count again, and the next command is newer than anything seen
    decisions = []
    for period in range(R + 1, R + 3):      # cool-down N = 2 from the resync, then skewed
        assert play(engine, 3, running, [400 if w == 1 else 100 for w in running],
                    batch=period) == [None] * 5
        result = engine.end_period(period)
        decisions.append(result.status["decision"])
    assert decisions == ["none", "rebalance"]
    command = result.command
    assert command["epoch"] == 100 and encodes(command)
    assert all(m["from_worker"] == running[m["partition"]] for m in command["moves"])
    assert engine.epoch == 100 and engine.awaiting


def test_the_app_still_reporting_the_old_epoch_after_a_command_is_resynced_with():
    engine = engine_with(wait_periods=0, min_items=0, resync_periods=3)
    initial = initial_assignment(4, 2)
    play(engine, 0, initial, SKEW, batch=0)
    assert engine.end_period(0).command["epoch"] == 1
    decisions = []
    for period in range(1, 4):                      # the app never applies epoch 1
        play(engine, 0, initial, SKEW, batch=period)
        decisions.append(engine.end_period(period).status["decision"])
    assert decisions == ["waiting", "waiting", "resync"]
    assert (engine.epoch, engine.assignment, engine.highest_epoch) == (0, initial, 1)
    play(engine, 0, initial, SKEW, batch=4)
    command = engine.end_period(4).command
    assert command["epoch"] == 2                    # never epoch 1 again
    assert [m["from_worker"] for m in command["moves"]] == [initial[m["partition"]]
                                                            for m in command["moves"]]


def test_a_resync_before_every_partition_reported_learns_the_assignment_afterwards():
    engine = engine_with(resync_periods=1, min_items=0)
    assert engine.observe_batch(summary(epoch=0)) is None     # P = 4, W = 2
    assert engine.restore(9) is None                          # epoch only: assignment unknown
    running = [1, 1, 0, 0]
    assert engine.observe_load(load(0, 1, epoch=4)).startswith("stale epoch")
    assert engine.observe_batch(summary(epoch=2)).startswith("stale epoch")   # older still
    engine.end_period(0)
    status = engine.end_period(1).status
    assert status["decision"] == "resync" and "epoch 4" in status["reason"]
    assert "1 of 4 partitions seen" in status["reason"]
    assert engine.epoch == 4 and engine.assignment is None
    play(engine, 4, running, [1, 1, 1, 1], batch=1)
    engine.end_period(2)
    assert engine.assignment == running


def test_with_no_other_epoch_reported_it_keeps_waiting_and_says_why():
    engine = engine_with(resync_periods=2)
    assert engine.observe_batch(summary(epoch=0)) is None
    assert engine.restore(5, [0, 1, 0, 1]) is None
    statuses = [engine.end_period(period).status for period in range(4)]
    assert [s["decision"] for s in statuses] == ["waiting"] * 4
    assert "reports no other epoch either" in statuses[-1]["reason"]
    assert engine.epoch == 5 and engine.awaiting and "resyncs" not in engine.counters
    play(engine, 5, [0, 1, 0, 1], [1, 1, 1, 1], batch=0)      # the app comes with epoch 5
    assert not engine.awaiting and engine.end_period(4).status["decision"] == "none"


def test_old_records_in_flight_do_not_resync_once_the_new_epoch_is_reported():
    engine = engine_with(wait_periods=0, min_items=0, resync_periods=1)
    initial = initial_assignment(4, 2)
    play(engine, 0, initial, SKEW, batch=0)
    command = engine.end_period(0).command
    play(engine, 0, initial, SKEW, batch=1)                  # in flight before the switch
    play(engine, 1, command["assignment"], [1, 1, 1, 1], batch=2)
    assert engine.end_period(1).status["decision"] == "none"
    assert engine.epoch == 1 and "resyncs" not in engine.counters


@pytest.mark.parametrize("bad", [0, -1, True, 2.5])
def test_resync_periods_must_be_a_positive_integer(bad):
    with pytest.raises(ValueError, match="resync_periods must be an integer >= 1"):
        Params(resync_periods=bad)


def test_resync_periods_is_a_setting_and_a_bad_one_names_its_flag():
    cfg = config.load(environ={"GEOPS_DISTRIBUTOR_RESYNC_PERIODS": "4"})
    assert build_engine(cfg).params.resync_periods == 4
    assert build_engine(config.load(environ={})).params.resync_periods == R
    with pytest.raises(ConfigError, match=r"--resync-periods \(distributor.resync_periods\): "
                                          r"must be at least 1, got 0"):
        config.load(environ={}, flags={"distributor.resync_periods": "0"})


# -- the upper edge of an Avro long -----------------------------------------------------------

@pytest.mark.parametrize("assignment", [None, [0, 1, 0, 1]])
@pytest.mark.parametrize("epoch", [LONG_MAX, LONG_MAX + 1])
def test_restoring_the_last_epoch_is_refused(epoch, assignment):
    engine = engine_with()
    reason = engine.restore(epoch, assignment)
    assert reason.startswith("invalid restore: ") and "no newer command could follow" in reason
    assert engine.epoch == 0 and not engine.awaiting


def test_the_last_epoch_in_the_apps_records_is_refused_with_a_reason():
    engine = engine_with()
    assert engine.observe_batch(summary(epoch=0)) is None
    reason = engine.observe_load(load(0, 0, epoch=LONG_MAX))
    assert reason.startswith("out of range: ") and f"epoch {LONG_MAX}" in reason
    assert engine.observe_batch(summary(epoch=LONG_MAX)).startswith("out of range: BatchSummary")
    assert engine.epoch == 0 and engine.counters["out of range"] == 2
    assert encodes(engine.end_period(1).status)


def test_near_the_edge_it_commands_the_last_epoch_once_and_then_no_more():
    engine = engine_with(wait_periods=0, min_items=0, resync_periods=1)
    assert engine.observe_batch(summary(epoch=0)) is None
    edge = LONG_MAX - 1
    running = initial_assignment(4, 2)
    play(engine, edge, running, SKEW, batch=0)              # adopted: the app runs 2**63 - 2
    first = engine.end_period(0)
    assert first.command["epoch"] == LONG_MAX and encodes(first.command)
    play(engine, edge, running, SKEW, batch=1)              # the app does not apply it
    resync = engine.end_period(1).status
    assert resync["decision"] == "resync" and encodes(resync)
    assert engine.epoch == edge and engine.highest_epoch == LONG_MAX
    play(engine, edge, running, SKEW, batch=2)
    result = engine.end_period(2)
    assert result.command is None and result.status["decision"] == "none"
    assert "no newer command could follow" in result.status["reason"] and encodes(result.status)


# -- sums that do not fit a long ----------------------------------------------------------------

@pytest.mark.parametrize(("first", "second", "detail"), [
    (load(0, 0, epoch=0, items=LONG_MAX, ns=0), load(0, 0, epoch=0, batch=1, items=1),
     "items of partition 0 would sum to"),
    (load(0, 0, epoch=0, items=2**62, ns=0), load(1, 0, epoch=0, items=2**62, ns=0),
     "the period's items would sum to 9223372036854775808"),
    (load(2, 1, epoch=0, items=1, ns=LONG_MAX), load(2, 1, epoch=0, batch=1, items=1, ns=1),
     "processing_ns of partition 2 would sum to"),
])
def test_loads_whose_sums_overflow_a_long_are_refused(first, second, detail):
    engine = engine_with()
    assert engine.observe_batch(summary(epoch=0)) is None
    assert engine.observe_load(first) is None
    reason = engine.observe_load(second)
    assert reason.startswith("too large: ") and detail in reason
    assert engine.counters["too large"] == 1
    status = engine.end_period(1).status
    assert status["items"] == first["items"] and encodes(status)
    assert engine.observe_load({**second, "batch_id": 9}) is None   # a new period: room again


def test_total_items_saturate_instead_of_overflowing():
    engine = engine_with()
    assert engine.observe_batch(summary(epoch=0)) is None
    assert engine.observe_load(load(0, 0, epoch=0, items=LONG_MAX, ns=0)) is None
    assert encodes(engine.end_period(1).status)
    assert engine.observe_load(load(1, 0, epoch=0, batch=1, items=5)) is None
    status = engine.end_period(2).status
    assert status["total_items"] == LONG_MAX and status["items"] == 5 and encodes(status)
    assert engine.counters["total items saturated"] == 1
