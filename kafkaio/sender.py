"""Producing records without losing any silently: failed deliveries are counted and checked."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer

from kafkaio.clients import denied, producer
from kafkaio.errors import KafkaOutage, KafkaUnavailable
from kafkaio.retry import DEFAULT_OUTAGE_LIMIT, Outage
from schemas import codec
from schemas.records import MISSING_TIME

# librdkafka's default bound of the local queue (``queue.buffering.max.messages``)
QUEUE_MESSAGES = 100_000
# records handed to librdkafka in one call by ``Sender.send_many``
CHUNK = 10_000


class Sender:
    """A producer that counts failed deliveries, can cap the rate, and fails loudly on loss.

    ``flush()`` waits for every outstanding record and raises ``KafkaUnavailable`` if any record
    could not be delivered, so a caller that flushes before acknowledging its input is
    at-least-once. A broker that stops answering is waited for up to ``outage_limit``: records
    stay queued (librdkafka retries them) and ``flush`` raises ``KafkaOutage`` only past it.
    librdkafka reports failed deliveries only (``delivery.report.only.error``): a report per
    delivered record, a Python call each, cost more than queueing it.
    """

    def __init__(self, client_conf: Mapping[str, str], rate: float | None = None,
                 outage_limit: float = DEFAULT_OUTAGE_LIMIT, **extra: Any):
        # A record is given up only after the outage limit (plus a margin for the last try).
        extra.setdefault("message.timeout.ms", int(outage_limit * 1000) + 30_000)
        self._conf = client_conf
        # A fatal error (e.g. a producer id refused by the ACLs): no record will be delivered.
        self._fatal: KafkaError | None = None
        self._topic = ""
        # Fatal errors come through this callback: without one, confluent-kafka raises them
        # out of flush() while it serves the delivery callbacks, and a callback that runs in
        # the same call can clear the exception (a SystemError with no cause).
        extra.setdefault("error_cb", self._on_error)
        extra.setdefault("delivery.report.only.error", True)
        self._queue_max = int({**client_conf, **extra}.get("queue.buffering.max.messages",
                                                          QUEUE_MESSAGES))
        self._producer: Producer = producer(client_conf, **extra)
        self._outage = Outage(str(client_conf.get("bootstrap.servers", "?")), outage_limit)
        self.rate = rate
        self.sent = 0
        self.failed = 0
        self.first_error: str | None = None
        self._t0 = time.monotonic()

    def _report(self, err: KafkaError | None, msg: Any) -> None:
        if err is None:
            return
        self.failed += 1
        if self.first_error is None:
            self.first_error = (denied(err, self._conf, "WRITE", f"topic '{msg.topic()}'")
                                or err.str())

    def _on_error(self, err: KafkaError) -> None:
        """librdkafka's error callback: keep the first fatal error (the others it retries)."""
        if err.fatal() and self._fatal is None:
            self._fatal = err

    def send(self, topic: str, value: bytes | None, key: bytes | None = None,
             partition: int | None = None, headers: list | None = None) -> None:
        """Queue one record; blocks briefly when the local queue is full or the rate is capped."""
        if self.rate:
            ahead = self.sent / self.rate - (time.monotonic() - self._t0)
            if ahead > 0:
                time.sleep(ahead)
        kwargs: dict[str, Any] = {"key": key, "value": value, "on_delivery": self._report}
        if partition is not None:
            kwargs["partition"] = partition
        if headers:
            kwargs["headers"] = headers
        while True:
            try:
                self._producer.produce(topic, **kwargs)
                break
            except BufferError:  # the local queue is full: wait for deliveries
                self._wait_for_room(topic)
        self.sent += 1
        self._topic = topic
        if self.sent % 1000 == 0:
            self._producer.poll(0)

    def send_many(self, topic: str, values: Sequence[bytes], keys: Sequence[bytes],
                  headers: list | None = None) -> None:
        """Queue records in order, ``headers`` on the last one; what ``send`` does for each,
        a chunk of records a call (``produce_batch``) where no rate is capped."""
        n = len(values)
        if self.rate or n < 2:
            for k, (value, key) in enumerate(zip(values, keys, strict=True), 1):
                self.send(topic, value, key=key, headers=headers if k == n else None)
            return
        at = 0
        while at < n - 1:
            room = self._queue_max - len(self._producer)
            size = min(CHUNK, n - 1 - at, max(self._queue_max // 2, 1))
            if room < size:
                self._wait_for_room(topic)
                continue
            end = at + size
            chunk = [{"value": v, "key": k} for v, k in zip(values[at:end], keys[at:end],
                                                           strict=True)]
            self._producer.produce_batch(topic, chunk, on_delivery=self._report)
            for message in chunk:  # refused before queueing: never in a report
                if "_error" in message:
                    self._refused(topic, message)
            self.sent += end - at
            self._topic = topic
            self._producer.poll(0)
            at = end
        self.send(topic, values[-1], key=keys[-1], headers=headers)

    def _refused(self, topic: str, message: dict) -> None:
        """A record ``produce_batch`` did not queue: queued again when the local queue was full
        (the room was checked, so only records of hundreds of kilobytes fill it, and a later
        record of the chunk may then go first), else failed."""
        err = message["_error"]
        if err.code() == KafkaError._QUEUE_FULL:
            self.send(topic, message["value"], key=message["key"])
            self.sent -= 1  # counted with its chunk
            return
        self.failed += 1
        self.first_error = self.first_error or err.str()

    def _wait_for_room(self, topic: str) -> None:
        """Serve deliveries while the local queue is full; past the outage limit with none
        delivered, ``KafkaOutage``."""
        before = len(self._producer)
        self._producer.poll(0.05)
        if len(self._producer) < before:
            self._outage.ok()
        else:
            self._outage.failed(f"queueing records for {topic}", sleep=False)

    def poll(self, timeout: float = 0.0) -> None:
        self._producer.poll(timeout)

    def flush(self, timeout: float | None = None) -> None:
        """Wait for every queued record; raise if any was not delivered.

        Waits as long as deliveries make progress; while none do, up to ``timeout`` (default:
        the outage limit), then ``KafkaOutage``.
        """
        outage = self._outage
        if timeout is not None:
            outage = Outage(outage.servers, timeout)
        before = len(self._producer)
        while True:
            try:
                left = self._producer.flush(1.0)
            except (KafkaException, SystemError) as exc:
                self._fatal = self._fatal or _fatal_error(exc)
                break
            if not left or self._fatal is not None:
                break
            if left < before:
                before = left
                outage.ok()
                continue
            try:
                outage.failed(f"delivering {left} records", sleep=False)
            except KafkaOutage as exc:
                raise KafkaOutage(f"{exc} ({left} records undelivered)") from None
        outage.ok()
        if self._fatal is not None:
            self.first_error = (denied(self._fatal, self._conf, "WRITE",
                                       f"topic '{self._topic}'") or self._fatal.str())
        if self.failed or self._fatal is not None:
            raise KafkaUnavailable(f"{self.failed or 'some'} of {self.sent} records were "
                                   f"not delivered: {self.first_error}")

    def close(self, timeout: float | None = None) -> None:
        """Flush, then release the client (its threads stop once nothing refers to it)."""
        try:
            self.flush(timeout)
        finally:
            self._producer = None


def _fatal_error(exc: BaseException) -> KafkaError:
    """The fatal KafkaError confluent-kafka raised out of ``flush`` (a producer given its own
    ``error_cb`` instead raises none: a delivery callback may turn it into a SystemError whose
    cause it is); anything else is raised again."""
    for e in (exc, exc.__cause__):
        if isinstance(e, KafkaException) and e.args and isinstance(e.args[0], KafkaError):
            return e.args[0]
    raise exc


PACED_LINGER_MS = 20


def produce_encoded(client_conf: Mapping[str, str], topic: str, keys: Sequence[bytes],
                    values: Sequence[bytes], rate: float | None = None,
                    progress: Callable[[int], None] | None = None,
                    outage_limit: float = DEFAULT_OUTAGE_LIMIT) -> None:
    """Produce records already encoded (``schemas.bulk_encoder``); raises if any is lost.

    ``progress(n)`` hears how many were queued so far, every 1,000 records and at the end.
    """
    extra = {"linger.ms": PACED_LINGER_MS} if rate else {}
    sender = Sender(client_conf, rate=rate, outage_limit=outage_limit, **extra)
    for n, (key, value) in enumerate(zip(keys, values, strict=True), 1):
        sender.send(topic, value, key=key)
        if progress is not None and (n % 1000 == 0 or n == len(values)):
            progress(n)
    sender.flush()


def record_key(record: Mapping[str, Any]) -> bytes:
    """The Kafka key of a record: a position of a moving object (a publication with an
    ``object_id``) is keyed by its object, so that all of one object's positions go to one
    topic partition and keep their order; any other record by its ``id`` (decimal UTF-8)."""
    obj = record.get("object_id")
    return (str(record["id"]) if obj is None else obj).encode()


def produce_records(client_conf: Mapping[str, str], topic: str, name: str,
                    records: Iterable[dict[str, Any]], rate: float | None = None,
                    progress: Callable[[int], None] | None = None,
                    outage_limit: float = DEFAULT_OUTAGE_LIMIT) -> None:
    """Produce records of schema ``name`` keyed by ``record_key``; raises if any is lost.

    A publication whose event time is ``MISSING_TIME`` gets the time it is sent;
    ``progress(n)`` hears how many were queued so far.
    """
    c = codec()
    # A paced producer lingers a little longer than the default, so that it sends batches of
    # tens of records rather than a few.
    extra = {"linger.ms": PACED_LINGER_MS} if rate else {}
    sender = Sender(client_conf, rate=rate, outage_limit=outage_limit, **extra)
    for n, record in enumerate(records, 1):
        if record.get("event_time") == MISSING_TIME:
            record["event_time"] = int(time.time() * 1000)
        sender.send(topic, c.encode(name, record), key=record_key(record))
        if progress is not None:
            progress(n)
    sender.flush()
