"""A fatal error is never a hang: a driver JVM too small for the static side stops the app;
and a static side that once did not fit through the driver now runs.

Before, an OutOfMemoryError in the driver's RPC dispatcher thread (sending a task that carried
the static partitions) killed that thread only, and the app waited forever for a stage that
never ran. Now `geops app` starts the JVM with -XX:+ExitOnOutOfMemoryError, recognises the
error in its output and ends with one line naming the setting, exit code 6, in bounded time.
Since static partitions are built on the executors, 50,000 subscriptions run in the 150 MiB
heap where they ran out before (the second test); in local mode the executors share the
driver's JVM, so a 64 MiB heap still runs out while the static side is built.
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

HEAP = os.environ.get("GEOPS_TEST_FATAL_HEAP", "64m")


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


def run_small_heap(tmp_path: Path, env: dict[str, str], heap: str, flags: list[str],
                   timeout: float, hung: str) -> tuple[int, str, str]:
    """`geops app` (local[2], 2 workers) with a ``heap`` driver JVM: exit code, stdout, stderr.
    Spark refuses a heap under 450 MiB unless its reserve is lowered, which the config does."""
    small = tmp_path / "small.toml"
    small.write_text('[spark.conf]\n"spark.testing.reservedMemory" = "0"\n')
    app = subprocess.Popen(
        [sys.executable, "-m", "cli.main", "app", "--config", str(small), "--master", "local[2]",
         "--workers", "2", "--driver-memory", heap, *flags],
        env={**os.environ, **env}, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        start_new_session=True)
    try:
        out, err = app.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(app.pid, 9)
        raise AssertionError(hung) from None
    return app.returncode, out, err


def test_out_of_memory_in_the_driver_ends_the_app_with_one_line(broker, tmp_path):
    env = kafka_env(broker, str(tmp_path / "state"), "fatal-")
    cfg = config.load(environ=env)
    w = generate_workload(seed=3, subscriptions=50_000, publications=10)
    load(cfg, Workload(w.subscriptions, w.publications, {}))
    # A small heap keeps the static side that overflows it small, so the test stays quick
    # (64 MiB: the executors, which share the driver's JVM in local mode, run out while
    # reading and building 50,000 subscriptions).
    app_id = f"fatal-{os.getpid()}"
    started = time.monotonic()
    code, out, err = run_small_heap(tmp_path, env, HEAP, ["--app-id", app_id], 300,
                                    "the app hung after the fatal error")
    took = time.monotonic() - started
    assert code == EXIT_FATAL, (out + err)[-4000:]
    last = err.strip().splitlines()[-1]
    assert last.startswith("geops app: the Spark driver JVM ran out of memory "
                           "(java.lang.OutOfMemoryError"), last
    assert f"raise spark.driver_memory (--driver-memory, now {HEAP})" in last, last
    assert "Terminating due to java.lang.OutOfMemoryError" in out + err
    # it ran out in Spark's work (the executors scanning and building the static side), not
    # before the session started
    assert "Running Spark version" in out + err
    time.sleep(1)
    assert not _processes_naming(app_id), "a process of the app outlived it"
    print(f"\nexit {code} after {took:.0f} s: {last}")


def test_a_static_side_bigger_than_the_driver_can_ship_runs_and_is_correct(broker, tmp_path):
    """The setting that ran out of memory before static partitions were built on the
    executors (50,000 subscriptions, a 150 MiB driver heap, the test above) now runs: the
    partitions never pass through the driver, and with a producer writing while the app runs,
    every publication gets the oracle's matches."""
    from geops.oracle import oracle_answers
    from tests.app.conftest import matches
    from tests.app.live import LiveProducer, Phase, load_subscriptions_only

    env = kafka_env(broker, str(tmp_path / "state"), "bigstatic-")
    cfg = config.load(environ=env)
    w = generate_workload(seed=3, subscriptions=50_000, publications=300)
    load_subscriptions_only(cfg, w.subscriptions)
    producer = LiveProducer(cfg, w.publications, [Phase(150, rate=100), Phase(150)]).start()
    code, out, err = run_small_heap(tmp_path, env, "150m",
                                    ["--strategy", "sPIS", "--stop-after-idle", "4s"], 400,
                                    "the app did not finish")
    producer.join()
    assert code == 0, (out + err)[-4000:]
    assert "built on the executors" in out + err
    oracle = oracle_answers(w.subscriptions, w.publications.ids, w.publications.geoms)
    got = matches(cfg)
    assert {k: v[0] for k, v in got.items()} == oracle
    assert all(len(v) == 1 for v in got.values())
