"""Fixtures for the app's integration tests: a small workload, its oracle, and app runs."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyspark
import pytest

import config
from app.main import main as app_main
from geops.model import Publications, Relation, Subscriptions
from geops.oracle import oracle_answers
from geops.workload import generate_workload
from kafkaio.dump import by_schema
from kafkaio.sender import produce_records
from kafkaio.topics import create_topics
from schemas.records import publication_records, subscription_records
from tests.app.secured import secured  # noqa: F401 - a fixture of the secured tests
from tests.isolated import environ_without_pythonpath

SPARK_HOME = Path(pyspark.__file__).parent
SPARK_BIN = SPARK_HOME / "bin"


@dataclass
class Workload:
    subs: Subscriptions
    pubs: Publications
    oracle: dict[int, tuple[int, ...]]  # publication id -> matched subscription ids


@pytest.fixture(scope="session")
def workload() -> Workload:
    """600 subscriptions (about 10% DISJOINT) and 1,500 publications with their oracle."""
    w = generate_workload(seed=11, subscriptions=600, publications=1500)
    subs = w.subscriptions
    rels = subs.relations.copy()
    rels[np.random.default_rng(5).random(len(rels)) < 0.1] = int(Relation.DISJOINT)
    subs = Subscriptions(subs.ids, subs.geoms, rels)
    return Workload(subs, w.publications,
                    oracle_answers(subs, w.publications.ids, w.publications.geoms))


def load(cfg: config.Config, w: Workload) -> None:
    """Create the test's topics and produce the workload's subscriptions and publications."""
    create_topics(cfg)
    conf = cfg.kafka_client()
    produce_records(conf, cfg.topic("subscriptions"), "Subscription",
                    subscription_records(w.subs))
    produce_records(conf, cfg.topic("publications"), "Publication",
                    publication_records(w.pubs))


def run_app(*flags: str) -> int:
    """Run the app in this process (local[2], 2 workers) until it has been idle for 2 s."""
    return app_main(["--master", "local[2]", "--workers", "2", "--stop-after-idle", "2s",
                     "--trigger", "200ms", *flags])


def matches(cfg: config.Config) -> dict[int, list[tuple[int, ...]]]:
    """Every Match record on the matches topic: publication id -> the id lists it got."""
    out: dict[int, list[tuple[int, ...]]] = defaultdict(list)
    for rec in by_schema(cfg.kafka_client(), cfg.topic("matches")).get("Match", []):
        out[rec["publication_id"]].append(tuple(rec["subscription_ids"]))
    return dict(out)


def metrics(cfg: config.Config) -> dict[str, list[dict]]:
    return by_schema(cfg.kafka_client(), cfg.topic("metrics"))


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class SparkCluster:
    """A standalone Spark cluster: its master URL and its workers' processes, each the leader
    of a process group that also holds the executor it launches."""

    master: str
    workers: list[subprocess.Popen] = field(default_factory=list)

    def kill_worker(self, i: int) -> None:
        """``kill -9`` worker ``i`` with its executor and that executor's Python workers."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.workers[i].pid, signal.SIGKILL)
        self.workers[i].wait(20)


@pytest.fixture
def standalone_cluster(tmp_path) -> Iterator[SparkCluster]:
    """A Spark master and two 1-core workers started from the pyspark installation."""
    port = _port()
    cluster = SparkCluster(f"spark://127.0.0.1:{port}")
    env = {**environ_without_pythonpath(), "SPARK_HOME": str(SPARK_HOME),
           "SPARK_LOCAL_IP": "127.0.0.1",
           "SPARK_WORKER_DIR": str(tmp_path), "PYSPARK_PYTHON": sys.executable}
    procs = [subprocess.Popen(
        [str(SPARK_BIN / "spark-class"), "org.apache.spark.deploy.master.Master",
         "--host", "127.0.0.1", "--port", str(port), "--webui-port", str(_port())],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True)]
    for _ in range(2):
        cluster.workers.append(subprocess.Popen(
            [str(SPARK_BIN / "spark-class"), "org.apache.spark.deploy.worker.Worker",
             cluster.master, "--cores", "1", "--memory", "1g", "--webui-port", str(_port()),
             "--work-dir", str(tmp_path)],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True))
    procs += cluster.workers
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "the Spark master did not start"
                time.sleep(0.5)
        yield cluster
    finally:
        for p in procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGTERM)
        for p in procs:
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
