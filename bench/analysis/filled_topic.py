"""For the broker experiments (``prefetch_records``, ``large_records``): an embedded broker
with one single-partition topic ``pubs`` filled with ``count`` random records of ``size``
bytes; stopped on exit."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient, NewTopic

from kafkaio import broker
from kafkaio.sender import Sender


@contextmanager
def filled_topic(count: int, size: int, **producer_extra: Any) -> Iterator[dict[str, str]]:
    """The client configuration of the running broker, once every record is delivered."""
    state = Path(tempfile.mkdtemp(prefix="filled-topic-"))
    info, _ = broker.start(state, port=broker.free_port())
    try:
        conf = {"bootstrap.servers": info.address}
        admin = AdminClient(conf)
        for f in admin.create_topics([NewTopic("pubs", 1, 1)]).values():
            f.result()
        sender = Sender(conf, **producer_extra)
        value = os.urandom(size)
        for _ in range(count):
            sender.send("pubs", value)
        sender.close()
        yield conf
    finally:
        broker.stop(state)
