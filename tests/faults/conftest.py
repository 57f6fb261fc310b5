"""A broker (or a three-node cluster) of the test's own, which the test may pause, stop, kill
or restart; the processes a test starts, gone when it ends."""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from kafkaio import broker as embedded
from tests.faults.stack import Procs


@pytest.fixture
def broker_state(tmp_path) -> Path:
    """The state directory of the test's own broker: what ``kafkaio.broker`` functions take."""
    return tmp_path / "broker"


@pytest.fixture
def own_broker(broker_state: Path) -> Iterator[embedded.BrokerInfo]:
    """A single-node broker of this test's own."""
    info, _ = embedded.start(broker_state, port=0)
    try:
        yield info
    finally:
        current = embedded.status(broker_state)
        if current is not None:
            for pid in current.pids:  # in case the test failed while it was paused
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGCONT)
        embedded.stop(broker_state)


@pytest.fixture
def procs(tmp_path) -> Iterator[Procs]:
    """Starts the app and the distributor (logs in ``tmp_path/logs``); kills what still runs
    when the test ends, so a failed test leaves no Spark behind."""
    started = Procs(tmp_path / "logs")
    try:
        yield started
    finally:
        started.reap()
