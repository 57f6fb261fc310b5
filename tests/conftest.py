"""Shared fixtures: one real Apache Kafka broker per test process, per-test topic names."""

from __future__ import annotations

import json
import os
import uuid
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

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


# The seconds each test file took in a whole run (setup, call and teardown of its tests),
# written by `GEOPS_TEST_DURATIONS=record scripts/test`: the order below puts the longest
# first. A file the record does not hold yet counts by its marks.
DURATIONS = Path(__file__).with_name("durations.json")
_UNRECORDED_S = {"slow": 25.0, "integration": 4.0}
_PURE_S = 0.05
_spent: dict[str, float] = defaultdict(float)


def _guess(item: pytest.Item) -> float:
    """Seconds a test of a file without a record is taken to last, by its marks."""
    for mark, seconds in _UNRECORDED_S.items():
        if item.get_closest_marker(mark):
            return seconds
    return _PURE_S


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Files longest first (the order within a file kept), by the seconds ``durations.json``
    records. Two test processes take one file at a time in this order, each the next when it
    is done (``--dist loadfile --no-loadscope-reorder`` in ``scripts/test``): with the longest
    first, neither is left running a long file alone at the end, and the short files fill
    the end evenly."""
    recorded = json.loads(DURATIONS.read_text()) if DURATIONS.exists() else {}
    seconds: dict[str, float] = defaultdict(float)
    for item in items:
        path = item.nodeid.split("::")[0]
        seconds[path] = recorded[path] if path in recorded else seconds[path] + _guess(item)
    items.sort(key=lambda item: -seconds[item.nodeid.split("::")[0]])


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Adds a test's phase to its file's seconds (when recording; with two test processes
    the reports of both reach the main one)."""
    if os.environ.get("GEOPS_TEST_DURATIONS") == "record":
        _spent[report.nodeid.split("::")[0]] += report.duration


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Writes the seconds of the files this run ran into ``durations.json`` (the other files'
    kept), once, from the main process."""
    if not _spent or hasattr(session.config, "workerinput"):
        return
    recorded = json.loads(DURATIONS.read_text()) if DURATIONS.exists() else {}
    recorded.update({path: round(s, 1) for path, s in _spent.items()})
    DURATIONS.write_text(json.dumps(dict(sorted(recorded.items(), key=lambda kv: -kv[1])),
                                    indent=1) + "\n")
