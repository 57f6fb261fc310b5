"""What a real-time task reports on the metrics topic: a ``BatchSummary`` per task and period.

A real-time task has no micro-batches; with every commit of the records it answered (its period:
the commit interval while records arrive, ``PERIOD_S`` while none do) it sums up what it did
since the last in a record of the micro-batch path's schema, so ``geops stats``, ``stats
--follow``, the dashboard and the benchmarks read a real-time app as they read a micro-batch
app. Such a summary covers one task's partitions: ``source_end_offsets`` names only those
(readers keep each partition's newest offset), and its ``batch_id`` is unique over the tasks
and the app's life (``period_id``). ``duration_ms`` is the time the task spent answering in the
period (a load, not a wait), and the latency is each matched publication's, from its event time
to the moment its ``Match`` was produced.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from app.metrics import latency_stats

PERIOD_S = 1.0
JOIN = "real-time"  # BatchSummary.join of a real-time summary: no stream-static join ran


def period_id(end_ms: int, index: int, workers: int) -> int:
    """The ``batch_id`` of task ``index``'s summary of the period that ended at ``end_ms``:
    distinct for every task and period (periods of one task are at least a millisecond
    apart)."""
    return end_ms * workers + index


@dataclass
class Period:
    """What one task did since its last summary."""

    start_ms: int = field(default_factory=lambda: int(time.time() * 1000))
    records: int = 0
    dead: int = 0
    matched: int = 0
    busy_s: float = 0.0
    event_ms: list[np.ndarray] = field(default_factory=list)
    match_ms: list[np.ndarray] = field(default_factory=list)

    def answered(self, records: int, dead: int, event_ms: np.ndarray, match_ms: int,
                 busy_s: float) -> None:
        """One poll's records answered: ``event_ms`` of those matched, at ``match_ms``."""
        self.records += records
        self.dead += dead
        self.matched += len(event_ms)
        self.busy_s += busy_s
        if len(event_ms):
            self.event_ms.append(np.asarray(event_ms, np.int64))
            self.match_ms.append(np.full(len(event_ms), match_ms, np.int64))

    def summary(self, app_id: str, strategy: str, index: int, workers: int, partitions: int,
                positions: Mapping[int, int], subscriptions: Mapping[int, int]
                ) -> dict[str, Any]:
        """The period's BatchSummary record, ending now."""
        end = int(time.time() * 1000)
        mean, p50, p99 = latency_stats(_joined(self.event_ms), _joined(self.match_ms))
        return {
            "app_id": app_id, "batch_id": period_id(end, index, workers), "epoch": 0,
            "strategy": strategy, "join": JOIN, "workers": workers, "partitions": partitions,
            "records": self.records, "dead_letters": self.dead, "items": self.records,
            "matched_publications": self.matched, "start_time": self.start_ms,
            "end_time": end, "duration_ms": self.busy_s * 1000, "join_stage_ms": 0.0,
            "job_ms": self.busy_s * 1000, "write_ms": 0.0, "latency_mean_ms": mean,
            "latency_p50_ms": p50, "latency_p99_ms": p99,
            "source_end_offsets": {str(p): int(o) for p, o in positions.items()},
            "subscription_offsets": {str(p): int(o) for p, o in subscriptions.items()},
            "replicas": []}


def _joined(parts: list[np.ndarray]) -> np.ndarray:
    return np.concatenate(parts) if parts else np.empty(0, np.int64)
