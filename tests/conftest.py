"""Shared fixtures: one real Apache Kafka broker per test process, per-test topic names."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest

import config
from config import TOPICS, Config
from kafkaio import broker as embedded

# Every JVM the tests start (brokers, Spark drivers and executors, a standalone cluster's master
# and workers) compiles with C1 only. They live seconds to minutes on small workloads, where the
# optimizing compiler's work costs more CPU than it returns: on 2 cores the suite took 1,147 s
# with it instead of 1,253 s, its CPU time 23 % less. The variable reaches every JVM started
# from a test process; a value of one's own is kept (this flag is added to it).
_C1_ONLY = "-XX:TieredStopAtLevel=1"
if _C1_ONLY not in os.environ.get("JAVA_TOOL_OPTIONS", ""):
    os.environ["JAVA_TOOL_OPTIONS"] = " ".join(
        filter(None, [os.environ.get("JAVA_TOOL_OPTIONS"), _C1_ONLY]))


@pytest.fixture(scope="session")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Bootstrap address of a single-node Apache Kafka started for this test process on a free
    port (each pytest-xdist worker has its own)."""
    state = tmp_path_factory.mktemp("broker-state")
    info, _ = embedded.start(state, port=0)
    try:
        yield info.address
    finally:
        embedded.stop(state)


def kafka_env(broker: str, state_dir: str, prefix: str) -> dict[str, str]:
    """Environment that points geops at the test broker with topic names unique to a test.

    The apps of the tests run without the Spark UI (on by default): no port to find, less work.
    """
    env = {"GEOPS_BOOTSTRAP_SERVERS": broker, "GEOPS_STATE_DIR": state_dir,
           "GEOPS_SPARK_UI": "off"}
    for logical in TOPICS:
        env[f"GEOPS_{logical.upper()}_TOPIC"] = f"{prefix}{logical.replace('_', '-')}"
    return env


@pytest.fixture
def geops_env(broker: str, tmp_path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Sets (and returns) GEOPS_* variables for this test: test broker, own topics."""
    env = kafka_env(broker, str(tmp_path / "state"), f"t{uuid.uuid4().hex[:10]}-")
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return env


@pytest.fixture
def kafka_cfg(geops_env: dict[str, str]) -> Config:
    """Configuration resolved from ``geops_env``."""
    return config.load(environ=geops_env)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Files in the order two test processes finish them soonest (``--dist loadfile
    --no-loadscope-reorder`` in ``scripts/test``; the order within a file is kept): the longest
    first (marked ``longest``: the short chaos run, minutes of nine processes), then the slow
    files, the benchmarks' last so that they do not share the machine with the chaos run,
    then those with integration tests, then the pure ones, which fill the end evenly."""
    rank: dict[str, int] = {}
    for item in items:
        path = item.nodeid.split("::")[0]
        if item.get_closest_marker("longest"):
            mark = 0
        elif item.get_closest_marker("slow"):
            mark = 2 if path.startswith("tests/bench/") else 1
        else:
            mark = 3 if item.get_closest_marker("integration") else 4
        rank[path] = min(rank.get(path, 4), mark)
    items.sort(key=lambda item: rank[item.nodeid.split("::")[0]])
