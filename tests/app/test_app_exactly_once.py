"""Exactly-once output across task failures and a lost worker, with a live producer: a
read_committed reader sees one Match record per matching publication, equal to the oracle's.
The driver's crashes at points of a batch are in ``test_app_driver_kill.py``.
"""

from __future__ import annotations

import os
import subprocess
import threading
import time

import pytest

from app.faults import FAIL_TASK_VAR
from distributor.service import Service
from kafkaio.dump import by_schema
from tests.app.conftest import metrics
from tests.app.delivery_checks import assert_exactly_once, run_app
from tests.app.live import LiveProducer, Phase, load_subscriptions_only
from tests.app.test_app_control import wait_for_batches
from tests.isolated import environ_without_pythonpath, python_without_project

pytestmark = [pytest.mark.integration, pytest.mark.slow]

RATE = 150.0  # publications per second: the stream is still arriving when a fault hits


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
