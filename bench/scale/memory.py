"""What `geops bench scale` measures beside the app's metrics: the memory of every process of
the app's tree by role (VmRSS, VmHWM), and the machine's load average during the runs."""

from __future__ import annotations

import re
import subprocess
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.harness.csv_tables import append_csv
from bench.harness.procfs import process_parents, tree_memory
from bench.harness.publisher import now_ms


@dataclass
class MemoryPeaks:
    """Peak memory by role: the largest sum of VmRSS over one sample, and the largest VmHWM of
    one process (the kernel's own peak, so nothing between samples is missed)."""

    rss_sum_kb: dict[str, int] = field(default_factory=dict)
    hwm_kb: dict[str, int] = field(default_factory=dict)
    hwm_by_pid: dict[int, tuple[str, int]] = field(default_factory=dict)

    def add(self, sample: Iterable[tuple[int, str, int, int]]) -> None:
        """One sample: (pid, role, VmRSS kB, VmHWM kB) per process."""
        sums: dict[str, int] = {}
        for pid, role, rss, hwm in sample:
            sums[role] = sums.get(role, 0) + rss
            prev = self.hwm_by_pid.get(pid, (role, 0))[1]
            self.hwm_by_pid[pid] = (role, max(prev, hwm))
            self.hwm_kb[role] = max(self.hwm_kb.get(role, 0), hwm)
        for role, kb in sums.items():
            self.rss_sum_kb[role] = max(self.rss_sum_kb.get(role, 0), kb)

    def hwm_sum_kb(self, role: str) -> int:
        """Sum of the per-process peaks of a role (an upper bound of its peak together)."""
        return sum(h for r, h in self.hwm_by_pid.values() if r == role)

    def row(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for role in ("app-driver-python", "app-jvm", "app-python-workers"):
            key = role.removeprefix("app-").replace("-", "_")
            out[f"{key}_hwm_mb"] = round(self.hwm_kb.get(role, 0) / 1024, 1)
            out[f"{key}_rss_peak_mb"] = round(self.rss_sum_kb.get(role, 0) / 1024, 1)
        out["python_workers_hwm_sum_mb"] = round(self.hwm_sum_kb("app-python-workers") / 1024, 1)
        return out


class UptimeLog(threading.Thread):
    """``uptime`` every ``every`` seconds into a CSV (time, load averages, the line)."""

    def __init__(self, path: Path, every: float = 10.0):
        super().__init__(daemon=True, name="bench-scale-uptime")
        self.path, self.every = path, every
        self.stopping = threading.Event()
        self.rows: list[dict[str, Any]] = []

    def run(self) -> None:
        while not self.stopping.is_set():
            line = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
            load = [float(x) for x in re.findall(r"[\d.]+", line.rsplit("average:", 1)[-1])[:3]]
            row = {"time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                   "epoch_s": round(time.time(), 1),
                   "load1": load[0] if load else None, "load5": load[1] if len(load) > 1 else None,
                   "load15": load[2] if len(load) > 2 else None, "uptime": line}
            self.rows.append(row)
            append_csv(self.path, [row])
            self.stopping.wait(self.every)

    def mean_load(self, t0: float, t1: float) -> float | None:
        vals = [r["load1"] for r in self.rows
                if r["load1"] is not None and t0 <= r["epoch_s"] <= t1]
        return round(sum(vals) / len(vals), 2) if vals else None

    def close(self) -> None:
        self.stopping.set()
        self.join(15)


class MemorySampler(threading.Thread):
    """The app's process tree every ``every`` s; ``over`` is set (with the sample's total)
    when the tree's summed RSS exceeds ``limit_mb`` (0: no limit)."""

    def __init__(self, root_pid: int, every: float = 1.0, limit_mb: float = 0.0):
        super().__init__(daemon=True, name="bench-scale-memory")
        self.root, self.every, self.limit_mb = root_pid, every, limit_mb
        self.over: float | None = None
        self.peaks = MemoryPeaks()
        self.samples: list[dict[str, Any]] = []
        self.stopping = threading.Event()

    def run(self) -> None:
        while not self.stopping.is_set():
            sample = tree_memory(self.root, "app-driver-python", process_parents())
            self.peaks.add(sample)
            sums: dict[str, int] = {}
            for _, role, rss, _ in sample:
                sums[role] = sums.get(role, 0) + rss
            total_mb = sum(sums.values()) / 1024
            if self.limit_mb and total_mb > self.limit_mb and self.over is None:
                self.over = total_mb
            self.samples.append({"time_ms": now_ms(),
                                 **{f"{r}_rss_mb": round(kb / 1024, 1)
                                    for r, kb in sorted(sums.items())}})
            self.stopping.wait(self.every)

    def close(self) -> None:
        self.stopping.set()
        self.join(10)
