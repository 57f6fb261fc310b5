"""How a micro-batch's output reaches Kafka: exactly-once or at-least-once (``app.delivery``).

Both give ``open(batch_id)``: the producer to send the batch's records with (no extra Python
call per record), and ``finish(batch_id, end_offsets)`` once they are all sent, before
``foreachBatch`` returns and Spark commits the batch.

- ``at-least-once``: a plain idempotent producer; ``finish`` flushes. A batch that Spark runs
  again after a crash sends its records again.
- ``exactly-once``: one Kafka transaction per batch (``kafkaio.transactions``) holding its
  matches, metrics, batch summary and a marker (this query's id and the batch id, committed as
  the group offsets of the publications topic). ``written(batch_id)`` says whether the marker
  already covers the batch: a batch Spark runs again after the transaction committed is not
  written again.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Mapping
from pathlib import Path

from kafkaio.clients import KafkaUnavailable, consumer, topic_partitions
from kafkaio.sender import Sender
from kafkaio.transactions import Marker, TransactionalSender, transactional_id

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


class AtLeastOnce:
    """Flush before the batch returns; a replayed batch writes again."""

    def __init__(self, kafka_conf: Mapping[str, str], outage_limit: float):
        self.sender = Sender(kafka_conf, outage_limit=outage_limit)

    def written(self, batch_id: int) -> bool:
        return False

    def open(self, batch_id: int) -> Sender:
        return self.sender

    def finish(self, batch_id: int, end_offsets: Mapping[str, int]) -> None:
        self.sender.flush()

    def close(self, abandon: bool = False) -> None:
        """Flush and release; ``abandon``: the batch will be run again, do not wait long."""
        if not abandon:
            self.sender.close()
            return
        with contextlib.suppress(KafkaUnavailable):
            self.sender.close(timeout=1.0)


class ExactlyOnce:
    """One transaction per batch with a marker of the batch; a committed batch is not
    written again."""

    def __init__(self, kafka_conf: Mapping[str, str], outage_limit: float, *, app_id: str,
                 checkpoint: str, publications: str, outputs: tuple[str, ...]):
        self.txn_id = transactional_id(app_id, publications, *outputs)
        self.sender = TransactionalSender(kafka_conf, self.txn_id, outage_limit)
        self.checkpoint = checkpoint
        self.publications = publications
        self._conf = kafka_conf
        self._query: str | None = None
        self._last: Marker | None = None
        log.info("exactly-once output: transactional id %s", self.txn_id)

    def _load(self) -> str:
        """This query's id and the last batch committed for it (read once)."""
        if self._query is None:
            self._query = query_id(self.checkpoint)
            probe = consumer(self._conf)
            try:
                parts = topic_partitions(probe, self.publications)
            finally:
                probe.close()
            self._last = self.sender.last_marker(self.publications, parts)
            if self._last is not None:
                same = "this query" if self._last.query == self._query else "another query"
                log.info("last batch committed to Kafka by %s: %d", same, self._last.batch)
        return self._query

    def written(self, batch_id: int) -> bool:
        query = self._load()
        last = self._last
        return last is not None and last.query == query and batch_id <= last.batch

    def open(self, batch_id: int) -> Sender:
        if not self.sender.open:
            self.sender.begin()
        return self.sender

    def finish(self, batch_id: int, end_offsets: Mapping[str, int]) -> None:
        if not self.sender.open:
            self.sender.begin()
        marker = Marker(self._load(), batch_id)
        self.sender.commit(self.publications, {int(p): o for p, o in end_offsets.items()},
                           marker)
        self._last = marker

    def close(self, abandon: bool = False) -> None:
        """Release the producer; an open transaction is aborted (a restart would too)."""
        with contextlib.suppress(KafkaUnavailable):
            self.sender.close(timeout=1.0 if abandon else None)


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
