"""Figures the app reports on the metrics topic (per-partition loads: ``app.records``)."""

from __future__ import annotations

import numpy as np


def latency_stats(event_ms: np.ndarray, match_ms: int) -> tuple[float | None, ...]:
    """(mean, p50, p99) of match time minus event time in ms, or Nones when nothing matched."""
    if len(event_ms) == 0:
        return None, None, None
    lat = match_ms - np.asarray(event_ms, np.float64)
    return float(lat.mean()), float(np.percentile(lat, 50)), float(np.percentile(lat, 99))
