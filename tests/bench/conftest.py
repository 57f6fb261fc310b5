"""A small synthetic results directory with every CSV the harness writes (no Spark, no Kafka)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.harness.csv_tables import write_csv
from bench.harness.reap import stop_group
from bench.paper.plan import MODES

PIPELINES = ("sPS", "sPIS")
SKEWS = (0.5, 0.7, 0.9)
# Throughput of each mode at skew 0.5, and how much of it is lost per 0.1 of skew.
BASE = {"Static STRL": 500.0, "Static STAL": 1000.0, "Dynamic LB STAL": 1100.0,
        "Dynamic DB STAL": 1050.0, "Dynamic LB STRL": 600.0, "Dynamic DB STRL": 550.0}
DROP = {"Static STRL": 50.0, "Static STAL": 100.0, "Dynamic LB STAL": 10.0,
        "Dynamic DB STAL": 40.0, "Dynamic LB STRL": 20.0, "Dynamic DB STRL": 30.0}
ANALYSIS = "Hand-written analysis.\n\nThe *lead* explains the numbers here.\n"


def run_id(pipeline: str, mode: str, skew: float, repeat: int, label: str = "") -> str:
    rid = f"{pipeline}-{mode.replace(' ', '')}-s{round(skew * 100):02d}-r{repeat}"
    return f"{rid}-{label}" if label else rid


def throughput(mode: str, skew: float, repeat: int) -> float:
    """Repeat 0 and 1 are 5 below and above the mean."""
    return BASE[mode] - DROP[mode] * round((skew - 0.5) * 10) + (10 * repeat - 5)


def run_row(pipeline: str, mode: str, skew: float, repeat: int, thr: float,
            label: str = "", subscriptions: int = 10_000, rebalances: int = 0) -> dict:
    join, balancing = MODES[mode]
    return {"run_id": run_id(pipeline, mode, skew, repeat, label), "pipeline": pipeline,
            "mode": mode, "skew": skew, "repeat": repeat, "join": join,
            "balancing": balancing, "subscriptions": subscriptions, "publications": 6000,
            "partitions": 64, "workers": 2, "records": 6000, "batches": 3,
            "first_start_ms": 0, "last_end_ms": 6000 / thr * 1000, "throughput": thr,
            "latency_mean_ms": 1e6 / thr, "latency_p50_ms": 1e6 / thr,
            "latency_p99_ms": 2e6 / thr, "delay_ms_per_record": 1000 / thr,
            "skew_items": skew, "skew_load": skew, "rebalances": rebalances,
            "matched": 6000, "wall_s": 10}


def _mldc(mode: str, skew: float, period: int) -> float:
    if mode == "Dynamic LB STAL" and period >= 2:
        return 0.2
    return 2 * skew - 1 + 0.05 * (period % 2)


def build_results(out: Path, pipelines: tuple[str, ...] = PIPELINES,
                  modes: tuple[str, ...] = tuple(MODES), skews: tuple[float, ...] = SKEWS,
                  with_moves: bool = True) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    runs, batches, status, moves = [], [], [], []
    for pipeline in pipelines:
        for mode in modes:
            for skew in skews:
                for repeat in (0, 1):
                    thr = throughput(mode, skew, repeat)
                    dynamic_lb = mode == "Dynamic LB STAL" and skew > 0.75
                    row = run_row(pipeline, mode, skew, repeat, thr,
                                  rebalances=int(dynamic_lb))
                    runs.append(row)
                    base = {k: row[k] for k in ("run_id", "pipeline", "mode", "skew", "repeat")}
                    for b in range(3):
                        batches.append({**base, "batch_id": b, "epoch": int(dynamic_lb and b),
                                        "start_ms": b * 2000, "end_ms": b * 2000 + 1900,
                                        "records": 2000, "items": 2500,
                                        "duration_ms": 2000 / thr * 1000 * (0.9 + 0.1 * b),
                                        "join_stage_ms": 1000 / thr * 1000, "job_ms": 1,
                                        "write_ms": 1, "latency_mean_ms": 1e6 / thr,
                                        "latency_p99_ms": 2e6 / thr})
                    for period in range(5):
                        mldc = _mldc(mode, skew, period)
                        decision = ("rebalance" if dynamic_lb and period == 1 else
                                    "observe" if mode.startswith("Static") and mldc > 0.5
                                    else "none")
                        status.append({**base, "period": period, "time_ms": 10_000 * period,
                                       "epoch": int(dynamic_lb and period > 1),
                                       "mldc": "" if period == 0 else mldc, "threshold": 0.5,
                                       "decision": decision})
                    if dynamic_lb:
                        moves.append({**base, "subscriptions": 10_000, "epoch": 1,
                                      "batch_id": 1, "partitions_moved": 3,
                                      "bytes": 3_000_000, "duration_ms": 900})
    if with_moves:
        for repeat in (0, 1):
            for n, seconds in ((1_000, 0.2), (10_000, 1.0), (100_000, 6.0)):
                row = run_row("sPS", "Dynamic LB STAL", 0.7, repeat, 900.0, label=f"n{n}",
                              subscriptions=n, rebalances=1)
                runs.append(row)
                moves.append({k: row[k] for k in ("run_id", "pipeline", "mode", "skew",
                                                  "repeat")}
                             | {"subscriptions": n, "epoch": 1, "batch_id": 2,
                                "partitions_moved": 16, "bytes": n * 300,
                                "duration_ms": seconds * 1000 + 100 * repeat})
    for name, rows in (("runs", runs), ("batches", batches), ("status", status),
                       ("moves", moves)):
        write_csv(out / f"{name}.csv", rows)
    (out / "meta.json").write_text(json.dumps({
        "machine": {"cpus": 2, "platform": "Linux-test", "python": "3.11.7",
                    "pyspark": "4.3.0", "java": "openjdk 17", "date": "2026-11-22"},
        "commands": [{"command": ["geops", "bench", "paper", "--full"],
                      "date": "2026-11-22"}],
        "distributor": {"period": "10s", "threshold": 0.5}}))
    (out / "analysis.md").write_text(ANALYSIS)
    return out


@pytest.fixture
def results(tmp_path: Path) -> Path:
    """Every pipeline of PIPELINES x six modes x SKEWS x two repeats, plus Fig. 8 runs."""
    return build_results(tmp_path / "results")


@pytest.fixture
def make_results():
    """The builder itself, for directories with fewer pipelines, modes or skews."""
    return build_results


def run_geops_bench(tmp_path: Path, *argv: str, timeout: float = 300
                    ) -> tuple[subprocess.CompletedProcess, Path, Path]:
    """``geops bench ARGV --out OUT --workdir WORK`` in a subprocess under ``tmp_path``: the
    finished process (which must have succeeded), OUT and WORK. A run past ``timeout`` is
    stopped as a user would (SIGTERM, so it ends what it started) and the test fails with the
    tail of its progress and of the logs in WORK, to say where it stood."""
    out, work = tmp_path / "out", tmp_path / "work"
    args = [sys.executable, "-m", "cli.main", "bench", *argv, "--out", str(out), "--workdir",
            str(work)]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True,
                            env={**os.environ, "GEOPS_STATE_DIR": str(tmp_path / "state")})
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        stop_group(proc, grace=60)
        stdout, stderr = proc.communicate()
        pytest.fail(f"geops bench {argv[0]} ran past {timeout:.0f} s; its progress:\n"
                    f"{stderr[-4000:]}\n{_log_tails(work)}")
    result = subprocess.CompletedProcess(args, proc.returncode, stdout, stderr)
    assert result.returncode == 0, result.stderr[-4000:]
    return result, out, work


def _log_tails(work: Path, lines: int = 15) -> str:
    """The last ``lines`` lines of every log under ``work``."""
    tails = []
    for log in sorted(work.rglob("*.log")):
        text = log.read_text(errors="replace").splitlines()[-lines:]
        tails.append(f"--- {log.relative_to(work)}\n" + "\n".join(text))
    return "\n".join(tails)


def assert_nothing_left(work: Path) -> None:
    """No broker or app is left running under the benchmark's work dir."""
    left = subprocess.run(["pgrep", "-f", str(work)], capture_output=True, text=True).stdout
    assert not left.strip()
