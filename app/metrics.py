"""The app's reports on the metrics topic: per-partition loads, batch summaries and moves."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class PartitionLoad:
    """Work one join task did for one static partition in one batch."""

    partition: int
    worker: int
    items: int = 0
    processing_ns: int = 0
    candidates: int = 0
    matches: int = 0
    index_builds: int = 0
    static_bytes: int = 0
    build_ns: int = 0

    def record(self, app_id: str, batch_id: int, epoch: int, now_ms: int) -> dict:
        return {"app_id": app_id, "batch_id": batch_id, "epoch": epoch,
                "partition": self.partition, "worker": self.worker, "items": self.items,
                "processing_ns": self.processing_ns, "candidates": self.candidates,
                "matches": self.matches, "index_builds": self.index_builds,
                "static_bytes": self.static_bytes, "build_ns": self.build_ns, "time": now_ms}


def latency_stats(event_ms: np.ndarray, match_ms: int) -> tuple[float | None, ...]:
    """(mean, p50, p99) of match time minus event time in ms, or Nones when nothing matched."""
    if len(event_ms) == 0:
        return None, None, None
    lat = match_ms - np.asarray(event_ms, np.float64)
    return float(lat.mean()), float(np.percentile(lat, 50)), float(np.percentile(lat, 99))
