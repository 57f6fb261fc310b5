"""Output that becomes visible all at once or not at all: one Kafka transaction per unit.

KIP-98 transactions: the records of a unit are written in one transaction, and one of them
carries a *marker* in a record header (``MARKER_HEADER``: the transactional id, a query id and
the unit's number). A ``read_committed`` consumer sees either all of the unit or none of it,
so the newest marker it finds is the last unit committed, and tells a restarted producer which
units are already in Kafka. ``init_transactions`` with the same ``transactional.id`` bumps the
producer epoch: an older producer still alive (a zombie) is fenced (its next send or commit
fails), and a transaction it left open is aborted.

KIP-447 would record progress as consumer-group offsets committed in the transaction
(``send_offsets_to_transaction``), but librdkafka's call ignores its timeout while the group
coordinator is unavailable (librdkafka issues 5456, 5511): after a broker restart it blocked
the app for good. A record header needs nothing beyond the produce path.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Message

from kafkaio.errors import Aborted, Fenced, KafkaUnavailable
from kafkaio.offsets import EndOffsets, read_between
from kafkaio.retry import DEFAULT_OUTAGE_LIMIT, Outage
from kafkaio.sender import Sender

log = logging.getLogger("geops.kafka")

MARKER_HEADER = "geops-batch"
# The broker's default transaction.max.timeout.ms (15 minutes) caps a transaction's timeout.
MAX_TRANSACTION_TIMEOUT_MS = 900_000
# Each blocking transactional call waits this long before it is tried again (librdkafka
# answers a call that timed out with a retriable error).
CALL_TIMEOUT_S = 10.0
# Records read per step when looking for the newest marker from the end of a partition.
SCAN_WINDOW = 2000


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
    """A committed unit: the producer's transactional id, the query (a Spark query id) and
    its batch id."""

    txn: str
    query: str
    batch: int

    def header(self) -> list[tuple[str, bytes]]:
        """The record header that carries this marker."""
        value = {"txn": self.txn, "query": self.query, "batch": self.batch}
        return [(MARKER_HEADER, json.dumps(value, separators=(",", ":")).encode())]

    @staticmethod
    def of(msg: Message) -> Marker | None:
        """The marker in a record's headers, if it has one."""
        for key, value in msg.headers() or ():
            if key != MARKER_HEADER:
                continue
            try:
                found = json.loads(value or b"")
                return Marker(str(found["txn"]), str(found["query"]), int(found["batch"]))
            except (ValueError, KeyError, TypeError):
                return None
        return None


def last_marker(client_conf: Mapping[str, str], topic: str, txn: str,
                outage_limit: float = DEFAULT_OUTAGE_LIMIT) -> Marker | None:
    """The newest marker of transactional id ``txn`` on ``topic``, as a read_committed reader
    sees it: each partition is read backwards from its end in steps of ``SCAN_WINDOW``
    records until one holds a marker of ``txn``."""
    found = last_marked(client_conf, topic, txn, outage_limit)
    return None if found is None else found[0]


def last_marked(client_conf: Mapping[str, str], topic: str, txn: str,
                outage_limit: float = DEFAULT_OUTAGE_LIMIT) -> tuple[Marker, Message] | None:
    """The newest marker of ``txn`` on ``topic`` (``last_marker``) with the record that
    carries it."""
    probe = EndOffsets(client_conf)
    try:
        listed = probe.listed(topic, probe.partitions(topic))
    finally:
        probe.close()
    newest: tuple[Marker, Message] | None = None
    for p, (low, high) in sorted(listed.items()):
        hi = high
        while hi > low:
            lo = max(low, hi - SCAN_WINDOW)
            found = [(m, msg) for m, msg in ((Marker.of(msg), msg) for msg in read_between(
                client_conf, topic, {p: lo}, {p: hi}, outage_limit)) if m and m.txn == txn]
            if found:
                if newest is None or found[-1][0].batch > newest[0].batch:
                    newest = found[-1]
                break
            hi = lo
    return newest


def marked_back_to(client_conf: Mapping[str, str], topic: str, wanted: Callable[[Marker], bool],
                   older: Callable[[Marker], bool],
                   outage_limit: float = DEFAULT_OUTAGE_LIMIT) -> list[tuple[Marker, Message]]:
    """Every record of ``topic`` whose marker is ``wanted``, with its marker, as a read_committed
    reader sees them: each partition is read backwards from its end in steps of
    ``SCAN_WINDOW`` records until a step holds a marker ``older`` says was committed before
    every wanted one (several producers' units, e.g. one per task slot, found in one pass)."""
    probe = EndOffsets(client_conf)
    try:
        listed = probe.listed(topic, probe.partitions(topic))
    finally:
        probe.close()
    found: list[tuple[Marker, Message]] = []
    for p, (low, high) in sorted(listed.items()):
        hi = high
        while hi > low:
            lo = max(low, hi - SCAN_WINDOW)
            marked = [(m, msg) for m, msg in ((Marker.of(msg), msg) for msg in read_between(
                client_conf, topic, {p: lo}, {p: hi}, outage_limit)) if m is not None]
            found.extend((m, msg) for m, msg in marked if wanted(m))
            if any(older(m) for m, _ in marked):
                break
            hi = lo
    return found


class TransactionalSender(Sender):
    """A ``Sender`` whose records are written in transactions: ``begin()``, ``send()`` the
    records (one of them with a marker header), ``commit()``.

    A broker that does not answer is waited for up to the outage limit; an error that
    requires it aborts the transaction (``Aborted``); ``Fenced`` when a newer producer took
    the identity over.
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
        self.open = False
        # Fences any older producer of this id and aborts the transaction it left open.
        self._call(lambda: self._producer.init_transactions(CALL_TIMEOUT_S),
                   "initialising transactions")

    def begin(self) -> None:
        self._producer.begin_transaction()
        self.open = True
        self.failed, self.first_error = 0, None  # what an aborted transaction lost is gone

    def commit(self) -> None:
        """Commit the open transaction: flush its records, then end it."""
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
        self._call(lambda: self._producer.abort_transaction(timeout), "aborting the transaction",
                   abortable=False)
        self.open = False

    def close(self, timeout: float | None = None) -> None:
        """Release the producer; an open transaction is aborted with one try of ``timeout``
        (a restart's init_transactions aborts it otherwise)."""
        if self.open:
            self.open = False
            with contextlib.suppress(KafkaException):
                self._producer.abort_transaction(timeout or CALL_TIMEOUT_S)
        self._producer = None

    def _call(self, call: Any, what: str, abortable: bool = True) -> Any:
        """``call()`` retried while Kafka does not answer; an error that requires it aborts the
        transaction (``Aborted``), unless ``call`` is the abort itself."""
        outage = Outage(self._servers, self._limit)
        while True:
            try:
                result = call()
            except KafkaException as exc:
                err: KafkaError = exc.args[0]
                if abortable and err.txn_requires_abort() and not _fenced(err):
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


_FENCED = {KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH}


def _fenced(err: KafkaError) -> bool:
    return err.fatal() or err.code() in _FENCED
