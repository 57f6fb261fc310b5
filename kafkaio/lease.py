"""Which process of an app writes its output: a lease kept on a one-partition topic.

Every record on the lease topic is keyed by the app id and says ``claim`` or ``heartbeat``,
with a *term* (a number that only grows) and the *holder* (host, process and a random tag).
The log's order decides, and every reader of the one partition sees the same order:

- a ``claim`` for a term above the current one takes the lease (the first claim of a term
  wins; a later claim of the same or a lower term changes nothing);
- a ``heartbeat`` of the current term by its holder keeps the lease fresh; one of a term above
  the current one takes it too (only the winner of a term writes heartbeats of it, and the
  topic is compacted: the claim may be gone).

The holder appends a heartbeat every fraction of the lease time. A waiting process (a
standby) that has read to the end of the log and seen nothing fresh for the lease time, by its
own monotonic clock (no clocks of two hosts are compared), appends a claim for the next term
and reads on until a claim of that term comes back: its own (it holds the lease) or another's
(it waits again). A holder that reads a term above its own has been replaced and must not write
again.

A Kafka consumer group would say who is alive too, but a member is dropped only after its
session timeout, which the broker bounds below by ``group.min.session.timeout.ms`` (6 s by
default): more than the whole time a standby has to take over.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import KafkaError, KafkaException, TopicPartition

from kafkaio.clients import consumer, producer
from kafkaio.errors import KafkaUnavailable, LeaseLost, NoLeaseTopic
from kafkaio.retry import Outage

log = logging.getLogger("geops.kafka.lease")

CLAIM, HEARTBEAT = "claim", "heartbeat"
# The holder writes this many heartbeats per lease time: one or two lost or slow ones do not
# let the lease lapse.
HEARTBEATS_PER_LEASE = 4
# How long the reader's fetch waits at the broker for new records; it bounds how late a claim
# or heartbeat is seen.
FETCH_WAIT_MS = 50


def holder_name() -> str:
    """This process's name in the lease: host, pid and a random tag (a pid is reused)."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


@dataclass(frozen=True)
class LeaseRecord:
    """One record of the lease topic."""

    app: str
    term: int
    kind: str
    holder: str

    def encode(self) -> bytes:
        return json.dumps({"app": self.app, "term": self.term, "kind": self.kind,
                           "holder": self.holder}, separators=(",", ":")).encode()

    @staticmethod
    def decode(value: bytes | None) -> LeaseRecord | None:
        """The record in ``value``; None for anything else (it is skipped, not fatal)."""
        try:
            found = json.loads(value or b"")
            rec = LeaseRecord(str(found["app"]), int(found["term"]), str(found["kind"]),
                              str(found["holder"]))
        except (ValueError, KeyError, TypeError):
            return None
        return rec if rec.kind in (CLAIM, HEARTBEAT) else None


@dataclass
class LeaseState:
    """The lease of one app as the log's records, read in order, leave it.

    ``fresh``: when (``time.monotonic`` of the reader) the current term was last confirmed by
    its claim or a heartbeat of its holder.
    """

    app: str
    term: int = 0
    holder: str = ""
    fresh: float = field(default_factory=time.monotonic)

    def apply(self, rec: LeaseRecord, now: float) -> None:
        """Take ``rec`` (the next record of the log) into account, read at ``now``."""
        if rec.app != self.app:
            return
        if rec.term > self.term:  # a heartbeat: its term's claim was compacted away
            self.term, self.holder, self.fresh = rec.term, rec.holder, now
        elif rec.kind == HEARTBEAT and rec.term == self.term and rec.holder == self.holder:
            self.fresh = now

    def lapsed(self, now: float, lease_s: float) -> bool:
        """Whether nothing confirmed the current term for ``lease_s``."""
        return now - self.fresh > lease_s


class LeaseLog:
    """The lease topic of one app: read from its beginning in order, and appended to."""

    def __init__(self, conf: Mapping[str, str], topic: str, app: str, holder: str,
                 outage_limit: float):
        self.topic = topic
        self.holder = holder
        self.state = LeaseState(app)
        self.at_end = False  # read up to the end of the log as the broker last said
        self._servers = str(conf.get("bootstrap.servers", "?"))
        self._limit = outage_limit
        self._consumer = consumer(conf, **{"enable.partition.eof": True,
                                           "fetch.wait.max.ms": FETCH_WAIT_MS})
        self._consumer.assign([TopicPartition(topic, 0, -2)])  # OFFSET_BEGINNING
        self._producer = producer(conf, **{"linger.ms": 0, "acks": "all"})

    def read(self, timeout: float = 0.0) -> None:
        """Apply the records that arrived (waiting up to ``timeout`` for the first)."""
        for msg in self._consumer.consume(500, timeout=timeout):
            err = msg.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    self.at_end = True
                elif err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                    raise NoLeaseTopic(f"no lease topic '{self.topic}' (create it with "
                                       f"`geops topics create`)")
                else:
                    log.warning("lease topic '%s': %s", self.topic, err.str())
                continue
            self.at_end = False
            rec = LeaseRecord.decode(msg.value())
            if rec is not None:
                self.state.apply(rec, time.monotonic())

    def catch_up(self) -> None:
        """Read up to the end of the log as the broker says it is now; Kafka is waited for up
        to the outage limit."""
        outage = Outage(self._servers, self._limit)
        tp = TopicPartition(self.topic, 0)
        while True:
            try:
                _, high = self._consumer.get_watermark_offsets(tp, timeout=5.0, cached=False)
                break
            except KafkaException as exc:
                err = exc.args[0]
                if err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                    raise NoLeaseTopic(f"no lease topic '{self.topic}' (create it with "
                                       f"`geops topics create`)") from None
                outage.failed(f"the end of the lease topic '{self.topic}': {err.str()}")
        last = time.monotonic()
        while self._position() < high:
            before = self._position()
            self.read(0.2)
            if self._position() > before:
                last = time.monotonic()
            elif time.monotonic() - last > 5.0:
                outage.failed(f"reading the lease topic '{self.topic}'")
                last = time.monotonic()
        self.at_end = True

    def _position(self) -> int:
        """The offset of the next record to read (0 before the first)."""
        return max(0, self._consumer.position([TopicPartition(self.topic, 0)])[0].offset)

    def append(self, kind: str, term: int, timeout: float = 5.0, settle: bool = False) -> float:
        """Append a record of this holder and wait until the broker has it; returns
        ``time.monotonic()`` from before it was sent. ``KafkaUnavailable`` when it was not
        written within ``timeout``; with ``settle``, only once the producer gave it up: a claim
        still queued may land later and take the lease, so its sender must not end meanwhile
        (the app it replaces would stop, and no process would answer)."""
        sent = time.monotonic()
        failed: list[Any] = []
        rec = LeaseRecord(self.state.app, term, kind, self.holder)
        self._producer.produce(self.topic, rec.encode(), key=self.state.app.encode(),
                               partition=0, on_delivery=lambda err, _m: failed.append(err))
        left = self._producer.flush(timeout)
        if left and settle:
            log.warning("the lease topic '%s' did not take a %s within %.0f s; waiting until "
                        "it does or the producer gives it up", self.topic, kind, timeout)
            while left:
                left = self._producer.flush(timeout)
        if left or not failed or failed[0] is not None:
            why = "no answer" if left or not failed else failed[0].str()
            raise KafkaUnavailable(f"the lease topic '{self.topic}' did not take a {kind} "
                                   f"within {timeout:.0f} s: {why}")
        return sent

    def close(self) -> None:
        self._consumer.close()
        self._producer.flush(1.0)


class LeaseKeeper:
    """The holder's side: its term, a heartbeat every ``lease_s / HEARTBEATS_PER_LEASE`` from a
    thread, and ``replaced`` called (from that thread or ``check``) once a term above its own
    is read: another process took over and this one must not write again."""

    def __init__(self, lease_log: LeaseLog, lease_s: float,
                 replaced: Callable[[LeaseState], None]):
        self.log = lease_log
        self.lease_s = lease_s
        self.term = 0
        self.confirmed = 0.0  # time.monotonic() before the newest heartbeat the broker took
        self._replaced = replaced
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="geops-lease", daemon=True)

    def claim(self) -> int:
        """Take the next term now (a process started as the active one); ``LeaseLost`` when
        another claim of that term came first."""
        with self._lock:
            self.log.catch_up()
            term = self.log.state.term + 1
            sent = self.log.append(CLAIM, term, settle=True)
            while self.log.state.term < term:
                self.log.read(0.1)
            if self.log.state.holder != self.log.holder:
                raise LeaseLost(f"another process ({self.log.state.holder}) claimed term "
                                f"{self.log.state.term} of the lease first")
            self.term, self.confirmed = term, sent
        return term

    def adopt(self, term: int, confirmed: float) -> None:
        """Hold ``term``, won as a standby (``wait_for_lease``)."""
        self.term, self.confirmed = term, confirmed

    def start(self) -> LeaseKeeper:
        self._thread.start()
        return self

    def check(self, force: bool = False) -> None:
        """Before a batch's output: when no heartbeat was taken for the lease time (or
        ``force``: a write was refused as fenced), another process may have claimed the lease;
        read the log to its end first (waiting for Kafka up to the outage limit) and call
        ``replaced`` if so."""
        if not force and not self.lapsed():  # the thread's reads suffice: no wait for it
            self._look()
            return
        with self._lock:
            self.log.catch_up()
            self._look()

    def lapsed(self) -> bool:
        """Whether no heartbeat was taken for the lease time: a standby may have claimed."""
        return time.monotonic() - self.confirmed > self.lease_s

    def _look(self) -> None:
        if self.log.state.term > self.term:
            self._stop.set()
            self._replaced(self.log.state)

    def _run(self) -> None:
        every = self.lease_s / HEARTBEATS_PER_LEASE
        failing = False
        while not self._stop.wait(every):
            with self._lock:
                if self.lapsed():  # frozen, or Kafka away: read to the end before writing
                    with contextlib.suppress(KafkaUnavailable):  # ``check`` waits for it
                        self.log.catch_up()
                self.log.read()
                self._look()
                if self._stop.is_set():
                    return
                try:
                    self.confirmed = self.log.append(HEARTBEAT, self.term, timeout=every)
                    failing = False
                except KafkaUnavailable as exc:
                    if not failing:
                        log.warning("%s; a standby may take over when the lease lapses", exc)
                    failing = True

    def close(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(5.0)
        self.log.close()


def wait_for_lease(lease_log: LeaseLog, lease_s: float, stopping: Callable[[], bool]
                   ) -> tuple[int, float] | None:
    """Wait until this process holds the lease: read the log; when the current term lapsed
    (nothing fresh for ``lease_s``), claim the next one and read until a claim of that term
    comes back. Returns (the term, when the claim was sent), or None once ``stopping()``."""
    lease_log.catch_up()
    while not stopping():
        lease_log.read(0.05)
        state = lease_log.state
        if not lease_log.at_end or not state.lapsed(time.monotonic(), lease_s):
            continue
        term, quiet = state.term + 1, time.monotonic() - state.fresh
        sent = lease_log.append(CLAIM, term, settle=True)
        while lease_log.state.term < term and not stopping():
            lease_log.read(0.05)
        if lease_log.state.holder == lease_log.holder:
            log.info("took the lease of app '%s' at term %d: nothing from term %d's holder "
                     "for %.1f s", state.app, term, term - 1, quiet)
            return term, sent
        log.info("term %d of the lease went to %s; waiting again", lease_log.state.term,
                 lease_log.state.holder)
    return None
