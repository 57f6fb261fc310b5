"""An outage longer than the limit stops the app with one line naming the broker, and exit 4."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import config
from app.main import checkpoint_dir
from app.offsetlog import initial_offsets_path
from config.exitcodes import EXIT_OUTAGE
from geops.workload import generate_workload
from tests.app.conftest import Workload, load
from tests.conftest import kafka_env

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_outage_past_the_limit_ends_the_app_in_one_line(own_broker, tmp_path):
    env = kafka_env(own_broker.address, str(tmp_path / "state"), "o-")
    cfg = config.load(environ=env)
    w = generate_workload(seed=41, subscriptions=100, publications=300)
    load(cfg, Workload(w.subscriptions, w.publications, {}))
    app = subprocess.Popen(
        [sys.executable, "-m", "cli.main", "app", "--master", "local[2]", "--workers", "2",
         "--trigger", "200ms", "--outage-limit", "15s"],
        env={**os.environ, **env}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True)
    try:
        marker = Path(initial_offsets_path(checkpoint_dir(cfg)))
        deadline = time.monotonic() + 180
        while not marker.exists():
            assert app.poll() is None and time.monotonic() < deadline, "the app did not start"
            time.sleep(0.2)
        time.sleep(3)  # a few batches
        os.kill(own_broker.pid, signal.SIGSTOP)
        stopped_at = time.monotonic()
        out, _ = app.communicate(timeout=120)
        waited = time.monotonic() - stopped_at
    finally:
        os.kill(own_broker.pid, signal.SIGCONT)
        if app.poll() is None:
            os.killpg(app.pid, signal.SIGKILL)
    assert app.returncode == EXIT_OUTAGE, out[-3000:]
    assert 15 <= waited < 90
    assert "Traceback" not in out, out[-5000:]
    final = [line for line in out.splitlines() if "did not answer for" in line]
    assert final, out[-3000:]
    assert f"Kafka at {own_broker.address}" in final[-1]
    assert "outage limit of 15 s" in final[-1]
    print(f"\nexit {app.returncode} after {waited:.0f} s: {final[-1][-220:]}")
