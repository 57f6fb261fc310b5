"""Latency summaries of a benchmark's publications: percentiles over a phase, and per second."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

PERCENTILES = (50, 95, 99)


def latency_summary(latencies_ms: Sequence[float] | np.ndarray) -> dict[str, float | None]:
    """{count, p50, p95, p99, max, mean} of latencies in ms (None when there are none)."""
    a = np.asarray(latencies_ms, dtype=np.float64)
    if a.size == 0:
        return {"count": 0, "p50": None, "p95": None, "p99": None, "max": None, "mean": None}
    p50, p95, p99 = np.percentile(a, PERCENTILES)
    return {"count": int(a.size), "p50": float(p50), "p95": float(p95), "p99": float(p99),
            "max": float(a.max()), "mean": float(a.mean())}


def per_second(times_ms: np.ndarray, values: np.ndarray, t0_ms: int, seconds: int
               ) -> list[dict[str, float | None]]:
    """Latency summary per whole second since ``t0_ms`` (by ``times_ms``, e.g. event time)."""
    times_ms = np.asarray(times_ms, dtype=np.int64)
    values = np.asarray(values, dtype=np.float64)
    sec = (times_ms - t0_ms) // 1000
    out = []
    for s in range(seconds):
        out.append(latency_summary(values[sec == s]))
    return out
