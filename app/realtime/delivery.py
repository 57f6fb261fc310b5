"""How a real-time task's answers reach Kafka, and where a task started again resumes.

Every commit interval a task ends a *period*: its summary (``period``) goes out after the
period's answers, with the states of the objects that changed in it (``changelog``), and then

- **at-least-once**: the task waits for every record's delivery, then writes the objects'
  states and waits for them, and commits the offsets it answered to the app's consumer group;
  a task started again resumes from the group's offsets, and answers again what came after
  them (the same ``Match`` records, keyed by publication);
- **exactly-once**: the period is one Kafka transaction of the task's transactional id
  (the app's consumer group of the real-time path, ``geops-<app id>-<digest>-rt``, and the
  task's index): its matches, events, dead letters, objects' states and the
  summary, which carries the transaction's marker (``kafkaio.transactions``) and, in
  ``source_end_offsets``, the offsets the period answered up to. A task started again fences
  its previous producer (an open transaction is aborted), reads its newest committed summary
  and resumes from those offsets: what a ``read_committed`` reader sees is every answer once.
  It holds across restarts with the same number of workers: with another, a partition that
  changes tasks resumes from the group's offsets (committed after each transaction), which may
  repeat one interval's answers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from confluent_kafka import Consumer, TopicPartition

from app.realtime.changelog import StateRecord
from kafkaio.sender import Sender
from kafkaio.transactions import Marker, TransactionalSender, last_marked
from schemas import codec

MARKER_QUERY = "real-time"  # the marker's query: the task's transactions are not a query's


class Delivery:
    """A task's output: ``out`` to send with, ``resume`` to start from, ``end`` a period."""

    def __init__(self, ctx: Any, index: int):
        self.ctx, self.index = ctx, index
        self.exactly_once = ctx.delivery == "exactly-once"
        if self.exactly_once:
            self.txn = f"{ctx.group}{index}"  # the group's name, the task's index after it
            self.out: Sender = TransactionalSender(ctx.kafka_conf, self.txn, ctx.outage_limit)
            self.out.begin()
        else:
            self.txn = ""
            self.out = Sender(ctx.kafka_conf, outage_limit=ctx.outage_limit,
                              **{"linger.ms": 1})

    def resume(self) -> dict[int, int]:
        """Partition -> the offset to resume from that the output itself records (exactly-once:
        the newest committed summary's); the group's committed offsets do for the rest."""
        if not self.exactly_once:
            return {}
        found = last_marked(self.ctx.kafka_conf, self.ctx.metrics, self.txn,
                            self.ctx.outage_limit)
        if found is None:
            return {}
        summary = codec().decode_as("BatchSummary", found[1].value())
        return {int(p): int(o) for p, o in summary["source_end_offsets"].items()}

    def end(self, reader: Consumer, summary: dict, positions: Mapping[int, int],
            states: Sequence[StateRecord] = (), load: dict | None = None) -> None:
        """End a period: its ``load`` and summary out, its records delivered with the objects'
        ``states`` (in one transaction under exactly-once; after the rest under
        at-least-once), then the group's offsets committed."""
        headers = (Marker(self.txn, MARKER_QUERY, int(summary["batch_id"])).header()
                   if self.exactly_once else None)
        if load is not None:
            self.out.send(self.ctx.metrics, codec().encode("PartitionLoad", load),
                          key=self.ctx.app_id.encode())
        self.out.send(self.ctx.metrics, codec().encode("BatchSummary", summary),
                      key=self.ctx.app_id.encode(), headers=headers)
        if self.exactly_once:
            self._states(states)
            self.out.commit()
            self.out.begin()
        else:
            # a state is written only once the events it follows are: a crash in between
            # answers those positions again from the state before them
            self.out.flush()
            if states:
                self._states(states)
                self.out.flush()
        if positions:
            reader.commit(offsets=[TopicPartition(self.ctx.publications, p, o)
                                   for p, o in positions.items()], asynchronous=True)

    def _states(self, states: Sequence[StateRecord]) -> None:
        for part, key, value in states:
            self.out.send(self.ctx.object_state, value, key=key, partition=part)

    def close(self) -> None:
        """Deliver what is queued (at-least-once) or abort the open transaction."""
        self.out.close()
