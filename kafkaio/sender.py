"""Producing records without losing any silently: delivery reports are counted and checked."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from confluent_kafka import KafkaError, Producer

from kafkaio.clients import KafkaUnavailable, producer


class Sender:
    """A producer that counts deliveries, can cap the rate, and fails loudly on loss.

    ``flush()`` waits for every outstanding record and raises ``KafkaUnavailable`` if any record
    could not be delivered, so a caller that flushes before acknowledging its input is
    at-least-once.
    """

    def __init__(self, client_conf: Mapping[str, str], rate: float | None = None, **extra: Any):
        self._producer: Producer = producer(client_conf, **extra)
        self.rate = rate
        self.sent = 0
        self.delivered = 0
        self.failed = 0
        self.first_error: str | None = None
        self._t0 = time.monotonic()

    def _report(self, err: KafkaError | None, _msg: Any) -> None:
        if err is None:
            self.delivered += 1
        else:
            self.failed += 1
            self.first_error = self.first_error or err.str()

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
            except BufferError:
                self._producer.poll(0.05)
        self.sent += 1
        if self.sent % 1000 == 0:
            self._producer.poll(0)

    def poll(self, timeout: float = 0.0) -> None:
        self._producer.poll(timeout)

    def flush(self, timeout: float = 60.0) -> None:
        """Wait for every queued record; raise if any was not delivered."""
        left = self._producer.flush(timeout)
        if left:
            raise KafkaUnavailable(f"{left} records still undelivered after {timeout:.0f} s "
                                   f"(is the broker reachable?)")
        if self.failed:
            raise KafkaUnavailable(f"{self.failed} of {self.sent} records were not delivered: "
                                   f"{self.first_error}")

    def close(self, timeout: float = 60.0) -> None:
        """Flush, then release the client (its threads stop once nothing refers to it)."""
        try:
            self.flush(timeout)
        finally:
            self._producer = None
