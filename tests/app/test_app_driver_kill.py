"""Exactly-once output across driver crashes, with a live producer.

The driver kills itself with SIGKILL at a named point of a given batch (``app.faults``), the
app is restarted on the same checkpoint, and at the end a read_committed reader sees one Match
record per matching publication, equal to the oracle's. The same crash with at-least-once
delivery shows the duplicates it allows (the batch whose output was in Kafka when the driver
died is written again) and loses nothing; there replicated partitions are in force, and the
replayed batch splits its items among a partition's owners as its first run did.
"""

from __future__ import annotations

import os

import pytest

from app.faults import KILL_VAR
from app.main import checkpoint_dir
from geops.strategies import build_strategy
from kafkaio.sender import Sender
from tests.app.conftest import metrics
from tests.app.delivery_checks import (
    assert_exactly_once,
    assert_matches_oracle,
    duplicated_batches,
    run_app,
    visible_output,
)
from tests.app.live import LiveProducer, Phase, load_subscriptions_only
from tests.app.replicas import P, assert_split_as_keys_give, busiest, replica_command, replica_plan
from tests.app.snapshots import FROM_SNAPSHOT, put_foreign, rebuilt_because, truncate_a_payload
from tests.app.test_app_exactly_once import RATE

pytestmark = [pytest.mark.integration, pytest.mark.slow]

# Where each run of the app dies, in turn; the last run completes the stream. At
# `after-commit` the batch is in Kafka (committed) and Spark has not committed it; at
# `mid-write` its matches and loads are sent (exactly-once: in a transaction left open). Batch
# 0 starts with the query, usually before the first publication. At least once, one crash
# shows what a replay writes twice.
KILLS = {"exactly-once": ["after-commit@2", "mid-write@4"],
         "at-least-once": ["after-commit@2"]}

@pytest.mark.parametrize("delivery", ["exactly-once", "at-least-once"])
def test_driver_killed_at_points_of_a_batch(delivery, workload, kafka_cfg, geops_env,
                                             tmp_path):
    load_subscriptions_only(kafka_cfg, workload.subs)
    flags = ["--master", "local[2]", "--delivery", delivery]
    if delivery == "at-least-once":  # the three busiest partitions on both workers
        router = build_strategy("sPIS", workload.subs, P, "kdbtree").router()
        owners = replica_plan(busiest(router, workload.pubs)).owners[1]
        s = Sender(kafka_cfg.kafka_client())
        s.send(kafka_cfg.topic("control"), replica_command(1, owners), key=b"geops")
        s.close()
        flags += ["--partitions", str(P)]
    producer = LiveProducer(kafka_cfg, workload.pubs, [Phase(len(workload.pubs), RATE)]).start()
    env = {**os.environ, **geops_env}
    kills = KILLS[delivery]
    checkpoint = checkpoint_dir(kafka_cfg)
    for i, spec in enumerate(kills):
        if i == 1:  # the restart finds the static side's snapshot damaged
            truncate_a_payload(checkpoint)
        code = run_app(flags, {**env, KILL_VAR: spec}, tmp_path / f"run-{i}.log")
        log = (tmp_path / f"run-{i}.log").read_text()
        assert code != 0 and "stopped after" not in log, f"{spec} did not kill:\n{log[-3000:]}"
    producer.join()
    if delivery == "at-least-once":  # the last run finds another workload's snapshot
        put_foreign(checkpoint)
    assert run_app(flags, env, tmp_path / "last.log") == 0, (tmp_path / "last.log").read_text()
    logs = [(tmp_path / f"run-{i}.log").read_text() for i in range(1, len(kills))]
    last = (tmp_path / "last.log").read_text()
    got, summaries = visible_output(kafka_cfg)
    if delivery == "exactly-once":
        assert_exactly_once(kafka_cfg, workload.oracle)
        # the batch committed before the first crash was run again and not written again
        assert "batch 2: its output was committed to Kafka before a restart" in logs[0]
        reason = rebuilt_because(logs[0])
        assert reason is not None and " is truncated or grown (" in reason, logs[0][-3000:]
        assert FROM_SNAPSHOT in last, last[-3000:]  # run 1 wrote a snapshot anew
        return
    reason = rebuilt_because(last)
    assert reason is not None and reason.startswith(
        "it was written for topic 'another-workload', not"), last[-3000:]
    assert_matches_oracle(got, oracle=workload.oracle)
    in_matches, in_summaries = duplicated_batches(got, summaries)
    # at-least-once: the batch whose output was all in Kafka is written twice, no other
    assert in_matches == {2}, in_matches
    assert in_summaries == {2}, in_summaries
    loads = metrics(kafka_cfg)["PartitionLoad"]
    assert all(r["epoch"] == 1 for r in loads)
    assert assert_split_as_keys_give(kafka_cfg, router, owners, summaries, loads) >= 1
