"""Replicated partitions in the app tests: commands with replicas, a producer that
writes publications while the app runs and sends commands between them, and the split of each
batch's items among a partition's owners that the app must have made."""

from __future__ import annotations

import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import shapely
from confluent_kafka import TopicPartition

import config
from app.batch.tasks import publication_key
from app.main import checkpoint_dir, ready_path
from geops.model import Publications
from kafkaio.clients import consumer
from kafkaio.offsets import read_to_end
from kafkaio.sender import Sender, record_key
from schemas import codec
from schemas.assignment import Owners, command_fields, initial_assignment, owner_index
from schemas.records import publication_records

P, W = 16, 2


def replica_command(epoch: int, owners: list[Owners]) -> bytes:
    """A RebalanceCommand (v2) giving each partition ``owners`` (the primary first)."""
    assignment, replicas = command_fields(owners)
    return codec().encode("RebalanceCommand", {
        "epoch": epoch, "assignment": assignment, "moves": [], "mldc_before": 1.0,
        "mldc_predicted": 0.1, "metric": "LB", "reason": "test", "time": 0, "app_id": "",
        "replicas": replicas})


def busiest(router, pubs: Publications) -> list[int]:
    """Partitions by the items the workload sends them, most first."""
    counts = np.bincount(router.route(pubs.geoms).partition, minlength=P)
    return [int(p) for p in np.argsort(-counts, kind="stable")]


@dataclass
class Plan:
    """Owners per epoch: replicas in force from the start, one added (and a partition moved)
    mid-stream, then that replica and one of the first removed again."""

    owners: dict[int, list[Owners]]  # epoch -> owners
    first: list[int]                 # replicated from epoch 1 on
    added: int                       # replicated in epoch 2 only
    moved: int                       # moved to the other worker in epoch 2
    dropped: int                     # one of ``first``, not replicated in epoch 3


def replica_plan(order: list[int]) -> Plan:
    """The plan for partitions ranked busiest first: the three busiest replicated from the
    start, the fourth replicated in epoch 2 only, the busiest unreplicated one moved in epoch 2
    (and kept there), the busiest's replica removed in epoch 3."""
    base = initial_assignment(P, W)
    first, added, moved = order[:3], order[3], order[4]

    def other(p: int) -> int:
        return 1 - base[p]

    e1: list[Owners] = [(w,) for w in base]
    for p in first:
        e1[p] = (base[p], other(p))
    e2 = list(e1)
    e2[added] = (base[added], other(added))
    e2[moved] = (other(moved),)
    e3 = list(e2)
    e3[added] = (base[added],)
    e3[first[0]] = (base[first[0]],)
    return Plan({1: e1, 2: e2, 3: e3}, first, added, moved, first[0])


@dataclass
class MetricsWatch:
    """The BatchSummary records on the metrics topic so far, read incrementally."""

    cfg: config.Config
    summaries: list[dict] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._consumer = consumer(self.cfg.kafka_client())
        self._consumer.assign([TopicPartition(self.cfg.topic("metrics"), 0, 0)])

    def poll(self) -> list[dict]:
        for msg in self._consumer.consume(1000, timeout=0.2):
            if msg.error() is None:
                name, rec = codec().decode(msg.value())
                if name == "BatchSummary":
                    self.summaries.append(rec)
        return self.summaries

    def processed(self) -> int:
        return sum(s["records"] for s in self.summaries)

    def epochs(self) -> set[int]:
        return {s["epoch"] for s in self.summaries if s["records"]}

    def close(self) -> None:
        self._consumer.close()


@dataclass
class SteppedProducer:
    """Writes the publications once the app's query has started, and the commands between them.

    ``commands``: (publications written before it, epoch, command). Before a command the
    producer waits until the app has processed everything written, so the command applies from
    the next batch; and until a batch ran under the previous command's epoch, writing a few
    more publications while it has not (a batch planned before the command arrived runs
    under the old one). ``actions``: (publications written before it, a function called with
    the producer) run likewise once everything written before it is processed; it may write
    with ``send`` and wait with ``settle``, and leave publications for ``write`` to skip
    (``skip``).
    """

    cfg: config.Config
    pubs: Publications
    commands: list[tuple[int, int, bytes]]
    rate: float | None = None  # publications/s; None: each step as fast as it goes
    piece: int = 40
    # positions of moving objects: each publication's object id; they keep their event times
    # and are keyed by object (None: event time now, keyed by publication id)
    object_ids: np.ndarray | None = None
    actions: list[tuple[int, Callable[[SteppedProducer], None]]] = field(default_factory=list)
    error: BaseException | None = None
    finished_at: float = 0.0
    skip: set[int] = field(default_factory=set)  # indexes of publications written otherwise
    written: int = 0  # publications written up to this index
    extra: int = 0    # publications written by ``send``
    _thread: threading.Thread | None = None

    def start(self) -> SteppedProducer:
        self._thread = threading.Thread(target=self._guarded, daemon=True)
        self._thread.start()
        return self

    def join(self, timeout: float = 60.0) -> None:
        assert self._thread is not None
        self._thread.join(timeout)
        assert not self._thread.is_alive(), "the producer did not finish"
        if self.error is not None:
            raise self.error

    def _guarded(self) -> None:
        try:
            self._run()
        except BaseException as exc:  # reported by join()
            self.error = exc

    def send(self, topic: str, value: bytes | None, key: bytes) -> None:
        """Send a record of the producer's own (a publication counts as written)."""
        self.sender.send(topic, value, key=key)
        if topic == self.cfg.topic("publications"):
            self.extra += 1

    def write(self, upto: int) -> None:
        """Write the publications up to index ``upto`` (those in ``skip`` left out)."""
        c = codec()
        for k in range(self.written, upto):
            rec = self.records[k]
            if k in self.skip:
                continue
            if self.object_ids is None:
                rec["event_time"] = int(time.time() * 1000)
            self.sender.send(self.topic, c.encode("Publication", rec), key=record_key(rec))
        self.sender.flush()
        self.written = max(self.written, upto)

    def settle(self, epoch: int | None = None) -> None:
        """Wait until all written is processed and ``epoch`` (if any) ran a batch."""
        self.sender.flush()
        wait_until = time.monotonic() + 180
        while True:
            self.watch.poll()
            skipped = sum(k < self.written for k in self.skip)
            if self.watch.processed() >= self.written - skipped + self.extra:
                if epoch is None or epoch in self.watch.epochs():
                    return
                if self.written >= len(self.records):
                    raise AssertionError(f"epoch {epoch} never ran a batch")
                self.write(self.written + self.piece)
            if time.monotonic() > wait_until:
                raise TimeoutError(f"the app processed {self.watch.processed()} of "
                                   f"{self.written}")

    def _run(self) -> None:
        marker = ready_path(checkpoint_dir(self.cfg))
        deadline = time.monotonic() + 180
        while not marker.exists():
            if time.monotonic() > deadline:
                raise TimeoutError(f"the app's query did not start ({marker})")
            time.sleep(0.1)
        self.topic = self.cfg.topic("publications")
        self.records = list(publication_records(self.pubs, self.object_ids))
        self.watch = MetricsWatch(self.cfg)
        self.sender = Sender(self.cfg.kafka_client(), rate=self.rate)
        steps = sorted([(before, 0, k) for k, (before, _, _) in enumerate(self.commands)]
                       + [(before, 1, k) for k, (before, _) in enumerate(self.actions)])
        try:
            previous: int | None = None
            for before, is_action, k in steps:
                self.write(max(before, self.written))
                self.settle(previous)
                if is_action:
                    self.actions[k][1](self)
                    continue
                _, epoch, value = self.commands[k]
                self.sender.send(self.cfg.topic("control"), value, key=b"geops")
                self.sender.flush()
                previous = epoch
            self.write(len(self.records))
            self.settle(previous)
        finally:
            self.sender.close()
            self.watch.close()
            self.finished_at = time.time()


def batch_keys(cfg: config.Config, summaries: list[dict]) -> tuple[dict[int, np.ndarray],
                                                                    dict[int, bytes]]:
    """Each batch's publication keys (from the end offsets its summaries recorded; the first
    batch starts at 0) and the geometry (WKB) of every key on the publications topic."""
    geometry: dict[int, bytes] = {}
    for msg in read_to_end(cfg.kafka_client(), cfg.topic("publications")):
        rec = codec().decode_as("Publication", msg.value())
        geometry[int(publication_key(np.int64(msg.partition()), np.int64(msg.offset())))] = \
            rec["geometry"]
    ends = {s["batch_id"]: {int(p): o for p, o in s["source_end_offsets"].items()}
            for s in summaries}
    out = {}
    for batch, end in ends.items():
        start = ends.get(batch - 1, {}) if batch else {}
        keys = [publication_key(np.int64(p), np.arange(start.get(p, 0), o, dtype=np.int64))
                for p, o in end.items()]
        out[batch] = np.sort(np.concatenate(keys)) if keys else np.empty(0, np.int64)
    return out, geometry


def expected_split(router, keys: np.ndarray, geometry: dict[int, bytes],
                   owners: list[Owners]) -> Counter:
    """(partition, worker) -> items of a batch with ``keys``, as the app must split them."""
    if not len(keys):
        return Counter()
    geoms = shapely.from_wkb([geometry[int(k)] for k in keys])
    routed = router.route(geoms)
    out: Counter = Counter()
    for pid, items in routed.by_partition():
        own = owners[pid]
        which = owner_index(keys[items.pub_index], len(own))
        for j, w in enumerate(own):
            if (n := int((which == j).sum())):
                out[pid, w] = n
    return out


def loads_by_batch(loads: list[dict]) -> dict[int, list[Counter]]:
    """batch -> per report of it (a replayed batch reports again) its (partition, worker) ->
    items; reports are told apart by the time they were sent."""
    grouped: dict[tuple[int, int], Counter] = defaultdict(Counter)
    for r in loads:
        if r["items"]:
            grouped[r["batch_id"], r["time"]][r["partition"], r["worker"]] += r["items"]
    out: dict[int, list[Counter]] = defaultdict(list)
    for (batch, _), counts in sorted(grouped.items()):
        out[batch].append(counts)
    return out


def assert_split_as_keys_give(cfg: config.Config, router, owners: list[Owners],
                              summaries: list[dict], loads: list[dict]) -> int:
    """Every report of a batch (a replayed batch reports again; a report cut short by a kill
    holds part of its loads) has the split of its items among the owners that the batch's keys
    give, and every owner of a replicated partition took items. Returns how many batches were
    reported more than once."""
    keys, geometry = batch_keys(cfg, summaries)
    reports = loads_by_batch(loads)
    assert set(reports) <= set(keys)
    for batch, counts in reports.items():
        want = expected_split(router, keys[batch], geometry, owners)
        assert all(c.items() <= want.items() for c in counts), batch
        assert any(c == want for c in counts), batch
    replicated = {(r["partition"], r["worker"]) for r in loads
                  if r["items"] and len(owners[r["partition"]]) > 1}
    assert replicated == {(p, w) for p, o in enumerate(owners) if len(o) > 1 for w in o}
    return sum(len(c) > 1 for c in reports.values())
