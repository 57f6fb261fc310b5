"""CPU seconds of the local broker, Spark's Python workers and the driver (JVM + Python)
over one bench run: polls /proc every 0.3 s until the ``geops app`` process has come and gone
(at most 20 minutes), then prints the totals.

Usage: start ``python -m bench.studies.cpu_by_process`` just before a one-run
``geops bench paper ...`` (the re-check's ``read-whole-ab/stream-3`` and ``whole-3``).
"""

from __future__ import annotations

import os
import subprocess
import time

from bench.harness.procfs import CLOCK_TICKS, cpu_ticks


def kind_of(cmdline: str) -> str | None:
    """Which of the run's processes a command line belongs to, or None."""
    if "kafka.Kafka" in cmdline:
        return "broker"
    if "pyspark.daemon" in cmdline:
        return "python workers"
    if "app/main.py" in cmdline:
        return "driver (JVM + Python)"
    return None


def scan(seen: dict[str, tuple[str, float]]) -> None:
    """Record the CPU time so far of every process of the run, by pid."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                kind = kind_of(fh.read().replace(b"\0", b" ").decode())
            if kind is None:
                continue
            with open(f"/proc/{pid}/stat") as fh:
                seen[pid] = (kind, cpu_ticks(fh.read()) / CLOCK_TICKS)
        except (FileNotFoundError, ProcessLookupError):
            pass


def totals(seen: dict[str, tuple[str, float]]) -> dict[str, float]:
    out: dict[str, float] = {}
    for kind, cpu in seen.values():
        out[kind] = out.get(kind, 0.0) + cpu
    return {k: round(v, 1) for k, v in out.items()}


def main(argv: list[str] | None = None) -> None:
    seen: dict[str, tuple[str, float]] = {}
    app_seen = False
    deadline = time.time() + 1200
    while time.time() < deadline:
        scan(seen)
        alive = subprocess.run(["pgrep", "-f", "cli.main app"], capture_output=True,
                               check=False).stdout.strip()
        app_seen = app_seen or bool(alive)
        if app_seen and not alive:
            break
        time.sleep(0.3)
    print(totals(seen))


if __name__ == "__main__":
    main()
