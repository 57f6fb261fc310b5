"""Following the compacted subscriptions topic: the set at start, then each batch's changes.

The last value per key wins and a tombstone (null value, key = the subscription id) deletes,
exactly as compaction would leave the topic. Before each micro-batch the app reads the records
that arrived since the last one, up to end offsets it records for that batch in the checkpoint
(``<checkpoint>/geops-subscriptions/<batch id>``): a batch replayed after a crash reads the same
offsets, so its publications are matched against the same subscriptions. A restarted app starts
from the set as of the newest recorded batch. Records that cannot be used go to the dead-letter
topic with their reason and the stream goes on. The records are read by the rules and code of
the start-up scan (``app.subscriptions.scan``), ahead of the batches by a thread (``Prefetch``):
a batch's end offsets are what that thread has read when the batch starts, so the batch does
not wait for the broker (a replayed batch waits for its recorded ends if they are not read yet).
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from app.subscriptions.scan import DeadRecord, read_change
from geops.model import Subscriptions
from kafkaio.offsets import EndOffsets, RangeReader, read_between
from kafkaio.retry import DEFAULT_OUTAGE_LIMIT, Outage, with_retry
from kafkaio.sender import Sender
from schemas import codec

log = logging.getLogger("geops.app.subscriptions")

KEEP_RECORDED = 200  # recorded batches kept in the checkpoint (Spark keeps 100 by default)


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
    # row for row with ``upserts``: the ``DetectKind`` bit mask of each (0: no fence)
    detect: np.ndarray = field(default_factory=lambda: np.empty(0, np.uint8))

    def __bool__(self) -> bool:
        return bool(len(self.upserts) or len(self.deletes))


class Prefetch:
    """Reads the subscriptions topic ahead, in a thread, from where the set stands: a batch
    takes what is already read instead of asking the broker and reading while it waits, which
    under a steady stream of changes was a measurable share of every batch
    (``docs/results/churn/analysis.md``). A broker
    that stays away past the outage limit fails the thread, and the next ``take`` raises it."""

    # between looks at the end offsets, also after a look that read changes (reading again at
    # once kept the thread reading small pieces back to back under a steady stream of changes,
    # taking CPU from the batches); a change waits at most this long for the next look
    LOOK_EVERY_S = 0.05
    # A look costs the broker as well (a broker can take tens of milliseconds to answer the end
    # offsets after a burst): between looks the thread waits at
    # least this many times what its last ask took, so a slow broker spends at most a fifth of
    # its time answering them.
    LOOK_COST_FACTOR = 4.0

    def __init__(self, conf: Mapping[str, str], topic: str, start: Mapping[int, int],
                 outage_limit: float, ends_now: Callable[[], dict[int, int]]):
        self.conf, self.topic, self.outage_limit = dict(conf), topic, outage_limit
        self._ends_now = ends_now  # the topic's end offsets now (retried up to the limit)
        self.reached: dict[int, int] = dict(start)  # read up to here (exclusive)
        self._messages: list[Any] = []
        self._error: BaseException | None = None
        self._cond = threading.Condition()
        self._stop = threading.Event()
        self._caught_up = threading.Event()  # read up to the end seen by a first look
        self._thread = threading.Thread(target=self._run, name="subscriptions-prefetch",
                                        daemon=True)
        self._thread.start()

    def _run(self) -> None:
        reader = RangeReader(self.conf)
        try:
            while not self._stop.is_set():
                looked = time.monotonic()
                ends = self._ends_now()
                pause = max(self.LOOK_EVERY_S,
                            self.LOOK_COST_FACTOR * (time.monotonic() - looked))
                start = dict(self.reached)
                if all(e <= start.get(p, 0) for p, e in ends.items()):
                    self._caught_up.set()
                    self._stop.wait(pause)
                    continue
                ends = {p: max(e, start.get(p, 0)) for p, e in ends.items()}
                got = list(read_between(self.conf, self.topic, start, ends, self.outage_limit,
                                        reuse=reader))
                with self._cond:
                    self._messages.extend(got)
                    self.reached = {**start, **ends}
                    self._cond.notify_all()
                self._caught_up.set()
                self._stop.wait(max(0.0, looked + pause - time.monotonic()))
        except BaseException as exc:
            with self._cond:
                self._error = exc
                self._cond.notify_all()
            self._caught_up.set()
        finally:
            reader.close()

    def ahead(self) -> dict[int, int]:
        """The offsets read so far: the end a new batch's changes can take without waiting.
        The first call waits until the thread has read up to the end it first saw, so the first
        batch (also after a restart) has every change written before the app started."""
        self._caught_up.wait()
        with self._cond:
            if self._error is not None:
                raise self._error
            return dict(self.reached)

    def take(self, start: Mapping[int, int], ends: Mapping[int, int]) -> list[Any]:
        """The messages from ``start`` up to ``ends`` (waiting until they are read); what is
        below ``ends`` is dropped from the buffer."""
        with self._cond:
            while not all(self.reached.get(p, 0) >= e for p, e in ends.items()):
                if self._error is not None:
                    raise self._error
                self._cond.wait(1.0)
            keep, out = [], []
            for m in self._messages:
                p, o = m.partition(), m.offset()
                if o >= ends.get(p, 0):
                    keep.append(m)
                elif o >= start.get(p, 0):
                    out.append(m)
            self._messages = keep
            return out

    def close(self, timeout: float = 5.0) -> bool:
        """Stop the thread; whether it ended within ``timeout`` seconds."""
        self._stop.set()
        self._thread.join(timeout=timeout)
        return not self._thread.is_alive()


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
        self.position: dict[int, int] = {}
        self._probe: EndOffsets | None = None
        self._ahead: Prefetch | None = None  # reads the changes ahead of the batches
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

    def ends_now(self) -> dict[int, int]:
        """The topic's end offsets now, asked again through outages up to the limit."""
        if self._probe is None:
            self._probe = EndOffsets(self.conf, timeout=10.0)
        return with_retry(lambda: self._probe(self.topic), self._outage,
                          f"end offsets of {self.topic}")

    def start(self) -> dict[int, int]:
        """The end offsets the set to start from is read up to (by ``app.subscriptions.scan``):
        those of the newest recorded batch (a restart), else the topic's ends now."""
        recorded = sorted(int(f.name) for f in self.dir.glob("[0-9]*")) if self.dir.exists() \
            else []
        ends = self._recorded(recorded[-1]) if recorded else None
        if ends is None:
            ends = self.ends_now()
        else:
            log.info("subscriptions as of batch %d (offsets %s)", recorded[-1], ends)
        self.position = dict(ends)
        return dict(ends)

    def resume_from(self, offsets: Mapping[int, int]) -> None:
        """Read the changes from ``offsets`` on instead of from ``start``'s ends: the set is
        as of these (a snapshot of the static side, ``app.static_snapshot``, at or behind
        them), so the first batch reads what came after it."""
        if self._ahead is not None:
            raise RuntimeError("the feed is already reading changes")
        self.position = dict(offsets)

    def reject(self, dead: list[DeadRecord]) -> None:
        """Log unusable subscription records and send them to the dead-letter topic, now (a
        replay of the batch sends them again, like any dead letter of a replayed batch)."""
        for record in dead:
            log.warning("skipping %s[%d]@%d: %s", record.topic, record.partition, record.offset,
                        record.reason)
        if dead and self.dead_letter_topic:
            self._send_dead(dead)

    def follow(self) -> None:
        """Start reading the changes ahead now, before the first batch (a standby: its first
        batch after taking over then finds them read)."""
        if self._ahead is None:
            # from now on only the thread asks the end offsets (``start`` asked before it)
            self._ahead = Prefetch(self.conf, self.topic, self.position, self.outage_limit,
                                   self.ends_now)

    def changes(self, batch_id: int) -> Change:
        """The records that arrived since the last batch, up to this batch's recorded end."""
        self.follow()
        assert self._ahead is not None
        ends = self._recorded(batch_id)
        if ends is None:
            ends = self._ahead.ahead()  # read on from ``position``: never behind it
            self._record(batch_id, ends)
        start = dict(self.position)
        found, upserts = read_change(self._ahead.take(start, ends))
        self.position = {p: max(e, self.position.get(p, 0)) for p, e in ends.items()}
        self.reject(found.dead)
        change = Change(upserts, found.deleted,
                        LoadReport(found.records, found.tombstones, found.skipped), found.detect)
        return change

    def _send_dead(self, dead: list[DeadRecord]) -> None:
        c = codec()
        sender = Sender(self.conf, outage_limit=self.outage_limit)
        now = int(time.time() * 1000)
        for d in dead:
            sender.send(self.dead_letter_topic, c.encode("DeadLetter", {
                "topic": d.topic, "partition": d.partition, "offset": d.offset,
                "reason": d.reason, "key": d.key, "payload": d.value, "time": now,
                "app_id": self.app_id}), key=d.key)
        sender.close()

    def offsets(self) -> dict[str, int]:
        """Where the set stands: {partition: offset after the last record applied}."""
        return {str(p): e for p, e in sorted(self.position.items())}

    def close(self, wait: bool = True) -> None:
        """Stop reading ahead and close the clients. ``wait=False``, for an app that ends
        because Kafka is silent: the thread, which may be waiting on Kafka, and the client it
        asks are left to end with the process instead of waiting out their timeouts."""
        if self._ahead is not None:  # first: its thread asks the probe
            wait = self._ahead.close(5.0 if wait else 0.0) and wait
            self._ahead = None
        if self._probe is not None and wait:
            self._probe.close()
        self._probe = None
