"""When a real-time app has nothing left to do, for ``app.stop_after_idle``.

The tasks have no micro-batches whose input the driver could watch; the driver asks Kafka
instead: the publications topic's end offsets, and the offsets the tasks committed to the app's
consumer group (after each period, under either delivery). The app is quiet while the topic has
not grown and every partition's records are committed as answered.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

from confluent_kafka import KafkaException, TopicPartition

from kafkaio.clients import consumer
from kafkaio.errors import KafkaUnavailable
from kafkaio.offsets import EndOffsets

CHECK_S = 1.0  # how often the driver asks


class Quiet:
    """How long the app has been quiet: nothing new on ``topic`` and all of it answered."""

    def __init__(self, conf: Mapping[str, str], topic: str, group: str,
                 clock: Callable[[], float] = time.monotonic):
        self.topic, self.clock = topic, clock
        self._probe = EndOffsets(conf, timeout=10.0)
        self._group = consumer(conf, group_id=group)
        self._ends: dict[int, int] | None = None
        self._since = self._asked = clock()

    def seconds(self) -> float:
        """Seconds since the topic last grew or a task last had records to answer (asked at
        most every ``CHECK_S``; Kafka not answering counts as not quiet)."""
        now = self.clock()
        if now - self._asked < CHECK_S:
            return now - self._since
        self._asked = now
        try:
            ends = self._probe(self.topic)
            done = self._group.committed([TopicPartition(self.topic, p) for p in ends],
                                         timeout=10)
        except (KafkaException, KafkaUnavailable):
            self._since = now
            return 0.0
        answered = {tp.partition: tp.offset for tp in done}
        behind = any(answered.get(p, -1) < end for p, end in ends.items() if end > 0)
        if behind or ends != self._ends:
            self._since, self._ends = now, ends
        return now - self._since

    def close(self) -> None:
        self._probe.close()
        self._group.close()
