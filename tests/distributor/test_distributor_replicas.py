"""The engine with replicated partitions: per-(partition, worker) loads summed, owners learnt
from the loads, worker loads split among owners, commands with ``replicas`` that the app's
``command_for`` accepts, restores from such a command, and mode adaptive with them."""

from __future__ import annotations

import pytest

from distributor import Engine, GreedyPolicy, Params, replay
from distributor.policies import ReplicatePolicy
from schemas.assignment import command_for, owners_of
from schemas.codec import codec

APP = "app-r"
DB = Params(mode="dynamic", metric="DB")


def load(partition, worker, *, epoch=0, batch=0, items=100):
    return {"app_id": APP, "batch_id": batch, "epoch": epoch, "partition": partition,
            "worker": worker, "items": items, "processing_ns": items * 1000, "time": 1_000}


def summary(partitions, workers, *, epoch=0, batch=0):
    return {"app_id": APP, "batch_id": batch, "epoch": epoch, "strategy": "sPS",
            "join": "STAL", "workers": workers, "partitions": partitions}


def play(engine, owners, items, *, epoch=0, batch=0):
    """One batch: every owner reports its even share of each partition's items."""
    assert engine.observe_batch(summary(len(items), engine.workers or 4, epoch=epoch,
                                        batch=batch)) in (None,) or epoch < engine.epoch
    for p, n in enumerate(items):
        for i, w in enumerate(owners[p]):
            share = n // len(owners[p]) + (i < n % len(owners[p]))
            assert engine.observe_load(load(p, w, epoch=epoch, batch=batch, items=share)) is None


def test_owners_are_learnt_from_per_partition_worker_loads():
    engine = Engine(DB, GreedyPolicy(), app_id=APP)
    # the app runs epoch 3 (the engine has no command for it): partition 0 has two owners
    owners = [(0, 1), (1,), (2,), (3,)]
    play(engine, owners, [800, 100, 300, 300], epoch=3)
    assert engine.epoch == 3
    assert engine.owners == owners
    assert engine.assignment == [0, 1, 2, 3]
    status = engine.end_period(10_000).status
    # partition 0's 800 items split 400 / 400 between workers 0 and 1
    assert status["worker_loads"] == [400.0, 500.0, 300.0, 300.0]
    assert status["items"] == 1500


def test_a_worker_reporting_later_joins_the_learnt_owners():
    engine = Engine(DB, GreedyPolicy(), app_id=APP)
    play(engine, [(0,), (1,)], [10, 10], epoch=2)
    assert engine.owners == [(0,), (1,)]
    play(engine, [(0, 1), (1,)], [10, 10], epoch=2, batch=1)
    assert engine.owners == [(0, 1), (1,)]


def test_replicate_commands_replicas_that_the_app_accepts():
    engine = Engine(DB, ReplicatePolicy(), app_id=APP)
    start = [(0,), (1,), (2,), (3,), (0,), (1,), (2,), (3,)]
    # partition 0 carries 2,400 of 3,100 items: no move can balance it
    play(engine, start, [2400, 100, 100, 100, 100, 100, 100, 100])
    result = engine.end_period(10_000)
    command = result.command
    assert command is not None and result.status["decision"] == "rebalance"
    assert command["replicas"] and command["replicas"][0]["partition"] == 0
    owners = owners_of(command["assignment"], command["replicas"])
    assert len(owners[0]) == 3 and owners[0][0] == 0    # ceil(2400 / (1.05 x 775))
    assert command["mldc_predicted"] < 0.1 < command["mldc_before"]
    # a move for every owner partition 0 gains, from its primary
    moves = [(m["partition"], m["from_worker"], m["to_worker"]) for m in command["moves"]]
    assert {(0, 0, w) for w in owners[0][1:]} <= set(moves)
    assert "replicated" in command["reason"]
    assert (f"policy replicate proposes {len(command['moves'])} owner(s) added (moves and new "
            f"replicas), 1 partition(s) replicated") in result.status["reason"]
    # the app's own check of a control record
    value = codec().encode("RebalanceCommand", command)
    rec = command_for(value, APP, newer_than=0, partitions=8, workers=4)
    assert owners_of(rec["assignment"], rec["replicas"]) == owners
    assert engine.owners == owners and engine.awaiting


def test_the_replicated_epoch_is_judged_with_split_loads_and_replicas_drop_when_cold():
    params = Params(mode="dynamic", metric="DB", wait_periods=1)
    engine = Engine(params, ReplicatePolicy(), app_id=APP)
    start = [(0,), (1,), (2,), (3,), (0,), (1,), (2,), (3,)]
    play(engine, start, [2400, 100, 100, 100, 100, 100, 100, 100])
    command = engine.end_period(10_000).command
    owners = owners_of(command["assignment"], command["replicas"])
    # the app applies it: one load record per owner
    play(engine, owners, [2400, 100, 100, 100, 100, 100, 100, 100], epoch=1, batch=1)
    status = engine.end_period(20_000).status
    assert status["mldc"] < 0.1 and status["decision"] == "none"
    # the hot spot moves to partition 7: its replicas follow, partition 0's are dropped
    play(engine, owners, [100, 100, 100, 100, 100, 100, 100, 2400], epoch=1, batch=2)
    result = engine.end_period(30_000)
    assert result.command is not None
    again = owners_of(result.command["assignment"], result.command["replicas"])
    assert len(again[7]) > 1 and len(again[0]) == 1
    assert result.command["mldc_predicted"] < 0.1


def test_restore_from_a_command_with_replicas():
    engine = Engine(DB, GreedyPolicy(), app_id=APP)
    replicas = [{"partition": 1, "workers": [1, 0]}]
    assert engine.restore(5, [0, 1, 1, 0], replicas) is None
    assert engine.owners == [(0,), (1, 0), (1,), (0,)]
    assert engine.epoch == 5 and engine.awaiting
    bad = Engine(DB, GreedyPolicy(), app_id=APP)
    why = bad.restore(5, [0, 1, 1, 0], [{"partition": 1, "workers": [0, 1]}])
    assert why is not None and why.startswith("invalid restore") and "owner 1" in why
    # an old command (no replicas) restores as one owner each
    old = Engine(DB, GreedyPolicy(), app_id=APP)
    assert old.restore(2, [0, 1, 1, 0]) is None
    assert old.owners == [(0,), (1,), (1,), (0,)]


def test_restored_replicas_wider_than_the_app_are_dropped():
    engine = Engine(DB, GreedyPolicy(), app_id=APP)
    assert engine.restore(5, [0, 1], [{"partition": 0, "workers": [0, 3]}]) is None
    engine.observe_batch(summary(2, 2, epoch=5))
    assert engine.owners is None
    assert engine.counters["restored assignment dropped"] == 1


def test_replay_plays_replicas_and_greedy_is_unchanged():
    items = [[2400, 100, 100, 100, 100, 100, 100, 100]] * 4
    result = replay(items, workers=4, params=DB, policy=ReplicatePolicy())
    assert len(result.commands) == 1
    assert len(result.owners[1][0]) == 3
    assert result.mldc[1] < 0.1
    greedy = replay(items, workers=4, params=DB, policy=GreedyPolicy())
    assert all(len(o) == 1 for period in greedy.owners for o in period)
    assert greedy.mldc[-1] > 1.0   # moving alone cannot help


@pytest.mark.parametrize("policy", [ReplicatePolicy(), GreedyPolicy()])
def test_adaptive_mode_works_with_owner_policies(policy):
    params = Params(mode="adaptive", metric="LB")
    engine = Engine(params, policy, app_id=APP)
    owners = [(0,), (1,), (2,), (3,), (0,), (1,), (2,), (3,)]
    epoch = 0
    commands = []
    for b in range(12):
        if commands and commands[-1]["epoch"] > epoch:
            epoch = commands[-1]["epoch"]
            owners = owners_of(commands[-1]["assignment"], commands[-1]["replicas"])
        for p, n in enumerate([2400, 100, 100, 100, 100, 100, 100, 100]):
            for w in owners[p]:
                share = n // len(owners[p])
                assert engine.observe_load({**load(p, w, epoch=epoch, batch=b, items=share),
                                            "processing_ns": share * 100_000}) is None
        assert engine.observe_batch({**summary(8, 4, epoch=epoch, batch=b),
                                     "duration_ms": 400.0, "join_stage_ms": 300.0}) is None
        if engine.decision_due:
            result = engine.end_period(b * 1000)
            if result.command:
                commands.append(result.command)
    if isinstance(policy, ReplicatePolicy):
        assert commands and commands[0]["replicas"]
        assert commands[0]["reason"].startswith("adaptive: ")
    else:
        assert all(not c["replicas"] for c in commands)
