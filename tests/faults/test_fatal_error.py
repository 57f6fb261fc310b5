"""A fatal error is never a hang: a driver JVM too small for the static side stops the app.

Before, an OutOfMemoryError in the driver's RPC dispatcher thread (sending a task that carried
the static partitions) killed that thread only, and the app waited forever for a stage that
never ran. Now `geops app` starts the JVM with -XX:+ExitOnOutOfMemoryError, recognises the
error in its output and ends with one line naming the setting, exit code 6, in bounded time.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import config
from config.exitcodes import EXIT_FATAL
from geops.workload import generate_workload
from tests.app.conftest import Workload, load
from tests.conftest import kafka_env

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def _processes_naming(text: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if text.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def test_out_of_memory_in_the_driver_ends_the_app_with_one_line(broker, tmp_path):
    env = kafka_env(broker, str(tmp_path / "state"), "fatal-")
    cfg = config.load(environ=env)
    w = generate_workload(seed=3, subscriptions=50_000, publications=10)
    load(cfg, Workload(w.subscriptions, w.publications, {}))
    # Spark refuses a heap under 450 MiB unless its reserve is lowered; a small heap keeps the
    # static side that overflows it small, so the test stays quick.
    small = tmp_path / "small.toml"
    small.write_text('[spark.conf]\n"spark.testing.reservedMemory" = "0"\n')
    app_id = f"fatal-{os.getpid()}"
    started = time.monotonic()
    app = subprocess.Popen(
        [sys.executable, "-m", "cli.main", "app", "--config", str(small), "--master", "local[2]",
         "--workers", "2", "--driver-memory", "150m", "--app-id", app_id],
        env={**os.environ, **env}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True)
    try:
        out, err = app.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        os.killpg(app.pid, 9)
        raise AssertionError("the app hung after the fatal error") from None
    took = time.monotonic() - started
    assert app.returncode == EXIT_FATAL, (out + err)[-4000:]
    last = err.strip().splitlines()[-1]
    assert last.startswith("geops app: the Spark driver JVM ran out of memory "
                           "(java.lang.OutOfMemoryError"), last
    assert "raise spark.driver_memory (--driver-memory, now 150m)" in last, last
    assert "Terminating due to java.lang.OutOfMemoryError" in out + err
    assert "50000 subscriptions (" in out + err  # it ran out while placing the static side
    time.sleep(1)
    assert not _processes_naming(app_id), "a process of the app outlived it"
    print(f"\nexit {app.returncode} after {took:.0f} s: {last}")
