"""`geops bench paper --quick`: the harness runs end to end and produces every file."""

from __future__ import annotations

import csv
import os
import subprocess
import sys

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
        ("Static STAL", "0.5"), ("Static STAL", "0.9"),
        ("Dynamic LB STAL", "0.5"), ("Dynamic LB STAL", "0.9")}
    assert all(float(r["throughput"]) > 0 and int(r["records"]) == 12_000 for r in runs)
    assert all(r["rebalances"] == "0" for r in runs if r["mode"] == "Static STAL")
