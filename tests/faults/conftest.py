"""A broker of the test's own, which the test may pause, stop or restart."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator

import pytest

from kafkaio import broker as embedded


@pytest.fixture
def own_broker(tmp_path) -> Iterator[embedded.BrokerInfo]:
    state = tmp_path / "broker"
    info, _ = embedded.start(state, port=0)
    try:
        yield info
    finally:
        current = embedded.status(state)
        if current is not None:
            os.kill(current.pid, signal.SIGCONT)  # in case the test failed while it was paused
        embedded.stop(state)
