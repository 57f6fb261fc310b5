"""Match records written by the join task that computes them (``app.output_from`` = tasks).

The driver's write of a batch grows with its records on one process, whatever the number of
workers; here each join task encodes and produces the ``Match`` records of the publications it
answers alone (their items all reached its worker, or none reached any partition and it is
their ``key mod W`` worker), then its ``PartitionLoad`` records, through a producer its Python
worker process keeps across batches. The driver writes the rest (``app.batch.runner``).

- at-least-once: the task flushes before it returns; a retried task or a replayed batch
  writes again (same keys, same content).
- exactly-once: the task's records are one Kafka transaction of its slot's transactional id
  (the app's, ``-w<worker>``); its last ``PartitionLoad`` carries the marker (the query and
  batch) and the keys it answered (``WRITTEN_HEADER``). A process calls ``init_transactions``
  for a slot when it first writes for it and again when another process wrote for it since (a
  file per slot in the temporary directory names the last one): that fences an attempt before
  it and aborts what it left open. A retried task reads its slot's newest marker and writes
  nothing when the attempt before it committed this batch.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import time
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from confluent_kafka import KafkaException

from app.records import PartitionLoad, Wrote
from kafkaio.errors import Aborted, Fenced, KafkaUnavailable
from kafkaio.sender import Sender
from kafkaio.transactions import Marker, TransactionalSender, last_marked
from schemas import codec
from schemas.match_encoder import encode_matches

WRITTEN_HEADER = "geops-written"
# a transaction aborted (or a producer found fenced) is written again this many times
TASK_WRITE_ATTEMPTS = 3


@dataclass(frozen=True)
class TaskOutput:
    """What a join task needs to write its batch's records; pickled into the task closure."""

    delivery: str               # exactly-once | at-least-once
    kafka_conf: dict[str, str]
    outage_limit: float
    txn: str                    # the app's transactional id; a slot's is ``slot_txn``
    query: str                  # the Spark query id (exactly-once markers)
    batch_id: int
    epoch: int
    app_id: str
    matches: str
    metrics: str
    disjoint: np.ndarray        # the DISJOINT subscriptions' ids, ascending
    # the time of the batch's loads (ms), the same for each writer of them: a batch's loads are
    # one report, told apart from a replay's by it
    loads_ms: int = 0

    @property
    def exactly_once(self) -> bool:
        return self.delivery == "exactly-once"


def slot_txn(txn: str, worker: int) -> str:
    """The transactional id of join worker ``worker``'s tasks."""
    return f"{txn}-w{worker}"


def written_header(keys: np.ndarray) -> tuple[str, bytes]:
    """The header naming the publications a task answered: their sorted keys, delta-coded and
    compressed (consecutive offsets make small deltas)."""
    keys = np.sort(np.asarray(keys, np.int64))
    deltas = np.diff(keys, prepend=np.int64(0))
    return WRITTEN_HEADER, zlib.compress(deltas.astype("<i8").tobytes(), 1)


def written_keys(headers: list[tuple[str, bytes]] | None) -> np.ndarray:
    """The keys ``written_header`` put in a record's headers (empty when it has none)."""
    for key, value in headers or ():
        if key == WRITTEN_HEADER and value:
            return np.cumsum(np.frombuffer(zlib.decompress(value), "<i8")).astype(np.int64)
    return np.empty(0, np.int64)


# This process's producers: (bootstrap servers, transactional id or "") -> producer
_PRODUCERS: dict[tuple[str, str], Sender] = {}


def _slot_file(txn: str) -> Path:
    return Path(tempfile.gettempdir()) / f"geops-slot-{txn}"


def _last_writer(txn: str) -> str:
    try:
        return _slot_file(txn).read_text()
    except OSError:
        return ""


def _producer(out: TaskOutput, txn: str, fresh: bool = False) -> Sender:
    """This process's producer for ``txn`` ("": at-least-once), made (and, for a slot,
    ``init_transactions`` called) when it has none, when another process of this machine
    wrote for the slot since, or when ``fresh``."""
    held = (str(out.kafka_conf.get("bootstrap.servers", "")), txn)
    sender = _PRODUCERS.get(held)
    me = str(os.getpid())
    if sender is not None and not fresh and (not txn or _last_writer(txn) == me):
        return sender
    if sender is not None:
        _PRODUCERS.pop(held)
        with contextlib.suppress(KafkaUnavailable):
            sender.close(timeout=1.0)
    if txn:
        sender = TransactionalSender(out.kafka_conf, txn, out.outage_limit)
        _slot_file(txn).write_text(me)
    else:
        sender = Sender(out.kafka_conf, outage_limit=out.outage_limit)
    _PRODUCERS[held] = sender
    return sender


def _retried() -> bool:
    """Whether this task is a retry (Spark's attempt number above 0)."""
    from pyspark import TaskContext

    task = TaskContext.get()
    return task is not None and task.attemptNumber() > 0


def write_matches(out: TaskOutput, worker: int, keys: np.ndarray, ids: np.ndarray,
                  event_ms: np.ndarray, offsets: np.ndarray, sub_ids: np.ndarray,
                  loads: list[PartitionLoad]) -> Wrote:
    """Write the ``Match`` records of the publications ``keys`` (ids, event times; record i
    matched ``sub_ids[offsets[i]:offsets[i+1]]``) and ``loads`` (at least one: the last carries
    the exactly-once marker); what was written, for the driver's summary."""
    match_ms = int(time.time() * 1000)
    values = encode_matches(ids, offsets, sub_ids, event_ms, match_ms, out.batch_id, out.app_id)
    record_keys = [str(pid).encode() for pid in ids.tolist()]
    c = codec()
    load_values = [c.encode("PartitionLoad", load.record(out.app_id, out.batch_id, out.epoch,
                                                         out.loads_ms)) for load in loads]
    wrote = Wrote(worker, len(ids), match_ms - np.asarray(event_ms, np.int64),
                  tuple((load.partition, load.worker) for load in loads))
    app_key = out.app_id.encode()
    if not out.exactly_once:
        sender = _producer(out, "")
        sender.send_many(out.matches, values, record_keys)
        for value in load_values:
            sender.send(out.metrics, value, key=app_key)
        sender.flush()
        return wrote
    txn = slot_txn(out.txn, worker)
    if _retried() and _committed(out, txn):
        print(f"geops: batch {out.batch_id}, worker {worker}: the task's attempt before this one "
              f"committed its output; not written again", file=sys.stderr, flush=True)
        return wrote._replace(skipped=True)
    headers = [*Marker(txn, out.query, out.batch_id).header(), written_header(keys)]
    fresh = False
    for attempt in range(1, TASK_WRITE_ATTEMPTS + 1):
        sender = _producer(out, txn, fresh)
        assert isinstance(sender, TransactionalSender)
        try:
            sender.begin()
            sender.send_many(out.matches, values, record_keys)
            for k, value in enumerate(load_values, 1):
                sender.send(out.metrics, value, key=app_key,
                            headers=headers if k == len(load_values) else None)
            sender.commit()
            return wrote
        except (Fenced, Aborted, KafkaException):  # the slot taken over, or nothing visible
            if attempt == TASK_WRITE_ATTEMPTS:
                raise
            fresh = True
        except BaseException:
            with contextlib.suppress(Exception):
                sender.abort()
            raise
    raise AssertionError("unreachable")


def _committed(out: TaskOutput, txn: str) -> bool:
    """Whether slot ``txn`` committed this query's batch (its newest marker, read committed,
    after this process's ``init_transactions`` fenced the attempt before)."""
    _producer(out, txn, fresh=True)
    found = last_marked(out.kafka_conf, out.metrics, txn, out.outage_limit)
    return (found is not None and found[0].query == out.query
            and found[0].batch >= out.batch_id)
