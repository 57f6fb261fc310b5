"""Keeping the static side's snapshot (``app.static_snapshot``) current, in a thread of its own.

After a build from the topic the executors have written each partition's payload into a
snapshot being made; the thread checks and completes it. After that, each batch's
subscription changes (the partition deltas ``LiveSubscriptions.apply`` made, and the
envelopes and fence masks of what changed) are handed over as they are (no copy, no work on
the batch's path) and the thread folds them into the payloads of the partitions they touch,
links the others from the snapshot before, and puts the new one in force. It writes at most
every ``MIN_INTERVAL_S``, and waits ``COST_FACTOR`` times as long as its last write took, so
under a steady stream of changes it takes a bounded share of the driver's time; a restart
reads the changes after the snapshot's offsets from the topic, so one that lags behind costs
only those.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
import time
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from app.static.snapshot import (
    Identity,
    Snapshot,
    checksum,
    clear_stages,
    new_stage,
    payload_name,
    publish,
)
from geops.model import Envelopes, Subscriptions
from geops.partitioning.tree import SpatialPartitioner
from geops.strategies import payload
from geops.strategies.churn import PartitionDelta, fold_deltas

log = logging.getLogger("geops.app.snapshot")


@dataclass(frozen=True)
class Built:
    """A build from the topic whose payloads the executors wrote into ``stage``."""

    stage: Path
    offsets: dict[int, int]
    envelopes: Envelopes
    detect: np.ndarray
    partitioner: SpatialPartitioner | None
    num_partitions: int
    sizes: np.ndarray           # payload bytes per partition, as the build measured them


@dataclass(frozen=True)
class Changed:
    """One batch's subscription changes, as the driver applied them."""

    upserts: Subscriptions
    detect: np.ndarray
    deletes: np.ndarray
    deltas: dict[int, PartitionDelta]
    offsets: dict[int, int]     # the subscriptions topic's, after this change


class SnapshotWriter:
    """Writes the snapshots of one app's static side, in a thread."""

    MIN_INTERVAL_S = 5.0
    COST_FACTOR = 10.0

    def __init__(self, root: Path, identity: Identity, base: Snapshot | None = None):
        self.root = root
        self.identity = identity
        self.base = base            # the snapshot in force that changes are folded into
        self.keep = frozenset([base.name] if base is not None else [])  # read by the executors
        self.written = 0            # snapshots put in force by this writer
        self._built: Built | None = None
        self._changes: list[Changed] = []
        self._failed = False
        self._cond = threading.Condition()
        self._stop = False
        self._next = 0.0            # time.monotonic() before which no snapshot is written
        clear_stages(root)
        self._thread = threading.Thread(target=self._run, name="static-snapshot", daemon=True)
        self._thread.start()

    def built(self, built: Built) -> None:
        """The static side was built from the topic, its payloads written into a stage."""
        with self._cond:
            self._built = built
            self._changes.clear()
            self._cond.notify_all()

    def changed(self, change: Changed) -> None:
        """A batch applied subscription changes (called on the batch's path: it only queues)."""
        with self._cond:
            if not self._failed:
                self._changes.append(change)
                self._cond.notify_all()

    def _take(self) -> tuple[Built | None, list[Changed]] | None:
        """The work to do now, waiting for it; None when stopped."""
        with self._cond:
            while not self._stop:
                if self._built is not None:
                    built, self._built = self._built, None
                    return built, []
                wait = self._next - time.monotonic()
                if self._changes and self.base is not None and wait <= 0:
                    changes, self._changes = self._changes, []
                    return None, changes
                self._cond.wait(max(0.05, wait) if self._changes else None)
            return None

    def _run(self) -> None:
        while (work := self._take()) is not None:
            built, changes = work
            t0 = time.monotonic()
            try:
                self.base = self._complete(built) if built is not None else self._fold(changes)
            except Exception as exc:  # a snapshot is an optimisation: the app goes on
                log.warning("no snapshot of the static side: %s: %s", type(exc).__name__, exc)
                self.base = None
            took = time.monotonic() - t0
            with self._cond:
                self._next = time.monotonic() + max(self.MIN_INTERVAL_S, self.COST_FACTOR * took)
                if self.base is None:
                    self._failed = True
                    self._changes.clear()
                    self._cond.notify_all()
                    continue
                self.written += 1
                self._cond.notify_all()
            log.info("static side snapshot %s in force: %d subscriptions, %d bytes, "
                     "subscription offsets %s (written in %.1f s)", self.base.name,
                     len(self.base.envelopes), self.base.total_bytes, self.base.offsets, took)

    def _complete(self, built: Built) -> Snapshot | None:
        """Check the payloads the executors wrote and put the snapshot in force."""
        files = {}
        for pid in np.flatnonzero(built.sizes).tolist():
            path = built.stage / payload_name(pid)
            size = path.stat().st_size if path.exists() else -1
            if size != built.sizes[pid]:
                shutil.rmtree(built.stage, ignore_errors=True)
                log.warning("no snapshot of the static side: partition %d's payload is not "
                            "in %s as the executors built it (the driver and the executors "
                            "must share the checkpoint directory)", pid, built.stage)
                return None
            files[pid] = checksum(path)
        return self._publish(built.stage, built.offsets, built.envelopes, built.detect,
                             built.partitioner, built.num_partitions, files)

    def _fold(self, changes: list[Changed]) -> Snapshot:
        """A new snapshot: the base with ``changes`` folded into the partitions they touch."""
        base = self.base
        assert base is not None
        stage = new_stage(self.root)
        touched: dict[int, list[PartitionDelta]] = {}
        for change in changes:
            for pid, delta in change.deltas.items():
                touched.setdefault(pid, []).append(delta)
        files = {}
        for pid in range(base.num_partitions):
            path = stage / payload_name(pid)
            if pid in touched:
                data = fold_deltas(self._payload(base, pid), touched[pid])
                path.write_bytes(data)
                files[pid] = (len(data), zlib.crc32(data))
            elif pid in base.files:
                _link(base.path(pid), path)
                files[pid] = base.files[pid]
        envelopes, detect = base.envelopes, base.detect
        for change in changes:
            envelopes, detect = _applied(envelopes, detect, change)
        return self._publish(stage, changes[-1].offsets, envelopes, detect, base.partitioner,
                             base.num_partitions, files)

    @staticmethod
    def _payload(base: Snapshot, pid: int) -> bytes:
        if pid in base.files:
            return base.path(pid).read_bytes()
        cell = (payload.WHOLE_PLANE if base.partitioner is None
                else base.partitioner.cells[pid])
        return payload.encode(Subscriptions(np.empty(0, np.int64), np.empty(0, object),
                                            np.empty(0, np.int8)), cell)

    def _publish(self, stage: Path, offsets: Mapping[int, int], envelopes: Envelopes,
                 detect: np.ndarray, partitioner: SpatialPartitioner | None,
                 num_partitions: int, files: dict[int, tuple[int, int]]) -> Snapshot:
        name = publish(stage, self.identity, offsets, envelopes, detect, partitioner,
                       num_partitions, files, self.keep)
        return Snapshot(name, self.root / name, self.identity, dict(offsets), envelopes,
                        detect, partitioner, num_partitions, files)

    def wait_written(self, count: int, timeout: float) -> bool:
        """Wait until ``count`` snapshots were put in force (tests, benchmarks)."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while self.written < count and not self._failed:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
            return self.written >= count

    def close(self, timeout: float = 10.0) -> None:
        """Stop after the snapshot being written, if any (what is queued is dropped: a
        restart reads those changes from the topic)."""
        with self._cond:
            self._stop = True
            self._cond.notify_all()
        self._thread.join(timeout)


def _applied(envelopes: Envelopes, detect: np.ndarray, change: Changed
             ) -> tuple[Envelopes, np.ndarray]:
    """The live set's envelopes and fence masks after one change (deletes, then upserts
    replacing their id), sorted by id."""
    ups = Envelopes.of(change.upserts)
    gone = np.union1d(np.asarray(change.deletes, np.int64), ups.ids)
    keep = np.flatnonzero(~np.isin(envelopes.ids, gone))
    ids = np.concatenate([envelopes.ids[keep], ups.ids])
    order = np.argsort(ids, kind="stable")
    merged = Envelopes(ids, np.concatenate([envelopes.bounds[keep], ups.bounds]),
                       np.concatenate([envelopes.points[keep], ups.points]),
                       np.concatenate([envelopes.relations[keep], ups.relations]))
    masks = np.concatenate([detect[keep], np.asarray(change.detect, np.uint8)])
    return merged.take(order), masks[order]


def _link(source: Path, target: Path) -> None:
    """``target`` as the same bytes as ``source``: a hard link, else a copy."""
    try:
        os.link(source, target)
    except OSError:
        shutil.copyfile(source, target)
