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

The task's load goes with it as a ``PartitionLoad`` of the same ``batch_id`` (``load``), as a
micro-batch join task reports each partition's: every task holds the whole static side, which
is the one partition 0 owned by every worker (the summary's ``replicas`` say so), and the task
is its worker, so per-worker shares of items and time, and their MLDC, read as a replicated
partition's do in ``geops stats``, ``stats --follow`` and the dashboard. The distributor reads
these loads as each task's own (``join`` tells it the app is a real-time one) and reports their
MLDC without commanding: there is no static partition to move.
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
    pairs: int = 0             # (publication, subscription) matches
    candidates: int = 0        # pairs the matcher refined
    busy_s: float = 0.0
    event_ms: list[np.ndarray] = field(default_factory=list)
    match_ms: list[np.ndarray] = field(default_factory=list)

    def answered(self, records: int, dead: int, event_ms: np.ndarray, match_ms: int,
                 busy_s: float, pairs: int = 0, candidates: int = 0) -> None:
        """One poll's records answered: ``event_ms`` of those matched, at ``match_ms``, with
        their ``pairs`` found among ``candidates``."""
        self.records += records
        self.pairs += pairs
        self.candidates += candidates
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
            "replicas": ([{"partition": 0, "workers": list(range(workers))}] if workers > 1
                         else [])}

    def load(self, summary: Mapping[str, Any], index: int) -> dict[str, Any]:
        """The PartitionLoad record of task ``index``'s period, whose summary is ``summary``:
        the whole static side (partition 0) in this task (worker ``index``)."""
        return {"app_id": summary["app_id"], "batch_id": summary["batch_id"],
                "epoch": summary["epoch"], "partition": 0, "worker": index,
                "items": self.records, "processing_ns": int(self.busy_s * 1e9),
                "candidates": self.candidates, "matches": self.pairs, "index_builds": 0,
                "static_bytes": 0, "build_ns": 0, "time": summary["end_time"]}


def _joined(parts: list[np.ndarray]) -> np.ndarray:
    return np.concatenate(parts) if parts else np.empty(0, np.int64)
