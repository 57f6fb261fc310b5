"""Riding out broker trouble: back-off between tries, and one clear error when it lasts too long.

A slow or restarting broker is not a dead one. Every client that waits on Kafka (planning a
micro-batch, reading a range, flushing output, reading a topic to its end) keeps trying with
growing pauses and logs now and then that it is waiting; only when no answer came for the
*outage limit* (``kafka.outage_limit``, default 5 minutes, as Kafka clients and Spark's Kafka
source tolerate minutes) does it give up with ``KafkaOutage``: one line naming the bootstrap
servers, what failed and for how long, and a documented exit code.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import TypeVar

from kafkaio.errors import KafkaOutage, KafkaUnavailable, TopicMissing

log = logging.getLogger("geops.kafka")

T = TypeVar("T")

DEFAULT_OUTAGE_LIMIT = 300.0


class Outage:
    """How long a broker has not answered one kind of request, and when to give up.

    Call ``ok()`` after every success and ``failed(what)`` after every failure; ``failed``
    sleeps the next back-off pause (0.1 s doubling to 5 s), logs a warning at most every
    ``warn_every`` seconds, and raises ``KafkaOutage`` once the failures have lasted ``limit``.
    """

    def __init__(self, servers: str, limit: float = DEFAULT_OUTAGE_LIMIT,
                 warn_every: float = 10.0, sleep: Callable[[float], None] = time.sleep,
                 clock: Callable[[], float] = time.monotonic):
        self.servers = servers
        self.limit = limit
        self.warn_every = warn_every
        self._sleep = sleep
        self._clock = clock
        self.since: float | None = None
        self._pause = 0.1
        self._warned = 0.0

    def ok(self) -> None:
        if self.since is not None:
            log.info("Kafka at %s answers again after %.0f s", self.servers, self.down_for())
        self.since = None
        self._pause = 0.1

    def down_for(self) -> float:
        return 0.0 if self.since is None else self._clock() - self.since

    def failed(self, what: str, sleep: bool = True, silent_since: float | None = None) -> None:
        """Record a failure of ``what``; raise KafkaOutage past the limit, else back off.
        ``silent_since`` (on this object's clock): when Kafka last answered, where the caller
        knows it was before this first failure; the outage counts from there."""
        now = self._clock()
        if self.since is None:
            self.since = now if silent_since is None else min(now, silent_since)
            self._warned = now
        down = now - self.since
        if down >= self.limit:
            raise KafkaOutage(
                f"Kafka at {self.servers} did not answer for {down:.0f} s ({what}); giving up "
                f"after the outage limit of {self.limit:.0f} s (kafka.outage_limit / "
                f"--outage-limit). Check that the broker runs (`geops broker status`), then "
                f"restart: progress resumes from the checkpoint")
        if now - self._warned >= self.warn_every:
            self._warned = now
            log.warning("Kafka at %s not answering for %.0f s (%s); retrying until the outage "
                        "limit of %.0f s", self.servers, down, what, self.limit)
        if sleep:
            self._sleep(min(self._pause, max(self.limit - down, 0.0)))
            self._pause = min(self._pause * 2, 5.0)


def with_retry(call: Callable[[], T], outage: Outage, what: str) -> T:
    """``call()`` retried with back-off while it raises KafkaUnavailable; a missing topic is an
    answer, not an outage, and is raised at once, like KafkaOutage past the limit."""
    while True:
        try:
            result = call()
        except (KafkaOutage, TopicMissing):
            raise
        except KafkaUnavailable as exc:
            outage.failed(f"{what}: {exc}")
            continue
        outage.ok()
        return result
