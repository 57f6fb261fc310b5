"""`geops bench paper --quick`: the harness runs end to end and produces every file."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cli.bench_paper import QUICK_FILES

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_quick_paper_bench_produces_every_file(tmp_path):
    out, work = tmp_path / "out", tmp_path / "work"
    result = subprocess.run(
        [sys.executable, "-m", "cli.main", "bench", "paper", "--quick", "--out", str(out),
         "--workdir", str(work)],
        capture_output=True, text=True, timeout=600,
        env={**os.environ, "GEOPS_STATE_DIR": str(tmp_path / "state")})
    assert result.returncode == 0, result.stderr[-4000:]
    for name in QUICK_FILES:
        assert (out / name).stat().st_size > 0, name
    with open(out / "runs.csv") as fh:
        runs = list(csv.DictReader(fh))
    assert {(r["mode"], r["skew"]) for r in runs} == {
        ("Static STAL", "0.9"), ("Dynamic LB STAL", "0.5"), ("Dynamic LB STAL", "0.9")}
    assert all(float(r["throughput"]) > 0 and int(r["records"]) == 12_000 for r in runs)
    assert all(r["rebalances"] == "0" for r in runs if r["mode"] == "Static STAL")


def _processes_with(marker: bytes) -> list[int]:
    """Live processes whose environment holds ``marker`` (zombies have none)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker in (entry / "environ").read_bytes():
                    pids.append(int(entry.name))
            except OSError:
                pass  # gone, or not ours to read
    return pids


def _alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie has ended)."""
    try:
        return "State:\tZ" not in Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="needs Linux /proc")
def test_sigterm_stops_the_run_in_progress_and_leaves_nothing_running(tmp_path):
    out, work = tmp_path / "out", tmp_path / "work"
    log = tmp_path / "bench.log"
    with open(log, "w") as err:
        bench = subprocess.Popen(
            [sys.executable, "-m", "cli.main", "bench", "paper", "--quick", "--out", str(out),
             "--workdir", str(work)], stderr=err,
            env={**os.environ, "GEOPS_STATE_DIR": str(tmp_path / "state")})
    try:
        deadline = time.monotonic() + 300
        while not any("Running Spark version" in p.read_text()
                      for p in work.glob("*/app.log")):  # the app's JVM is up
            assert bench.poll() is None and time.monotonic() < deadline, "the app never started"
            time.sleep(0.5)
        (state,) = [p.parent for p in work.glob("*/app.log")]
        broker_pid = json.loads((state / "broker" / "broker.json").read_text())["pid"]
        bench.send_signal(signal.SIGTERM)
        bench.wait(timeout=120)
    finally:
        if bench.poll() is None:
            bench.kill()
    err = log.read_text()
    assert bench.returncode == 130, err[-4000:]
    assert f"interrupted during {state.name}" in err
    assert not _processes_with(f"GEOPS_STATE_DIR={state}\0".encode()), "app or distributor left"
    assert not _alive(broker_pid), "broker left running"
    assert not (out / "runs.csv").exists() or len((out / "runs.csv").read_text().splitlines()) <= 1
