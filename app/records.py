"""What crosses the app's shuffle and what the join tasks return: one named type per kind.

Stream-side (read) tasks emit, keyed by the worker that joins them:

- ``Items``: the stream items of one static partition, column-wise (one record per partition per
  read task, not one per item);
- ``Presence``: every valid publication of a read task, sent only when DISJOINT subscriptions
  exist (they match publications that reach no partition);
- ``ReadStats``: how many records a read task read and dead-lettered;
- ``Positions``: the valid publications with an object id (positions of moving objects).

When the join tasks write their own matches (``app.batch.task_output``) the read tasks also
emit ``Shared`` (keys of a worker's publications that other workers see too, or that are
positions) and ``Unrouted`` (publications that reach no partition, to the one worker that
answers them), and ``Presence`` only for shared publications; a join task that wrote returns a
``Wrote``.

The static side adds one ``StaticPartition`` per partition (from the cache in STAL, shipped each
batch in STRL). A join task returns per partition it handled a ``Matched`` and a
``PartitionLoad``, passes ``Presence``/``ReadStats``/``Positions`` on unchanged, and ends with
one ``Busy``.

They are NamedTuples: pickled as tuples plus a class reference, as cheap as the tagged tuples
they replaced; the payloads stay column-wise NumPy arrays.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np


class Items(NamedTuple):
    """Stream items routed to one static partition."""

    partition: int
    keys: np.ndarray                # int64 publication keys (Kafka partition and offset)
    ids: np.ndarray                 # publication ids
    wkbs: np.ndarray                # geometries as WKB
    event_ms: np.ndarray            # event times
    cand_offsets: np.ndarray | None  # candidate ids per item (CSR), for candidate routers
    cand_ids: np.ndarray | None


class Presence(NamedTuple):
    """Every valid publication of a read task (for the DISJOINT subscriptions)."""

    keys: np.ndarray
    ids: np.ndarray
    event_ms: np.ndarray


class Positions(NamedTuple):
    """The publications of a read task that are positions of moving objects (an object id),
    for the geofence events (``app.events.positions``)."""

    keys: np.ndarray
    ids: np.ndarray
    object_ids: np.ndarray          # str objects
    event_ms: np.ndarray
    places: np.ndarray | None = None  # (n, 2) float64: where tracks end (``cross``)


class ReadStats(NamedTuple):
    records: int
    dead_letters: int


class StaticPartition(NamedTuple):
    partition: int
    payload: bytes


class Matched(NamedTuple):
    """What one partition matched: partial results and the publications they are for."""

    partition: int
    partial: Any                    # geops.strategies.PartialMatches
    keys: np.ndarray                # matched publication keys (unique)
    ids: np.ndarray                 # their publication ids
    event_ms: np.ndarray            # and event times


class PartitionLoad(NamedTuple):
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
        """The PartitionLoad record of the metrics topic."""
        return {"app_id": app_id, "batch_id": batch_id, "epoch": epoch, **self._asdict(),
                "time": now_ms}


class Payloads(NamedTuple):
    """The static payloads one join task was given, ``{partition: bytes}``: how the sizes of
    folded payloads are measured without a job of their own."""

    worker: int
    sizes: dict[int, int]


class Busy(NamedTuple):
    """How long one join task ran."""

    worker: int
    busy_ns: int


class Shared(NamedTuple):
    """Keys of publications a worker gets items of that it does not answer alone: items also
    on another worker, or a position of a moving object (the driver merges them)."""

    keys: np.ndarray


class Unrouted(NamedTuple):
    """Publications that reach no partition, answered (DISJOINT matches) by this worker."""

    keys: np.ndarray
    ids: np.ndarray
    event_ms: np.ndarray


class Wrote(NamedTuple):
    """What one join task wrote itself: how many ``Match`` records, their latencies (match
    time minus event time, ms) and which loads (partition, worker); ``skipped``: a retried
    task found its attempt before it committed, and wrote nothing again."""

    worker: int
    matched: int
    latencies_ms: np.ndarray
    loads: tuple[tuple[int, int], ...]
    skipped: bool = False
