"""The real-time path on a standalone Spark cluster: its long-running tasks get a slot each
from executors that register after the driver starts, answer live as the oracle does, and an
app that wants more slots than the cluster has is refused at start in one line."""

from __future__ import annotations

import subprocess
import sys

import pytest

from config.exitcodes import EXIT_USAGE
from geops.workload import generate_workload
from kafkaio.sender import produce_records
from kafkaio.topics import create_topics
from schemas.records import subscription_records
from tests.faults.stack import (
    Procs,
    Publisher,
    assert_matches_oracle,
    live_env,
    oracle_of,
    wait_answered,
    wait_ready,
)

pytestmark = [pytest.mark.integration, pytest.mark.slow]

FLAGS = ["--mode", "real-time"]


def test_real_time_on_a_standalone_cluster_gets_its_slots_or_says_so(
        broker, tmp_path, monkeypatch, standalone_cluster):
    env, cfg = live_env(broker, tmp_path, "rt-cluster-", monkeypatch)
    env = {**env, "PYSPARK_PYTHON": sys.executable}
    w = generate_workload(seed=67, subscriptions=300, publications=1_000)
    create_topics(cfg)
    produce_records(cfg.kafka_client(), cfg.topic("subscriptions"), "Subscription",
                    subscription_records(w.subscriptions))
    procs = Procs(tmp_path / "logs")
    try:
        # two workers of one core each: the app's two tasks need both executors
        app = procs.app(env, *FLAGS, "--master", standalone_cluster.master, "--workers", "2")
        wait_ready(cfg, app)
        publisher = Publisher(cfg, w.publications, rate=500)
        publisher.publish(len(w.publications))
        publisher.close()
        oracle = oracle_of(w.subscriptions, w.publications)
        wait_answered(cfg, oracle, [app])
        assert_matches_oracle(cfg, oracle)
        assert app.stop() == 0, app.logs()[-3000:]
    finally:
        procs.reap()
    # three workers on two cores: refused once the wait for executors is over
    short = tmp_path / "short-wait.toml"
    short.write_text('[spark.conf]\n"spark.scheduler.maxRegisteredResourcesWaitingTime" = "3s"\n')
    done = subprocess.run([sys.executable, "-m", "cli.main", "app", *FLAGS, "--config", str(short),
                           "--master", standalone_cluster.master, "--workers", "3"],
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == EXIT_USAGE, done.stdout[-3000:] + done.stderr[-3000:]
    errors = [line for line in done.stdout.splitlines() + done.stderr.splitlines()
              if " geops.app ERROR " in line]
    assert len(errors) == 1, done.stdout[-3000:]
    assert "a task slot for each of its 3 workers and Spark offers 2" in errors[0], errors[0]
