"""`geops bench churn`: a live publication stream while subscriptions change at a steady rate.

Built from the harness's parts (broker, apps on topics of their own, the paced publisher, the
monitor, the phase). Per cell (strategy x join) one app runs; each level offers publications at
the same rate for ``duration_s`` while a second producer writes subscription changes (new ids,
updates of live ids with a new geometry and relation, tombstones) at the level's change rate
for all but the last ``tail_s`` seconds. Levels are interleaved over rounds (even rounds in
order, odd ones reversed) and the app drains between them. What a level reports is measured
over its change window: throughput and latency of the publications, and per change the time
from writing it to the start of the first batch whose ``subscription_offsets`` include it.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import shapely

import config
from bench.churn import calc, report
from bench.harness.batches import window_throughput
from bench.harness.deployment import AppOptions, Session
from bench.harness.encoding import encoded_geometry
from bench.harness.environment import Bench, BenchEnv
from bench.harness.errors import BenchFailed
from bench.harness.latency import latency_summary
from bench.harness.phase import PhaseResult, phase, publisher_for
from bench.harness.publisher import Log, Paced, PacedProducer, paced
from bench.harness.tables import number
from geops.model import MIXED_RELATIONS, Subscriptions
from geops.workload import Workload, generate_workload
from schemas import codec

CHURN_TRIGGER = "500ms"


@dataclass(frozen=True)
class ChurnSpec(BenchEnv):
    """Everything the command line chose. Time to effect is counted in triggers, so the app
    runs a fixed interval here (``CHURN_TRIGGER``), not its default of back-to-back batches."""

    app: AppOptions = field(default_factory=lambda: AppOptions(trigger=CHURN_TRIGGER),
                            kw_only=True)
    out: Path
    cells: tuple[tuple[str, str], ...] = (("sPIS", "STAL"), ("sPIS", "STRL"),
                                          ("RIsPS", "STAL"), ("RIsPS", "STRL"))
    change_rates: tuple[float, ...] = (0.0, 100.0, 1_000.0, 10_000.0)
    rate: float = 900.0                  # publications/s offered at every level
    duration_s: float = 60.0             # per level
    tail_s: float = 3.0                  # the end of a level without changes
    warmup_s: float = 30.0               # offered (with changes) before the levels, not kept
    rounds: int = 2
    mix: tuple[float, float, float] = (0.25, 0.5, 0.25)  # new, update, tombstone
    subscriptions: int = 10_000
    pool: int = 20_000
    seed: int = 5

    @property
    def trigger_ms(self) -> float:
        return config.parse_duration(self.app.trigger) * 1000

    @property
    def window_s(self) -> float:
        return self.duration_s - self.tail_s

    @property
    def monitor_interval(self) -> float:
        return 0.5


# -- the change producer ---------------------------------------------------------------------

@dataclass
class ChangeRun:
    """What a ChangeWriter wrote in one level, and where each change landed."""

    rate: float
    paced: Paced
    written_ms: np.ndarray     # the record's timestamp (set when it was produced)
    partitions: np.ndarray
    offsets: np.ndarray
    counts: tuple[int, int, int]  # new, update, tombstone

    @property
    def achieved_rate(self) -> float:
        return self.paced.sent / max((self.paced.t1_ms - self.paced.t0_ms) / 1000, 1e-9)


class ChangeWriter(PacedProducer):
    """Writes subscription changes of a ChangeMix to the subscriptions topic at a steady rate,
    in a thread of its own, keeping each change's timestamp, partition and offset."""

    def __init__(self, client_conf: Mapping[str, str], topic: str, mix: calc.ChangeMix,
                 geoms: np.ndarray):
        super().__init__(client_conf)
        self.topic, self.mix = topic, mix
        self.header = codec().header("Subscription")
        self.geoms = [encoded_geometry(w) for w in shapely.to_wkb(geoms)]
        self._thread: threading.Thread | None = None
        self._result: ChangeRun | None = None
        self._error: BaseException | None = None
        self.stop = threading.Event()

    def start(self, rate: float, seconds: float) -> None:
        """Write ``rate`` changes/s for ``seconds`` in a thread; ``join`` waits for it."""
        self._result = self._error = None
        self.stop.clear()
        self._thread = threading.Thread(target=self._run, args=(rate, seconds), daemon=True,
                                        name="bench-churn-writer")
        self._thread.start()

    def join(self) -> ChangeRun:
        assert self._thread is not None
        self._thread.join()
        if self._error is not None:
            raise BenchFailed(f"the change writer failed: {self._error!r}")
        assert self._result is not None
        return self._result

    def _run(self, rate: float, seconds: float) -> None:
        try:
            self._result = self.write(rate, seconds)
        except BaseException as exc:  # reported by join
            self._error = exc

    def write(self, rate: float, seconds: float) -> ChangeRun:
        delivered: list[tuple[int, int, int]] = []
        failed = [0]

        def report(err, msg) -> None:
            if err is not None:
                failed[0] += 1
            else:
                delivered.append((msg.timestamp()[1], msg.partition(), msg.offset()))

        produce = self._producer.produce
        mix, header, geoms, topic = self.mix, self.header, self.geoms, self.topic
        before = list(mix.counts)

        def send(_n: int, ms: int) -> None:
            op, sid, geom, rel = mix.next()
            value = (None if op == calc.TOMBSTONE else
                     calc.subscription_bytes(header, sid, geoms[geom], rel))
            produce(topic, value, str(sid).encode(), timestamp=ms, on_delivery=report)

        run = paced(rate, seconds, send, self._producer.poll, stop=self.stop)
        self._producer.flush(120)
        if failed[0] or len(delivered) != run.sent:
            raise BenchFailed(f"{run.sent - len(delivered)} of {run.sent} subscription "
                              "changes were not delivered")
        a = np.array(delivered, np.int64).reshape(-1, 3)
        counts = tuple(c - b for c, b in zip(mix.counts, before, strict=True))
        return ChangeRun(rate, run, a[:, 0], a[:, 1], a[:, 2], counts)

    def close(self) -> None:
        self.stop.set()
        if self._thread is not None:
            self._thread.join(30)
        super().close()


# -- one level -------------------------------------------------------------------------------

@dataclass
class Level:
    strategy: str
    join: str
    round: int
    change_rate: float
    phase: PhaseResult
    changes: ChangeRun | None
    window: tuple[int, int]            # epoch ms: the change window of the offer
    cpu: dict[str, float]              # CPU seconds over the level (offer and drain), by role
    effect: calc.Effect | None = None

    @property
    def label(self) -> str:
        return f"{self.strategy} {self.join} {self.change_rate:,.0f} changes/s r{self.round}"

    def event_mask(self) -> np.ndarray:
        t0, t1 = self.window
        return (self.phase.event_ms >= t0) & (self.phase.event_ms < t1)

    def row(self, trigger_ms: float) -> dict:
        p, (t0, t1) = self.phase, self.window
        thr = window_throughput(p.batches, t0, t1)
        lat = latency_summary(p.latency[self.event_mask()])
        row = {"strategy": self.strategy, "join": self.join, "round": self.round,
               "change_rate": self.change_rate, "window_s": (t1 - t0) / 1000,
               "offered_rate": p.offer.rate, "sent_rate": p.offer.achieved_rate,
               "processed_rate": thr["processed_rate"], "busy_share": thr["busy_share"],
               "per_busy_s": thr["per_busy_s"], "batches": thr["batches"],
               "batch_ms_mean": thr["batch_ms_mean"], "matched": lat["count"],
               "p50_ms": lat["p50"], "p99_ms": lat["p99"],
               "max_ms": lat["max"], "lag_max": max((x.lag for x in p.samples
                                                    if x.lag is not None), default=None),
               "drain_s": p.drain_s, "loadavg_1m": p.load,
               **calc.cpu_use(p.offer.sent, self.cpu["app"], self.cpu["broker"])}
        c = self.changes
        row.update({"changes_written": 0 if c is None else c.paced.sent,
                    "change_write_rate": 0.0 if c is None else c.achieved_rate,
                    "new": 0 if c is None else c.counts[0],
                    "updates": 0 if c is None else c.counts[1],
                    "tombstones": 0 if c is None else c.counts[2]})
        if c is not None and self.effect is not None:
            s = calc.effect_summary(c.written_ms, self.effect, trigger_ms)
            row.update({k: v for k, v in s.items() if k != "changes"})
        return row


def run_level(s: Session, pub, writer: ChangeWriter | None, spec: ChurnSpec, strategy: str,
              join: str, rnd: int, change_rate: float, log: Log) -> Level:
    window = spec.window_s
    events = []
    if change_rate > 0:
        assert writer is not None
        events = [(0.0, lambda: writer.start(change_rate, window))]
    label = f"{strategy} {join}, {change_rate:,.0f} changes/s (round {rnd + 1})"
    cpu0 = s.cpu_seconds()
    result = phase(s, pub, label, spec.rate, spec.duration_s, log, events=events)
    cpu = {k: v - cpu0[k] for k, v in s.cpu_seconds().items()}
    changes = writer.join() if change_rate > 0 and writer is not None else None
    t0 = result.offer.t0_ms
    w = (t0, t0 + int(window * 1000))
    level = Level(strategy, join, rnd, change_rate, result, changes, w, cpu)
    if changes is not None:
        with s.monitor.lock:
            batches = list(s.monitor.data.batches)
        level.effect = calc.time_to_effect(changes.written_ms, changes.partitions,
                                                 changes.offsets, batches)
    r = level.row(spec.trigger_ms)
    log(f"  {label}: processed {r['processed_rate']:,.0f} pub/s over the change window, "
        f"busy {r['busy_share']:.0%}, {number(r['per_busy_s'])} pub per busy s, "
        f"{number(r['pub_per_cpu_s'])} pub per app CPU s; latency p50 "
        f"{number(r['p50_ms'])} ms, p99 {number(r['p99_ms'])} ms"
        + ("" if changes is None else
           f"; {r['changes_written']:,} changes at {r['change_write_rate']:,.0f}/s, "
           f"time to effect p50 {number(r.get('tte_p50_ms'))} ms, p99 "
           f"{number(r.get('tte_p99_ms'))} ms ({number(r.get('tte_p99_triggers'), '.2f')} "
           f"triggers), {r.get('censored', 0)} not in effect by the end")
        + f"; load average {r['loadavg_1m']:.1f}")
    return level


# -- a cell and the whole run ----------------------------------------------------------------

def workload_for(spec: ChurnSpec, log: Log) -> tuple[Workload, np.ndarray]:
    """The workload (its first ``subscriptions`` subscriptions are loaded at start) and the
    geometries the changes cycle through (as many again, drawn the same way)."""
    log(f"generating the workload: {spec.subscriptions:,} subscriptions, as many geometries "
        f"for the changes, a pool of {spec.pool:,} publications, seed {spec.seed}")
    w = generate_workload(seed=spec.seed, subscriptions=2 * spec.subscriptions,
                          publications=spec.pool)
    n = spec.subscriptions
    subs: Subscriptions = w.subscriptions
    first = subs.take(np.arange(n))
    return replace(w, subscriptions=first, subscription_layers=w.subscription_layers[:n]), \
        subs.geoms[n:]


def warm_up(s: Session, pub, writer: ChangeWriter, spec: ChurnSpec, log: Log) -> None:
    """Offer the levels' publication rate for ``warmup_s`` with changes at the lowest change
    rate, not kept: the first tens of seconds of an app cost more (the JVM compiles, Python
    workers import) and the first changes take paths the publications alone do not."""
    if spec.warmup_s <= 0:
        return
    rate = min((r for r in spec.change_rates if r > 0), default=0.0)
    log(f"warming up: {spec.rate:,.0f} pub/s and {rate:,.0f} changes/s for "
        f"{spec.warmup_s:.0f} s (not kept)")
    if rate:
        writer.start(rate, max(spec.warmup_s - spec.tail_s, 1.0))
    pub.offer(spec.rate, spec.warmup_s, pub.new_base())
    if rate:
        writer.join()
    s.drain()


def run_cell(bench: Bench, spec: ChurnSpec, workload: Workload, change_geoms: np.ndarray,
             strategy: str, join: str, log: Log) -> list[Level]:
    app = AppOptions(**{**spec.app.__dict__, "strategy": strategy, "join": join})
    s = bench.session(f"churn-{strategy}-{join}", workload, app=app)
    s.start_app()
    pub = publisher_for(s, workload)
    subs = workload.subscriptions
    mix = calc.ChangeMix(dict(zip(subs.ids.tolist(), subs.relations.tolist(),
                                        strict=True)),
                               len(change_geoms), [int(r) for r in MIXED_RELATIONS],
                               spec.mix, seed=spec.seed)
    writer = ChangeWriter(s.cfg.kafka_client(), s.cfg.topic("subscriptions"), mix,
                          change_geoms)
    levels = []
    try:
        s.warm_up(pub, spec.rate)
        warm_up(s, pub, writer, spec, log)
        for rnd, rate in calc.level_order(spec.change_rates, spec.rounds):
            levels.append(run_level(s, pub, writer, spec, strategy, join, rnd, rate, log))
        log(f"{strategy} {join}: {len(mix):,} subscriptions live at the end")
    finally:
        writer.close()
        pub.close()
        bench.end(s)
    return levels


def main(spec: ChurnSpec, log: Log) -> list[Level]:
    log(f"command: {' '.join(spec.command) or ' '.join(sys.argv)} (pid {os.getpid()})")
    levels: list[Level] = []
    with Bench(spec, log) as bench:
        workload, change_geoms = workload_for(spec, log)
        for strategy, join in spec.cells:
            levels += run_cell(bench, spec, workload, change_geoms, strategy, join, log)
    report.write(spec, levels, log)
    return levels
