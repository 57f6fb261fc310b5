"""Exactly-once output across driver crashes and task failures, with a live producer.

The driver kills itself with SIGKILL at a named point of a given batch (``app.faults``), the
app is restarted on the same checkpoint, and at the end a read_committed reader sees one Match
record per matching publication, equal to the oracle's. The same crash with at-least-once
delivery shows the duplicates it allows (the batch whose output was in Kafka when the driver
died is written again) and loses nothing; there replicated partitions are in force, and the
replayed batch splits its items among a partition's owners as its first run did.
"""

from __future__ import annotations

import os
import subprocess
import threading
import time

import pytest

from app.faults import FAIL_TASK_VAR, KILL_VAR
from distributor.service import Service
from geops.strategies import build_strategy
from kafkaio.dump import by_schema
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
from tests.app.test_app_control import wait_for_batches
from tests.isolated import environ_without_pythonpath, python_without_project

pytestmark = [pytest.mark.integration, pytest.mark.slow]

# Where each run of the app dies, in turn; the last run completes the stream. At
# `after-commit` the batch is in Kafka (committed) and Spark has not committed it; at
# `mid-write` its matches and loads are sent (exactly-once: in a transaction left open). Batch
# 0 starts with the query, usually before the first publication. At least once, one crash
# shows what a replay writes twice.
KILLS = {"exactly-once": ["after-commit@2", "mid-write@4"],
         "at-least-once": ["after-commit@2"]}
RATE = 150.0  # publications per second: the stream is still arriving at the first crash


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
    for i, spec in enumerate(kills):
        code = run_app(flags, {**env, KILL_VAR: spec}, tmp_path / f"run-{i}.log")
        log = (tmp_path / f"run-{i}.log").read_text()
        assert code != 0 and "stopped after" not in log, f"{spec} did not kill:\n{log[-3000:]}"
    producer.join()
    assert run_app(flags, env, tmp_path / "last.log") == 0, (tmp_path / "last.log").read_text()
    logs = [(tmp_path / f"run-{i}.log").read_text() for i in range(1, len(kills))]
    got, summaries = visible_output(kafka_cfg)
    if delivery == "exactly-once":
        assert_exactly_once(kafka_cfg, workload.oracle)
        # the batch committed before the first crash was run again and not written again
        assert "batch 2: its output was committed to Kafka before a restart" in logs[0]
        return
    assert_matches_oracle(got, oracle=workload.oracle)
    in_matches, in_summaries = duplicated_batches(got, summaries)
    # at-least-once: the batch whose output was all in Kafka is written twice, no other
    assert in_matches == {2}, in_matches
    assert in_summaries == {2}, in_summaries
    loads = metrics(kafka_cfg)["PartitionLoad"]
    assert all(r["epoch"] == 1 for r in loads)
    assert assert_split_as_keys_give(kafka_cfg, router, owners, summaries, loads) >= 1


def test_task_failure_is_retried_without_a_second_copy(workload, kafka_cfg, geops_env,
                                                       tmp_path):
    """A join task fails once after its work; under local[2,2] Spark runs it again. Tasks send
    nothing to Kafka (their results go to the driver, which writes the batch), so the retried
    task's output is counted once."""
    load_subscriptions_only(kafka_cfg, workload.subs)
    producer = LiveProducer(kafka_cfg, workload.pubs, [Phase(len(workload.pubs), RATE)]).start()
    flag = tmp_path / "task-failed"
    env = {**os.environ, **geops_env, FAIL_TASK_VAR: str(flag)}
    code = run_app(["--master", "local[2,2]", "--delivery", "exactly-once"], env,
                   tmp_path / "app.log")
    log = (tmp_path / "app.log").read_text()
    assert code == 0, log[-3000:]
    producer.join()
    assert flag.exists(), "no task failed"
    assert log.count("injected task failure") >= 1, log[-3000:]
    assert_exactly_once(kafka_cfg, workload.oracle)


def test_worker_killed_mid_stream(workload, kafka_cfg, geops_env, standalone_cluster,
                                  tmp_path):
    """One worker of a two-worker standalone cluster is killed (with its executor) mid-stream,
    with a producer writing and the distributor running. The static partitions cached on the
    lost executor are rebuilt on the other from their lineage (the subscriptions topic, read
    again at the offsets the app started from), and the assignment follows: the app runs one
    join worker under a new epoch, puts that assignment on the control topic, and the
    distributor balances the one worker it now has.

    The executors run a Python that cannot import the project, so the app's code reaches them
    only in the zip `geops app` passes as --py-files."""
    load_subscriptions_only(kafka_cfg, workload.subs)
    executors = python_without_project(tmp_path)
    env = {**environ_without_pythonpath(), **geops_env, "PYSPARK_PYTHON": str(executors)}
    hidden = subprocess.run([executors, "-c", "import geops"], cwd=tmp_path, env=env,
                            capture_output=True)
    assert hidden.returncode != 0, "the executors' Python must not see the project"
    distributor = Service(kafka_cfg.with_overrides({"distributor.period": "0.5s"}))
    stop = threading.Event()
    balancing = threading.Thread(target=distributor.run, args=(stop,), daemon=True)
    balancing.start()
    assert distributor.ready.wait(60), "the distributor did not start"
    producer = LiveProducer(kafka_cfg, workload.pubs, [Phase(len(workload.pubs), RATE)]).start()
    codes: list[int] = []
    log = tmp_path / "app.log"
    app = threading.Thread(target=lambda: codes.append(run_app(
        ["--master", standalone_cluster.master, "--delivery", "exactly-once",
         "--stop-after-idle", "8s"], env, log, timeout=240, cwd=tmp_path)))
    app.start()
    assert wait_for_batches(kafka_cfg, 4, timeout=180), log.read_text()[-3000:]
    killed_ms = time.time() * 1000
    standalone_cluster.kill_worker(1)
    producer.join(180)
    app.join(240)
    stop.set()
    balancing.join(30)
    assert codes == [0], log.read_text()[-3000:]
    assert list((tmp_path / "state" / "py-files").glob("geops-packages-*.zip"))
    assert_exactly_once(kafka_cfg, workload.oracle)
    out = metrics(kafka_cfg)
    loads, summaries = out["PartitionLoad"], out["BatchSummary"]
    rebuilt = {(r["partition"], r["worker"]) for r in loads
               if r["index_builds"] and r["time"] > killed_ms}
    assert rebuilt, "no static partition was built again after its executor was lost"
    # the assignment follows: one worker from some batch on, under a newer epoch
    before = max(s["epoch"] for s in summaries if s["workers"] == 2)
    one = [s for s in summaries if s["workers"] == 1]
    assert one and min(s["epoch"] for s in one) > before, [
        (s["batch_id"], s["epoch"], s["workers"]) for s in summaries]
    first = min(s["batch_id"] for s in one)
    assert {r["worker"] for r in loads if r["batch_id"] >= first} == {0}
    chosen = [c for c in by_schema(kafka_cfg.kafka_client(), kafka_cfg.topic("control"))
              .get("RebalanceCommand", []) if "executors" in c["reason"]]
    assert [set(c["assignment"]) for c in chosen] == [{0}], chosen
    assert distributor.counters.get("reshaped") == 1, sorted(distributor.counters.items())
    print(f"\nrebuilt after the kill: {sorted(rebuilt)}; one worker from batch {first}, "
          f"epoch {min(s['epoch'] for s in one)}; distributor {distributor.counters}")
