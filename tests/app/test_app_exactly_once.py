"""Exactly-once output across driver crashes and task failures, with a live producer.

The driver kills itself with SIGKILL at a named point of a given batch (``app.faults``), the
app is restarted on the same checkpoint, and at the end a read_committed reader sees one Match
record per matching publication, equal to the oracle's. The same crashes with at-least-once
delivery show the duplicates it allows: the batches whose output was in Kafka when the driver
died are written again.
"""

from __future__ import annotations

import os
import subprocess
import threading
import time

import pytest

from app.faults import FAIL_TASK_VAR, KILL_VAR
from tests.app.conftest import metrics
from tests.app.delivery import (
    assert_exactly_once,
    assert_matches_oracle,
    duplicated_batches,
    run_app,
    visible_output,
)
from tests.app.live import LiveProducer, Phase, load_subscriptions_only
from tests.app.test_app_control import wait_for_batches
from tests.isolated import environ_without_pythonpath, python_without_project

pytestmark = pytest.mark.integration

# Where each run of the app dies, in turn; the last run completes the stream. At
# `after-commit` the batch is in Kafka (committed) and Spark has not committed it; at
# `mid-write` its matches and loads are sent (exactly-once: in a transaction left open). Batch
# 0 starts with the query, usually before the first publication.
KILLS = ["after-commit@2", "mid-write@4"]
RATE = 150.0  # publications per second: the stream is still arriving at the first crash


@pytest.mark.parametrize("delivery", ["exactly-once", "at-least-once"])
def test_driver_killed_at_points_of_a_batch(delivery, workload, kafka_cfg, geops_env,
                                             tmp_path):
    load_subscriptions_only(kafka_cfg, workload.subs)
    producer = LiveProducer(kafka_cfg, workload.pubs, [Phase(len(workload.pubs), RATE)]).start()
    env = {**os.environ, **geops_env}
    flags = ["--master", "local[2]", "--delivery", delivery]
    for i, spec in enumerate(KILLS):
        code = run_app(flags, {**env, KILL_VAR: spec}, tmp_path / f"run-{i}.log")
        log = (tmp_path / f"run-{i}.log").read_text()
        assert code != 0 and "stopped after" not in log, f"{spec} did not kill:\n{log[-3000:]}"
    producer.join()
    assert run_app(flags, env, tmp_path / "last.log") == 0, (tmp_path / "last.log").read_text()
    logs = [(tmp_path / f"run-{i}.log").read_text() for i in range(1, len(KILLS))]
    got, summaries = visible_output(kafka_cfg)
    if delivery == "exactly-once":
        assert_exactly_once(kafka_cfg, workload.oracle)
        # the batch committed before the first crash was run again and not written again
        assert "batch 2: its output was committed to Kafka before a restart" in logs[0]
        return
    assert_matches_oracle(got, oracle=workload.oracle)
    in_matches, in_summaries = duplicated_batches(got, summaries)
    # at-least-once: the batch whose output was all in Kafka, and the one whose matches were,
    # are written twice; the batch killed before its write is not
    assert in_matches == {2, 4}, in_matches
    assert in_summaries == {2}, in_summaries


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
    """One worker of a two-worker standalone cluster is killed (with its executor) mid-stream.
    Spark runs both join workers' tasks on the other executor; the static partitions cached on
    the lost one are rebuilt there from their lineage (the subscriptions topic, read again at
    the offsets the app started from), and the resident indexes are built again.

    The executors run a Python that cannot import the project, so the app's code reaches them
    only in the zip `geops app` passes as --py-files."""
    load_subscriptions_only(kafka_cfg, workload.subs)
    executors = python_without_project(tmp_path)
    env = {**environ_without_pythonpath(), **geops_env, "PYSPARK_PYTHON": str(executors)}
    hidden = subprocess.run([executors, "-c", "import geops"], cwd=tmp_path, env=env,
                            capture_output=True)
    assert hidden.returncode != 0, "the executors' Python must not see the project"
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
    assert codes == [0], log.read_text()[-3000:]
    assert list((tmp_path / "state" / "py-files").glob("geops-packages-*.zip"))
    assert_exactly_once(kafka_cfg, workload.oracle)
    loads = metrics(kafka_cfg)["PartitionLoad"]
    rebuilt = {(r["partition"], r["worker"]) for r in loads
               if r["index_builds"] and r["time"] > killed_ms}
    after = [r for r in loads if r["time"] > killed_ms]
    assert after and {r["worker"] for r in after if r["items"]} == {0, 1}
    assert rebuilt, "no static partition was built again after its executor was lost"
    print(f"\nrebuilt after the kill: {sorted(rebuilt)}")
