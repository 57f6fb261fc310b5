"""Output that becomes visible all at once or not at all: one Kafka transaction per unit.

KIP-98 transactions with the KIP-447 way of recording progress: the records of a unit and a
*marker* (offsets committed for a consumer group named like the transactional id, with the
unit's number in the offsets' metadata) are committed in one transaction. A ``read_committed``
consumer sees either all of it or none of it, and the marker tells a restarted producer which
units are already in Kafka. ``init_transactions`` with the same ``transactional.id`` bumps the
producer epoch: an older producer still alive (a zombie) is fenced (its next send or commit
fails), and a transaction it left open is aborted.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaError, KafkaException, TopicPartition

from kafkaio.clients import KafkaUnavailable, consumer
from kafkaio.retry import DEFAULT_OUTAGE_LIMIT, Outage
from kafkaio.sender import Sender

log = logging.getLogger("geops.kafka")

# The broker's default transaction.max.timeout.ms (15 minutes) caps a transaction's timeout.
MAX_TRANSACTION_TIMEOUT_MS = 900_000
# Each blocking transactional call waits this long before it is tried again (librdkafka
# answers a call that timed out with a retriable error).
CALL_TIMEOUT_S = 10.0


class Aborted(KafkaUnavailable):
    """The transaction had to be aborted (a record could not be written, the broker lost its
    state of it): nothing of it is visible, the unit may be written again."""


class Fenced(KafkaUnavailable):
    """Another producer with the same transactional id has started: this one must stop."""


def transactional_id(app_id: str, *topics: str) -> str:
    """A stable identity for one app writing ``topics``: ``geops-<app id>-<digest>``.

    Two apps with different app ids never fence each other; the same app id writing other
    topics (another deployment, or a test with its own topic names) is another identity; two
    processes of one app with the same topics are one identity, so the newer one fences the
    older.
    """
    digest = hashlib.sha256("\0".join(topics).encode()).hexdigest()[:12]
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", app_id)
    return f"geops-{safe}-{digest}"


@dataclass(frozen=True)
class Marker:
    """The last committed unit: the query (a Spark query id) and its batch id."""

    query: str
    batch: int

    def encode(self) -> str:
        return json.dumps({"query": self.query, "batch": self.batch}, separators=(",", ":"))

    @staticmethod
    def decode(text: str | None) -> Marker | None:
        try:
            found = json.loads(text or "")
            return Marker(str(found["query"]), int(found["batch"]))
        except (ValueError, KeyError, TypeError):
            return None


class TransactionalSender(Sender):
    """A ``Sender`` whose records are written in transactions.

    ``begin()``, ``send()`` the records, then ``commit(marker_topic, offsets, marker)``:
    offsets of ``marker_topic`` and the marker in their metadata are committed for the group
    named by the transactional id, in the same transaction. A broker that does not answer is
    waited for up to the outage limit; an error that requires it aborts the transaction;
    ``Fenced`` when a newer producer took the identity over.
    """

    def __init__(self, client_conf: Mapping[str, str], txn_id: str,
                 outage_limit: float = DEFAULT_OUTAGE_LIMIT):
        timeout_ms = min(int(outage_limit * 1000) + 30_000, MAX_TRANSACTION_TIMEOUT_MS)
        super().__init__(client_conf, outage_limit=outage_limit,
                         **{"transactional.id": txn_id, "transaction.timeout.ms": timeout_ms,
                            "message.timeout.ms": timeout_ms})
        self.txn_id = txn_id
        self._servers = str(client_conf.get("bootstrap.servers", "?"))
        self._limit = outage_limit
        self._group = consumer(client_conf, group_id=txn_id)
        self.open = False
        # Fences any older producer of this id and aborts the transaction it left open.
        self._call(lambda: self._producer.init_transactions(CALL_TIMEOUT_S),
                   "initialising transactions")

    def last_marker(self, topic: str, partitions: list[int]) -> Marker | None:
        """The marker of the newest committed transaction, read back from the group's offsets
        (a ``read_committed`` consumer's offset fetch waits for pending ones: KIP-447)."""
        tps = [TopicPartition(topic, p) for p in partitions]
        got = self._call(lambda: self._group.committed(tps, timeout=CALL_TIMEOUT_S),
                         "reading the last committed batch")
        found = [m for m in (Marker.decode(tp.metadata) for tp in got if tp.offset >= 0) if m]
        return max(found, key=lambda m: m.batch, default=None)

    def begin(self) -> None:
        self._producer.begin_transaction()
        self.open = True
        self.failed, self.first_error = 0, None  # what an aborted transaction lost is gone

    def commit(self, topic: str, offsets: Mapping[int, int], marker: Marker) -> None:
        """Commit the open transaction with ``offsets`` of ``topic`` and ``marker``."""
        meta = marker.encode()
        tps = [TopicPartition(topic, p, o, metadata=meta) for p, o in sorted(offsets.items())]
        group = self._group.consumer_group_metadata()
        self._call(lambda: self._producer.send_offsets_to_transaction(tps, group,
                                                                      CALL_TIMEOUT_S),
                   "adding the batch marker to the transaction")
        self._call(lambda: self._producer.commit_transaction(CALL_TIMEOUT_S),
                   "committing the transaction")
        self.open = False
        if self.failed:  # a record the transaction lost would have failed the commit
            raise KafkaUnavailable(f"{self.failed} records were not delivered: "
                                   f"{self.first_error}")

    def abort(self, timeout: float = CALL_TIMEOUT_S) -> None:
        """Abort the open transaction (a restart would abort it too: init_transactions),
        waiting up to ``timeout`` for each try while the broker does not answer."""
        if not self.open:
            return
        outage = Outage(self._servers, self._limit)
        while True:
            try:
                self._producer.abort_transaction(timeout)
                break
            except KafkaException as exc:
                err: KafkaError = exc.args[0]
                if not err.retriable():
                    raise self._failure("aborting the transaction", err) from None
                outage.failed(f"aborting the transaction: {err.str()}")
        self.open = False

    def close(self, timeout: float | None = None) -> None:
        """Release the producer; an open transaction is aborted with one try of ``timeout``
        (a restart's init_transactions aborts it otherwise)."""
        try:
            if self.open:
                self.open = False
                with contextlib.suppress(KafkaException):
                    self._producer.abort_transaction(timeout or CALL_TIMEOUT_S)
        finally:
            self._group.close()
            self._producer = None

    def _call(self, call: Any, what: str) -> Any:
        """``call()`` retried while Kafka does not answer; an abortable error aborts."""
        outage = Outage(self._servers, self._limit)
        while True:
            try:
                result = call()
            except KafkaException as exc:
                err: KafkaError = exc.args[0]
                if err.txn_requires_abort() and not _fenced(err):
                    self.abort()
                    raise Aborted(f"{what}: {err.str()}; the transaction was aborted") from None
                if not err.retriable() or _fenced(err):
                    raise self._failure(what, err) from None
                outage.failed(f"{what}: {err.str()}")
                continue
            outage.ok()
            return result

    def _failure(self, what: str, err: KafkaError) -> KafkaUnavailable:
        if _fenced(err):
            return Fenced(f"transactional id {self.txn_id}: {err.str()}; another process of "
                          f"this app (same app id and topics) has taken over")
        return KafkaUnavailable(f"{what}: {err.str()}")


def _fenced(err: KafkaError) -> bool:
    return err.fatal() or err.code() in _FENCED


_FENCED = {KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH}
