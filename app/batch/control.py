"""The app's end of the control topic: recover the latest assignment, then poll for new ones.

A RebalanceCommand is applied only if its epoch is higher than the one in force, it is meant for
this app (empty ``app_id`` or ours) and its assignment and replicas fit P partitions and W
workers; every other record is ignored with a logged reason. The topic is compacted, so after
a restart the latest command is still there.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaError, TopicPartition

from kafkaio.clients import consumer
from kafkaio.control import newest_command
from kafkaio.offsets import EndOffsets
from kafkaio.retry import DEFAULT_OUTAGE_LIMIT
from schemas.assignment import NOT_NEWER, TOMBSTONE, Owners, command_for, owners_of
from schemas.errors import CommandRejected

log = logging.getLogger("geops.app.control")


@dataclass(frozen=True)
class Command:
    """A validated rebalance command: the primary owner of each partition (``assignment``)
    and every owner of each (``owners``: one for most, several for a replicated partition)."""

    epoch: int
    assignment: tuple[int, ...]
    record: dict[str, Any]
    owners: tuple[Owners, ...] = ()


class ControlChannel:
    """Reads RebalanceCommands for one app with P partitions and W workers."""

    def __init__(self, client_conf: Mapping[str, str], topic: str, app_id: str,
                 partitions: int, workers: int):
        self.conf = dict(client_conf)
        self.topic = topic
        self.app_id = app_id
        self.partitions = partitions
        self.workers = workers
        self.ignored = 0
        self._consumer: Any = None

    def check(self, value: bytes | None, current_epoch: int, where: str) -> Command | None:
        """The command in ``value`` if it should be applied; otherwise log why not."""
        try:
            rec = command_for(value, self.app_id, current_epoch, self.partitions, self.workers)
        except CommandRejected as why:
            return self._ignore(why, where)
        return _command(rec)

    def _ignore(self, why: CommandRejected, where: str) -> None:
        if why.kind != TOMBSTONE:
            self.ignored += 1
            level = logging.INFO if why.kind == NOT_NEWER else logging.WARNING
            log.log(level, "ignoring control record %s: %s", where, why)
        return None

    def recover(self, outage_limit: float = DEFAULT_OUTAGE_LIMIT) -> Command | None:
        """The newest applicable command on the topic (after a restart), and start polling."""
        rec = newest_command(self.conf, self.topic, self.app_id, newer_than=0,
                             partitions=self.partitions, workers=self.workers,
                             skipped=self._ignore, outage_limit=outage_limit)
        probe = EndOffsets(self.conf)
        try:
            ends = probe(self.topic)
        finally:
            probe.close()
        self._consumer = consumer(self.conf)
        self._consumer.assign([TopicPartition(self.topic, p, end) for p, end in ends.items()])
        return None if rec is None else _command(rec)

    def poll(self, current_epoch: int) -> Command | None:
        """The newest applicable command that arrived since the last poll, if any."""
        if self._consumer is None:
            raise RuntimeError("call recover() before poll()")
        best: Command | None = None
        while True:
            # The client fetches the assigned partition in the background, so what has arrived
            # is already here: waiting for more would cost every batch its timeout.
            msgs = self._consumer.consume(1000, timeout=0)
            if not msgs:
                return best
            for msg in msgs:
                if msg.error() is not None:
                    if msg.error().code() != KafkaError._PARTITION_EOF:
                        log.warning("control topic: %s", msg.error().str())
                    continue
                floor = max(current_epoch, best.epoch if best else current_epoch)
                cmd = self.check(msg.value(), floor,
                                 f"{msg.topic()}[{msg.partition()}]@{msg.offset()}")
                if cmd is not None:
                    best = cmd

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None


def _command(rec: dict[str, Any]) -> Command:
    owners = tuple(owners_of(rec["assignment"], rec.get("replicas", ())))
    return Command(rec["epoch"], tuple(rec["assignment"]), rec, owners)
