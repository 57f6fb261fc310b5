"""The rate-limited publisher of the benchmarks that offer a live stream (live, churn,
delivery, chaos): records sent at a steady rate, and what was sent when."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import shapely

from bench.harness.encoding import encoded_geometry, encoded_object, publication_bytes
from bench.harness.errors import BenchFailed
from kafkaio.clients import producer
from schemas import codec

Log = Callable[[str], None]
# The publisher's linger: the time a record waits here counts as latency, and a few
# milliseconds already make batches of several records at these rates.
LINGER_MS = 5


def now_ms() -> int:
    """Now, in epoch milliseconds: the unit of Kafka timestamps and of the app's metrics."""
    return int(time.time() * 1000)


@dataclass
class Paced:
    """What ``paced`` sent: how many, from when to when (epoch ms), and per whole second."""

    sent: int
    t0_ms: int
    t1_ms: int
    per_sec: np.ndarray


def paced(rate: float, seconds: float, send: Callable[[int, int], None],
          poll: Callable[[float], Any],
          events: list[tuple[float, Callable[[], None]]] | None = None,
          stop: threading.Event | None = None) -> Paced:
    """Call ``send(n, now_ms)`` for n = 0, 1, ... at a steady ``rate`` per second for
    ``seconds`` (``round(rate * seconds)`` calls unless ``stop`` is set first); ``send`` raises
    BufferError when the client's queue is full, and is called again after ``poll``.
    ``events`` (offset in seconds, function) run once at their offset without pausing the
    stream; those past the end run at the end."""
    total = round(rate * seconds)
    per_sec = np.zeros(int(np.ceil(seconds)) + 1, np.int64)
    pending = sorted(events or [], key=lambda e: e[0])
    t0_ms = now_ms()
    t0 = time.monotonic()
    n = 0
    while n < total:
        el = time.monotonic() - t0
        while pending and pending[0][0] <= el:
            pending.pop(0)[1]()
        due = min(total, int(el * rate) + 1)
        ms = now_ms()
        sec = min(int(el), len(per_sec) - 1)
        while n < due:
            try:
                send(n, ms)
            except BufferError:
                poll(0.01)
                continue
            n += 1
            per_sec[sec] += 1
        poll(0)
        if stop is not None and stop.is_set():
            break
        wait = (n / rate) - (time.monotonic() - t0)
        if wait > 0:
            time.sleep(min(wait, 0.005))
    t1_ms = now_ms()
    for _, fn in pending:  # events past the end still run
        fn()
    return Paced(n, t0_ms, t1_ms, per_sec)


class PacedProducer:
    """A producer for ``paced`` loops: linger ``LINGER_MS``, a deep queue; ``close`` flushes
    and drops the client (its threads stop once nothing refers to it)."""

    def __init__(self, client_conf: Mapping[str, str]):
        self._producer = producer(client_conf, **{"linger.ms": LINGER_MS,
                                                  "queue.buffering.max.messages": 1_000_000})

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._producer.flush(30)
        self._producer = None


class Publisher(PacedProducer):
    """Writes publications at a steady offered rate, event_time = the time of sending.

    The geometries of a pool cycle; ids are unique per offer (``id_base`` + sequence), so a
    phase's Match records are told apart by id. ``other_pools`` are more pools that ``use``
    switches to, also in the middle of an offer (a hot spot that moves).
    """

    def __init__(self, client_conf: Mapping[str, str], topic: str, pool_geoms: np.ndarray,
                 other_pools: Sequence[np.ndarray] = (), objects: np.ndarray | None = None):
        super().__init__(client_conf)
        self.topic = topic
        self.header = codec().header("Publication")
        self.pools = [[encoded_geometry(w) for w in shapely.to_wkb(g)]
                      for g in (pool_geoms, *other_pools)]
        # positions of moving objects: the object id of each of the first pool's geometries
        # (keyed by object, as `geops publish` does); None: anonymous publications
        self.objects = (None if objects is None else
                        [(encoded_object(o), o.encode()) for o in objects.tolist()])
        self.geoms = self.pools[0]
        self.failed = 0
        self._next_base = 1

    def use(self, pool: int) -> None:
        """Send the geometries of pool ``pool`` (0: the first) from the next publication on."""
        self.geoms = self.pools[pool]

    def _report(self, err: Any, _msg: Any) -> None:
        if err is not None:
            self.failed += 1

    def new_base(self) -> int:
        base = self._next_base * 1_000_000_000
        self._next_base += 1
        return base

    def offer(self, rate: float, seconds: float, id_base: int,
              events: list[tuple[float, Callable[[], None]]] | None = None,
              stop: threading.Event | None = None) -> Offer:
        """Offer ``rate`` publications/s for ``seconds``; ``events`` run once at their offset
        (seconds) without pausing the stream. Returns what was sent when."""
        produce = self._producer.produce
        header, topic = self.header, self.topic
        report = self._report

        objects = self.objects

        def send(n: int, ms: int) -> None:
            pid = id_base + n
            geoms = self.geoms  # ``use`` may switch pools while the offer runs
            if objects is None:
                produce(topic, publication_bytes(header, pid, geoms[n % len(geoms)], ms),
                        str(pid).encode(), on_delivery=report)
                return
            field, key = objects[n % len(objects)]
            produce(topic, publication_bytes(header, pid, geoms[n % len(geoms)], ms, field),
                    key, on_delivery=report)

        run = paced(rate, seconds, send, self._producer.poll, events, stop)
        self._producer.flush(60)
        if self.failed:
            raise BenchFailed(f"{self.failed} publications were not delivered")
        return Offer(rate, seconds, id_base, run.sent, run.t0_ms, run.t1_ms, run.per_sec)

@dataclass
class Offer:
    rate: float
    seconds: float
    id_base: int
    sent: int
    t0_ms: int
    t1_ms: int
    per_sec: np.ndarray

    @property
    def achieved_rate(self) -> float:
        return self.sent / max((self.t1_ms - self.t0_ms) / 1000, 1e-9)
