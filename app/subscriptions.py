"""Following the compacted subscriptions topic: the set at start, then each batch's changes.

The last value per key wins and a tombstone (null value, key = the subscription id) deletes,
exactly as compaction would leave the topic. Before each micro-batch the app reads the records
that arrived since the last one, up to end offsets it records for that batch in the checkpoint
(``<checkpoint>/geops-subscriptions/<batch id>``): a batch replayed after a crash reads the same
offsets, so its publications are matched against the same subscriptions. A restarted app starts
from the set as of the newest recorded batch. Records that cannot be used go to the dead-letter
topic with their reason (through ``dead_letter``) and the stream goes on.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from app.subscription_scan import DeadRecord
from geops.model import Relation, Subscriptions, geometries_from_wkb
from kafkaio.offsets import EndOffsets, read_between, reader_consumer
from kafkaio.retry import DEFAULT_OUTAGE_LIMIT, Outage, with_retry
from kafkaio.sender import Sender
from schemas import DecodeError, codec

log = logging.getLogger("geops.app.subscriptions")

KEEP_RECORDED = 200  # recorded batches kept in the checkpoint (Spark keeps 100 by default)

DeadLetter = Callable[[Any, str], None]  # (Kafka message, reason)


@dataclass
class LoadReport:
    """How the subscriptions topic was turned into subscriptions."""

    records: int = 0
    tombstones: int = 0
    skipped: int = 0


@dataclass
class Change:
    """The subscription records of one batch, as upserts and deletes by id."""

    upserts: Subscriptions
    deletes: np.ndarray
    report: LoadReport = field(default_factory=LoadReport)

    def __bool__(self) -> bool:
        return bool(len(self.upserts) or len(self.deletes))


def _decode(messages: Iterable[Any], dead_letter: DeadLetter | None
            ) -> tuple[dict[int, tuple[bytes, int, Any] | None], LoadReport]:
    """{subscription id: (WKB, relation, message) or None for a tombstone}, the last record
    per id."""
    c = codec()
    report = LoadReport()
    latest: dict[int, tuple[bytes, int, Any] | None] = {}

    def reject(msg: Any, reason: str) -> None:
        report.skipped += 1
        log.warning("skipping %s[%d]@%d: %s", msg.topic(), msg.partition(), msg.offset(), reason)
        if dead_letter is not None:
            dead_letter(msg, reason)

    for msg in messages:
        report.records += 1
        key = msg.key()
        if msg.value() is None:
            report.tombstones += 1
            try:
                latest[int(key)] = None
            except (TypeError, ValueError):
                reject(msg, f"tombstone whose key {key!r} is not a subscription id")
            continue
        try:
            rec = c.decode_as("Subscription", msg.value())
        except DecodeError as exc:
            reject(msg, str(exc))
            continue
        latest[rec["id"]] = (rec["geometry"], int(Relation[rec["relation"]]), msg)
    return latest, report


def _split(latest: dict, report: LoadReport, dead_letter: DeadLetter | None) -> Change:
    """Upserts with valid geometries, and deletes."""
    deletes = np.array(sorted(k for k, v in latest.items() if v is None), np.int64)
    live = [(k, v) for k, v in latest.items() if v is not None]
    if not live:
        return Change(Subscriptions.empty(), deletes, report)
    ids = np.array([k for k, _ in live], np.int64)
    geoms, problems = geometries_from_wkb([v[0] for _, v in live])
    rels = np.array([v[1] for _, v in live], np.int8)
    keep = np.ones(len(ids), bool)
    for i, problem in enumerate(problems):
        if problem:
            keep[i] = False
            msg = live[i][1][2]
            report.skipped += 1
            log.warning("skipping subscription %d: %s", ids[i], problem)
            if dead_letter is not None:
                dead_letter(msg, f"subscription {ids[i]}: {problem}")
    # An invalid new version of a subscription deletes the old one (it can no longer match).
    deletes = np.union1d(deletes, ids[~keep])
    order = np.argsort(ids[keep], kind="stable")
    pick = np.flatnonzero(keep)[order]
    return Change(Subscriptions(ids[pick], geoms[pick], rels[pick]), deletes, report)


class SubscriptionFeed:
    """The subscriptions topic, read batch by batch at offsets recorded in the checkpoint."""

    def __init__(self, client_conf: Mapping[str, str], topic: str, checkpoint: str,
                 outage_limit: float = DEFAULT_OUTAGE_LIMIT,
                 dead_letter_topic: str | None = None, app_id: str = ""):
        self.conf = dict(client_conf)
        self.topic = topic
        self.dir = Path(checkpoint) / "geops-subscriptions"
        self.outage_limit = outage_limit
        self.dead_letter_topic = dead_letter_topic
        self.app_id = app_id
        self._dead: list[DeadRecord] = []
        self.dead_letter: DeadLetter | None = (
            (lambda msg, reason: self._dead.append(DeadRecord(
                msg.topic(), msg.partition(), msg.offset(), msg.key(), msg.value(), reason)))
            if dead_letter_topic else None)
        self.position: dict[int, int] = {}
        self._probe: EndOffsets | None = None
        self._reader: Any = None  # the consumer each batch reads its changes with
        self._outage = Outage(self.conf.get("bootstrap.servers", "?"), outage_limit)

    def _recorded(self, batch_id: int) -> dict[int, int] | None:
        try:
            return {int(p): e for p, e in json.loads((self.dir / str(batch_id)).read_text())
                    .items()}
        except FileNotFoundError:
            return None

    def _record(self, batch_id: int, ends: dict[int, int]) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        tmp = self.dir / f".{batch_id}.tmp"
        tmp.write_text(json.dumps({str(p): e for p, e in sorted(ends.items())}))
        os.replace(tmp, self.dir / str(batch_id))
        for old in self.dir.iterdir():
            if old.name.isdigit() and int(old.name) < batch_id - KEEP_RECORDED:
                old.unlink(missing_ok=True)

    def _ends_now(self) -> dict[int, int]:
        if self._probe is None:
            self._probe = EndOffsets(self.conf, timeout=10.0, answer_wait=10.0)
        return with_retry(lambda: self._probe(self.topic), self._outage,
                          f"end offsets of {self.topic}")

    def start(self) -> dict[int, int]:
        """The end offsets the set to start from is read up to (by ``app.subscription_scan``):
        those of the newest recorded batch (a restart), else the topic's ends now."""
        recorded = sorted(int(f.name) for f in self.dir.glob("[0-9]*")) if self.dir.exists() \
            else []
        ends = self._recorded(recorded[-1]) if recorded else None
        if ends is None:
            ends = self._ends_now()
        else:
            log.info("subscriptions as of batch %d (offsets %s)", recorded[-1], ends)
        self.position = dict(ends)
        return dict(ends)

    def reject(self, dead: Iterable[DeadRecord]) -> None:
        """Send unusable records found by the start-up scan to the dead-letter topic."""
        for record in dead:
            log.warning("skipping %s[%d]@%d: %s", record.topic, record.partition, record.offset,
                        record.reason)
        if self.dead_letter is not None:
            self._dead.extend(dead)
            self._send_dead()

    def changes(self, batch_id: int) -> Change:
        """The records that arrived since the last batch, up to this batch's recorded end."""
        ends = self._recorded(batch_id)
        if ends is None:
            ends = self._ends_now()
            ends = {p: max(e, self.position.get(p, 0)) for p, e in ends.items()}
            self._record(batch_id, ends)
        start = dict(self.position)
        if self._reader is None:
            self._reader = reader_consumer(self.conf)
        messages = read_between(self.conf, self.topic, start, ends, self.outage_limit,
                                reuse=self._reader)
        latest, report = _decode(messages, self.dead_letter)
        self.position = {p: max(e, self.position.get(p, 0)) for p, e in ends.items()}
        change = _split(latest, report, self.dead_letter)
        self._send_dead()
        return change

    def _send_dead(self) -> None:
        """Unusable subscription records to the dead-letter topic, flushed now (a replay of
        the batch sends them again, like any dead letter of a replayed batch)."""
        if not self._dead or not self.dead_letter_topic:
            return
        c = codec()
        sender = Sender(self.conf, outage_limit=self.outage_limit)
        now = int(time.time() * 1000)
        for d in self._dead:
            sender.send(self.dead_letter_topic, c.encode("DeadLetter", {
                "topic": d.topic, "partition": d.partition, "offset": d.offset,
                "reason": d.reason, "key": d.key, "payload": d.value, "time": now,
                "app_id": self.app_id}), key=d.key)
        sender.close()
        self._dead.clear()

    def offsets(self) -> dict[str, int]:
        """Where the set stands: {partition: offset after the last record applied}."""
        return {str(p): e for p, e in sorted(self.position.items())}

    def close(self) -> None:
        if self._probe is not None:
            self._probe.close()
            self._probe = None
        if self._reader is not None:
            self._reader.close()
            self._reader = None
