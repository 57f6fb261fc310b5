"""Figures the app reports on the metrics topic (per-partition loads: ``app.records``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from geops.strategies.strategy import Layout


def latency_stats(event_ms: np.ndarray, match_ms: int | np.ndarray) -> tuple[float | None, ...]:
    """(mean, p50, p99) of match time (one for all, or one each) minus event time in ms, or
    Nones when nothing matched."""
    if len(event_ms) == 0:
        return None, None, None
    return latency_summary(match_ms - np.asarray(event_ms, np.float64))


def latency_summary(latencies_ms: np.ndarray) -> tuple[float | None, ...]:
    """(mean, p50, p99) of latencies in ms, or Nones when there are none."""
    if len(latencies_ms) == 0:
        return None, None, None
    lat = np.asarray(latencies_ms, np.float64)
    return float(lat.mean()), float(np.percentile(lat, 50)), float(np.percentile(lat, 99))


def layout_record(app_id: str, layout: Layout, workers: int, sizes: np.ndarray,
                  now_ms: int) -> dict[str, Any]:
    """A PartitionLayout record: the partitioner's cells cut at the subscriptions' extent (its
    frame), so a map can draw the static partitions; ``sizes`` are subscriptions per partition.
    """
    bounds = layout.envelopes.bounds
    if len(bounds):
        extent = [float(bounds[:, 0].min()), float(bounds[:, 1].min()),
                  float(bounds[:, 2].max()), float(bounds[:, 3].max())]
    else:
        extent = [0.0, 0.0, 1.0, 1.0]
    spatial = layout.partitioner
    if spatial is None:
        kind, cells = "hash", []
    else:
        low = np.array(extent[:2] * 2)
        high = np.array(extent[2:] * 2)
        kind = spatial.kind
        cells = np.clip(spatial.cells, low, high).ravel().tolist()
    return {"app_id": app_id, "strategy": layout.name, "partitioner": kind,
            "partitions": int(layout.num_partitions), "workers": int(workers),
            "extent": extent, "cells": cells,
            "subscriptions": [int(n) for n in sizes], "time": now_ms}
