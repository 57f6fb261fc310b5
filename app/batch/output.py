"""How a micro-batch's output reaches Kafka: exactly-once or at-least-once (``app.delivery``).

Both give ``open(batch_id)``: the producer to send the batch's records with (no extra Python
call per record), ``headers(batch_id)`` for the batch's summary, and ``finish(batch_id)`` once
they are all sent, before ``foreachBatch`` returns and Spark commits the batch.

- ``at-least-once``: a plain idempotent producer; ``finish`` flushes. A batch that Spark runs
  again after a crash sends its records again.
- ``exactly-once``: one Kafka transaction per batch (``kafkaio.transactions``) holding its
  matches, metrics and batch summary; the summary carries a marker (transactional id, this
  query's id, the batch id) in a header. ``written(batch_id)`` says whether a batch that Spark
  runs again after a restart was already committed: then it is not written again (the newest
  marker is read in a thread as the output opens, so a replayed batch does not wait for it).
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from kafkaio.errors import KafkaUnavailable
from kafkaio.sender import Sender
from kafkaio.transactions import (
    Marker,
    TransactionalSender,
    last_marker,
    marked_back_to,
    transactional_id,
)

log = logging.getLogger("geops.app")

MODES = ("exactly-once", "at-least-once")


def query_id(checkpoint: str) -> str:
    """The id of the Spark query of ``checkpoint`` (kept across restarts; a new checkpoint is a
    new query whose batch ids start again at 0)."""
    path = Path(checkpoint) / "metadata"
    try:
        return str(json.loads(path.read_text())["id"])
    except (OSError, ValueError, KeyError) as exc:
        raise RuntimeError(f"no query id in {path}: {exc}") from None


def planned_before(checkpoint: str, batch_id: int, since: float) -> bool:
    """Whether Spark planned batch ``batch_id`` (wrote its offsets) before ``since``: a batch
    run again after a restart, which the previous process may have written."""
    try:
        return (Path(checkpoint) / "offsets" / str(batch_id)).stat().st_mtime < since
    except OSError:
        return False


@dataclass(frozen=True)
class TasksWritten:
    """Of a batch run again after a restart, what its join tasks had committed: the keys of
    the publications they answered, and the workers whose loads they wrote."""

    keys: np.ndarray
    workers: set[int]


class AtLeastOnce:
    """Flush before the batch returns; a replayed batch writes again."""

    def __init__(self, kafka_conf: Mapping[str, str], outage_limit: float):
        self.sender = Sender(kafka_conf, outage_limit=outage_limit)

    def written(self, batch_id: int) -> bool:
        return False

    def open(self, batch_id: int) -> Sender:
        return self.sender

    def headers(self, batch_id: int) -> list[tuple[str, bytes]] | None:
        return None

    def tasks_written(self, batch_id: int) -> TasksWritten | None:
        return None

    def finish(self, batch_id: int) -> None:
        self.sender.flush()

    def close(self, abandon: bool = False) -> None:
        """Flush and release; ``abandon``: the batch will be run again, do not wait long."""
        if not abandon:
            self.sender.close()
            return
        with contextlib.suppress(KafkaUnavailable):
            self.sender.close(timeout=1.0)


class ExactlyOnce:
    """One transaction per batch, its summary marked; a committed batch is not written
    again."""

    def __init__(self, kafka_conf: Mapping[str, str], outage_limit: float, *, app_id: str,
                 checkpoint: str, publications: str, outputs: tuple[str, ...]):
        self.started = time.time()  # batches planned before were planned by another process
        self.txn_id = transactional_id(app_id, publications, *outputs)
        self.sender = TransactionalSender(kafka_conf, self.txn_id, outage_limit)
        self.checkpoint = checkpoint
        self.marker_topic = outputs[-1]
        self._conf = kafka_conf
        self._limit = outage_limit
        self._query: str | None = None
        self._last: Marker | None = None
        # the newest committed batch, read now: init_transactions has fenced any older
        # producer of this id and aborted what it left open, so nothing else can commit; a
        # replayed first batch (after a restart or a takeover) then finds it read
        self._newest = _in_background(lambda: last_marker(kafka_conf, self.marker_topic,
                                                          self.txn_id, outage_limit))
        log.info("exactly-once output: transactional id %s", self.txn_id)

    def written(self, batch_id: int) -> bool:
        """Whether ``batch_id`` is already committed: only a batch planned before this process
        started can be; for the first such batch the newest marker is read back (read
        committed) from the marker topic."""
        if self._query is None:
            self._query = query_id(self.checkpoint)
            if planned_before(self.checkpoint, batch_id, self.started):
                self._last = self._newest.result()
                log.info("batch %d is run again after a restart; the last batch committed "
                         "to Kafka: %s", batch_id, "none" if self._last is None else
                         f"{self._last.batch}" + ("" if self._last.query == self._query
                                                  else " (of another query)"))
        last = self._last
        return last is not None and last.query == self._query and batch_id <= last.batch

    @property
    def query(self) -> str:
        """This query's id (known once ``written`` was asked)."""
        assert self._query is not None, "written() is asked first"
        return self._query

    def tasks_written(self, batch_id: int) -> TasksWritten | None:
        """What the join tasks of ``batch_id`` committed themselves (``app.batch.task_output``)
        before a restart, when its driver's transaction did not commit: read from the task
        slots' markers of this batch, back to the app's markers of the batches before it;
        None when nothing (only a batch planned before this process started can have any)."""
        if not planned_before(self.checkpoint, batch_id, self.started):
            return None
        slots = f"{self.txn_id}-w"
        query = self.query
        found = marked_back_to(
            self._conf, self.marker_topic,
            lambda m: m.txn.startswith(slots) and m.query == query and m.batch == batch_id,
            lambda m: m.txn.startswith(self.txn_id) and (m.query != query or m.batch < batch_id),
            self._limit)
        if not found:
            return None
        from app.batch.task_output import written_keys

        keys = np.unique(np.concatenate([written_keys(msg.headers()) for _, msg in found]))
        workers = {int(m.txn[len(slots):]) for m, _ in found}
        log.warning("batch %d is run again after a restart; its tasks of worker(s) %s had "
                    "committed %d matched publications: the driver writes the rest", batch_id,
                    sorted(workers), len(keys))
        return TasksWritten(keys, workers)

    def open(self, batch_id: int) -> Sender:
        if not self.sender.open:
            self.sender.begin()
        return self.sender

    def headers(self, batch_id: int) -> list[tuple[str, bytes]]:
        """The marker of ``batch_id``, for the batch's summary on the marker topic."""
        assert self._query is not None, "written() is asked first"
        return Marker(self.txn_id, self._query, batch_id).header()

    def finish(self, batch_id: int) -> None:
        self.open(batch_id)
        self.sender.commit()

    def close(self, abandon: bool = False) -> None:
        """Release the producer; an open transaction is aborted (a restart would too)."""
        with contextlib.suppress(KafkaUnavailable):
            self.sender.close(timeout=1.0 if abandon else None)


def _in_background(read: Callable[[], Marker | None]) -> Future:
    """``read()`` in a thread of its own; its result (or exception) when asked."""
    done: Future = Future()

    def run() -> None:
        try:
            done.set_result(read())
        except BaseException as exc:  # handed to whoever asks for the result
            done.set_exception(exc)

    threading.Thread(target=run, name="geops-last-marker", daemon=True).start()
    return done


def batch_output(mode: str, kafka_conf: Mapping[str, str], outage_limit: float, *,
                 app_id: str, checkpoint: str, publications: str,
                 outputs: tuple[str, ...]) -> AtLeastOnce | ExactlyOnce:
    """The output of the configured delivery ``mode`` (one of ``MODES``)."""
    if mode == "exactly-once":
        return ExactlyOnce(kafka_conf, outage_limit, app_id=app_id, checkpoint=checkpoint,
                           publications=publications, outputs=outputs)
    if mode == "at-least-once":
        return AtLeastOnce(kafka_conf, outage_limit)
    raise ValueError(f"unknown delivery mode {mode!r}; one of {', '.join(MODES)}")
