"""`geops bench live`: the scenarios (steady, rebalance, soak) built from the publisher, the
monitor and the deployments of ``bench.live``; the moving hot spot is in ``bench.live.moving``."""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from bench.harness.batches import batch_cost
from bench.harness.errors import BenchFailed
from bench.harness.latency import latency_summary
from bench.harness.processes import Processes
from bench.harness.tables import number
from bench.live import calc, live_report
from bench.live.deployment import AppOptions, Session
from bench.live.publisher import Log, Offer, Publisher
from geops.model import Relation
from geops.workload import SkewSpec, Workload, generate_workload
from geops.workload.generate import DEFAULT_POINT_SHARE


@dataclass(frozen=True, kw_only=True)
class BenchEnv:
    """What every benchmark of the running app chooses: the app, the broker (own or given)
    and its client settings, the work directory, and the command recorded in the results."""

    app: AppOptions = field(default_factory=AppOptions)
    bootstrap_servers: str | None = None
    kafka_properties: Mapping[str, str] = field(default_factory=dict)
    workdir: Path | None = None
    keep_workdir: bool = False
    command: tuple[str, ...] = ()

    @property
    def monitor_interval(self) -> float:
        """Seconds between the monitor's lag samples."""
        return 1.0


@dataclass(frozen=True)
class LiveSpec(BenchEnv):
    """Everything the command line chose."""

    out: Path
    scenario: str = "steady"             # steady | rebalance | moving
    soak: float | None = None            # seconds, or None
    subscriptions: int = 10_000
    pool: int = 20_000
    seed: int = 5
    point_share: float = DEFAULT_POINT_SHARE  # of the publications
    relation: Relation | None = None          # of every subscription; None: a mix
    step_s: float = 20.0
    start_rate: float = 500.0
    bisections: int = 3
    max_lag_s: float = 5.0
    max_growth_s: float = 1.0
    max_rate: float | None = None        # skip the search
    backlog: int = 60_000                # steady: publications drained for the ratio; 0: none
    levels: tuple[float, ...] = (0.5, 0.7, 0.9)
    rates: tuple[float, ...] = ()        # steady: fixed rates offered after the levels
    idle_s: float = 0.0                  # steady: CPU of the idle app measured this long
    duration_s: float = 60.0
    trigger_sweep: tuple[str, ...] = ()
    skew: float = 0.9
    hot_workers: int = 1
    shifts: int = 2                      # moving: times the hot spot moves
    distributor_mode: str = "adaptive"   # moving: adaptive | dynamic

    @property
    def monitor_interval(self) -> float:
        return min(1.0, self.step_s / 8)


@dataclass
class PhaseResult:
    label: str
    trigger: str
    level: float | None       # share of the max rate, or None
    offer: Offer
    samples: list             # monitor.Sample
    batches: list[dict]
    ids: np.ndarray
    event_ms: np.ndarray
    match_ms: np.ndarray
    drain_s: float
    marks: dict[str, int] = field(default_factory=dict)  # e.g. command / moved, epoch ms
    load: float | None = None  # the machine's 1-minute load average when the offer ended

    @property
    def latency(self) -> np.ndarray:
        return (self.match_ms - self.event_ms).astype(np.float64)

    def summary(self) -> dict:
        s = latency_summary(self.latency)
        durations = np.array([b["duration_ms"] for b in self.batches if b["records"]], float)
        starts = np.array(sorted(b["start_time"] for b in self.batches if b["records"]), float)
        lags = [x.lag for x in self.samples if x.lag is not None]
        processed = sum(b["records"] for b in self.batches)

        def mean(key: str) -> float | None:
            vals = [b[key] for b in self.batches if b["records"]]
            return float(np.mean(vals)) if vals else None

        return {
            "label": self.label, "trigger": self.trigger,
            "level": self.level, "offered_rate": self.offer.rate,
            "sent_rate": self.offer.achieved_rate, "sent": self.offer.sent,
            "processed_rate": processed / max(self.offer.seconds, 1e-9),
            "matched": s["count"], "p50_ms": s["p50"], "p95_ms": s["p95"], "p99_ms": s["p99"],
            "max_ms": s["max"], "mean_ms": s["mean"],
            "lag_mean": float(np.mean(lags)) if lags else None,
            "lag_max": float(max(lags)) if lags else None,
            "batches": len(durations),
            "records_per_batch": processed / len(durations) if len(durations) else None,
            "batch_ms_mean": float(durations.mean()) if len(durations) else None,
            "batch_ms_max": float(durations.max()) if len(durations) else None,
            "batch_interval_ms": float(np.diff(starts).mean()) if len(starts) > 1 else None,
            "job_ms_mean": mean("job_ms"), "write_ms_mean": mean("write_ms"),
            "join_stage_ms_mean": mean("join_stage_ms"), "drain_s": self.drain_s,
            "loadavg_1m": self.load,
        }


# -- the environment: broker and workdir -----------------------------------------------------

class Bench:
    """The broker (own or given), the work directory and every process; a context manager
    that stops everything on the way out, also on Ctrl-C or failure.

    ``spec``: a LiveSpec, or the spec of another benchmark built on a BenchEnv."""

    def __init__(self, spec: BenchEnv, log: Log):
        self.spec, self.log = spec, log
        self.procs = Processes()
        self.sessions: list[Session] = []
        self._tmp = spec.workdir is None
        self.workdir = Path(spec.workdir or tempfile.mkdtemp(prefix="geops-bench-live-"))

    def __enter__(self) -> Bench:
        self.workdir.mkdir(parents=True, exist_ok=True)
        if self.spec.bootstrap_servers:
            self.address = self.spec.bootstrap_servers
            self.log(f"using the broker at {self.address}")
        else:
            self.address = self.procs.start_broker(self.workdir / "broker-state")
            self.log(f"local broker on {self.address} (work dir {self.workdir})")
        return self

    def __exit__(self, *exc: object) -> None:
        for s in self.sessions:
            with contextlib.suppress(Exception):
                s.close(delete_topics=bool(self.spec.bootstrap_servers))
        self.procs.stop_all()
        if self._tmp and not self.spec.keep_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)
        self.log("everything the benchmark started is stopped")

    def session(self, label: str, workload: Workload, trigger: str | None = None,
                memory: bool = False, app: AppOptions | None = None,
                loads: bool = False) -> Session:
        """A new session of ``app`` (default: the spec's), with ``trigger`` if given; its
        monitor keeps the processes' memory (``memory``) and the partition loads (``loads``)."""
        app = app or self.spec.app
        if trigger is not None:
            app = AppOptions(**{**app.__dict__, "trigger": trigger})
        s = Session(self.procs, self.address, self.workdir, label, workload.subscriptions, app,
                    self.spec.kafka_properties, self.log,
                    monitor_interval=self.spec.monitor_interval,
                    memory=memory, loads=loads)
        self.sessions.append(s)
        return s

    def end(self, s: Session) -> None:
        s.close(delete_topics=True)
        self.sessions.remove(s)


def workload_for(spec: LiveSpec, skewed: bool, log: Log) -> Workload:
    skew = None
    if skewed:
        skew = SkewSpec(workers=spec.app.workers, hot_workers=spec.hot_workers,
                        partitions=spec.app.partitions, partitioner=spec.app.partitioner,
                        target=spec.skew)
    log(f"generating the workload: {spec.subscriptions:,} subscriptions, a pool of "
        f"{spec.pool:,} publications, seed {spec.seed}"
        + (f", skew {spec.skew} on {spec.hot_workers} of {spec.app.workers} workers"
           if skewed else ""))
    return generate_workload(seed=spec.seed, subscriptions=spec.subscriptions,
                             publications=spec.pool, skew=skew, point_share=spec.point_share,
                             relation=spec.relation)


def publisher_for(s: Session, workload: Workload) -> Publisher:
    return Publisher(s.cfg.kafka_client(), s.cfg.topic("publications"),
                     workload.publications.geoms)


# -- building blocks -------------------------------------------------------------------------

def search(spec: LiveSpec, s: Session, pub: Publisher, log: Log
           ) -> tuple[float, list[calc.Verdict]]:
    """The maximum sustainable rate: double from ``start_rate``, then bisect."""
    rs = calc.RateSearch(start=spec.start_rate, bisections=spec.bisections)
    n = 0
    while (rate := rs.next_rate()) is not None:
        n += 1
        log(f"search step {n}: offering {rate:,.0f} pub/s for {spec.step_s:.0f} s")
        offer = pub.offer(rate, spec.step_s, pub.new_base())
        s.check_alive()
        samples = s.samples_between(offer.t0_ms, offer.t1_ms + 500)
        processed = sum(b["records"] for b in s.batches_between(offer.t0_ms, offer.t1_ms))
        verdict = calc.judge_step(
            rate, spec.step_s, [((x.time_ms - offer.t0_ms) / 1000, x.lag) for x in samples],
            processed, spec.max_lag_s, spec.max_growth_s)
        if offer.achieved_rate < 0.95 * rate:
            log(f"  warning: the publisher only reached {offer.achieved_rate:,.0f} pub/s")
        rs.record(verdict)
        log(f"  step {n}: {verdict.line()} [load average {os.getloadavg()[0]:.1f}]")
        drained = s.drain()
        if drained > 1:
            log(f"  drained the backlog in {drained:.0f} s")
    if rs.best is None:
        raise BenchFailed(f"no offered rate was sustainable (down to {rs.min_rate} pub/s)")
    log(f"maximum sustainable rate: {rs.best:,.0f} pub/s")
    return rs.best, rs.history


def backlog_throughput(s: Session, pub: Publisher, records: int, log: Log) -> dict:
    """How fast the running app drains ``records`` publications written at once: the same app
    and settings as the live steps, so the maximum sustainable rate can be set against it."""
    log(f"backlog: writing {records:,} publications at once")
    offer = pub.offer(records, 1.0, pub.new_base())  # as fast as the producer goes, within ~1 s
    drained = s.drain()
    batches = s.batches_between(offer.t0_ms, offer.t1_ms + int(drained * 1000) + 1000)
    rate = calc.drain_rate(batches)
    log(f"  backlog: {offer.sent:,} written in {(offer.t1_ms - offer.t0_ms) / 1000:.1f} s, "
        f"drained in {drained:.1f} s; {rate:,.0f} publications/s over {len(batches)} batches")
    return {"records": offer.sent, "rate": rate, "batches": len(batches)}


def phase(s: Session, pub: Publisher, label: str, rate: float, seconds: float, log: Log,
          level: float | None = None,
          events: list | None = None) -> PhaseResult:
    """Offer ``rate`` for ``seconds``, drain, and read the phase's Match records."""
    log(f"{label}: offering {rate:,.0f} pub/s for {seconds:.0f} s")
    start = s.matches_end()
    base = pub.new_base()
    offer = pub.offer(rate, seconds, base, events=events)
    load = os.getloadavg()[0]
    s.check_alive()
    drained = s.drain()
    ids, ev, ts = s.read_matches(start, base, base + offer.sent)
    result = PhaseResult(label, s.app_opts.trigger, level, offer,
                         s.samples_between(offer.t0_ms, offer.t1_ms + 1000),
                         s.batches_between(offer.t0_ms, offer.t1_ms + int(drained * 1000) + 1000),
                         ids, ev, ts, drained, load=load)
    sm = result.summary()
    ms = {k: number(sm[k], unit=" ms") for k in ("p50_ms", "p95_ms", "p99_ms", "max_ms",
                                                  "batch_ms_mean")}
    log(f"  {label}: sent {offer.achieved_rate:,.0f}/s, processed {sm['processed_rate']:,.0f}/s, "
        f"{sm['matched']:,} matched publications; latency p50 {ms['p50_ms']}, p95 "
        f"{ms['p95_ms']}, p99 {ms['p99_ms']}, max {ms['max_ms']}; lag max "
        f"{number(sm['lag_max'])}; batch {ms['batch_ms_mean']} mean; load average {load:.1f}")
    return result


def find_max_rate(spec: LiveSpec, s: Session, pub: Publisher, log: Log
                  ) -> tuple[float, list[calc.Verdict]]:
    """``spec.max_rate`` if given, else the search's maximum sustainable rate."""
    if spec.max_rate is not None:
        log(f"maximum sustainable rate given: {spec.max_rate:,.0f} pub/s (no search)")
        return spec.max_rate, []
    return search(spec, s, pub, log)


# -- scenarios -------------------------------------------------------------------------------

def run_steady(spec: LiveSpec, log: Log) -> dict:
    with Bench(spec, log) as bench:
        workload = workload_for(spec, skewed=False, log=log)
        s = bench.session("steady", workload)
        s.start_app()
        pub = publisher_for(s, workload)
        s.warm_up(pub, spec.start_rate)
        backlog = backlog_throughput(s, pub, spec.backlog, log) if spec.backlog else None
        cpu0, wall0 = time.process_time(), time.monotonic()
        best, verdicts = find_max_rate(spec, s, pub, log)
        # this process is mostly the producer (records pre-encoded but for id and time)
        producer_cpu = (time.process_time() - cpu0) / max(time.monotonic() - wall0, 1e-9)
        if backlog:
            log(f"maximum sustainable rate / backlog throughput: {best / backlog['rate']:.2f}; "
                f"the producer's process used {producer_cpu:.0%} of a core during the search")
        phases = []
        for level in spec.levels:
            phases.append(phase(s, pub, f"{level:.0%} of max", nice(level * best),
                                spec.duration_s, log, level))
        for rate in spec.rates:
            phases.append(phase(s, pub, f"{rate:,.0f}/s", rate, spec.duration_s, log))
        idle = idle_cpu(s, spec.idle_s, log) if spec.idle_s else None
        pub.close()
        bench.end(s)
        for trigger in spec.trigger_sweep:
            s = bench.session(f"trigger-{trigger}", workload, trigger=trigger)
            s.start_app()
            pub = publisher_for(s, workload)
            s.warm_up(pub, spec.start_rate)
            phases.append(phase(s, pub, f"70% of max, trigger {trigger}", nice(0.7 * best),
                                spec.duration_s, log, 0.7))
            pub.close()
            bench.end(s)
    cost = batch_cost([b for p in phases for b in p.batches])
    if cost["fixed_ms"] is not None:
        log(f"cost of the batch function over {cost['batches']} batches: "
            f"{cost['fixed_ms']:,.0f} ms + {cost['us_per_record']:,.0f} µs per record "
            f"(R² {cost['r2']:.2f})")
    result = {"max_rate": best, "verdicts": verdicts, "phases": phases, "backlog": backlog,
              "producer_cpu": producer_cpu, "cost": cost, "idle": idle}
    live_report.write_steady(spec, result, log)
    return result


def idle_cpu(s: Session, seconds: float, log: Log) -> dict[str, float]:
    """Share of a core the app's processes and the broker use while no publication arrives
    for ``seconds`` (what the trigger costs when the stream is idle)."""
    s.drain()
    before, t0 = s.cpu_seconds(), time.monotonic()
    time.sleep(seconds)  # the measurement itself: CPU over a fixed idle window
    after, took = s.cpu_seconds(), time.monotonic() - t0
    share = {k: (after[k] - before[k]) / took for k in after}
    log(f"idle for {took:.0f} s: the app used {share['app']:.1%} of a core, the broker "
        f"{share['broker']:.1%}")
    return {"seconds": took, **share}


def nice(rate: float) -> float:
    return float(max(round(rate / 10) * 10, 10))


def run_rebalance(spec: LiveSpec, log: Log) -> dict:
    """A skewed stream at 70 % of the rate it sustains while skewed; the distributor starts
    a third of the way in; latency before, during and after its rebalance."""
    with Bench(spec, log) as bench:
        workload = workload_for(spec, skewed=True, log=log)
        s = bench.session("rebalance", workload)
        s.start_app()
        pub = publisher_for(s, workload)
        s.warm_up(pub, spec.start_rate)
        best, verdicts = find_max_rate(spec, s, pub, log)
        rate = nice(0.7 * best)
        at = spec.duration_s / 3

        def start_distributor() -> None:
            log(f"starting the distributor ({at:.0f} s into the phase)")
            s.start_distributor()

        result = phase(s, pub, "rebalance at 70% of max", rate, spec.duration_s, log, 0.7,
                       events=[(at, start_distributor)])
        with s.monitor.lock:
            commands = sorted(s.monitor.data.commands, key=lambda c: c["time"])
            moves = sorted(s.monitor.data.moves, key=lambda m: m["time"])
        result.marks = {"distributor": result.offer.t0_ms + int(at * 1000)}
        if commands:
            result.marks["command"] = commands[0]["time"]
            log(f"rebalance commanded at +{(commands[0]['time'] - result.offer.t0_ms) / 1000:.1f}"
                f" s: {len(commands[0]['moves'])} move(s), MLDC {commands[0]['mldc_before']:.2f}"
                f" -> {commands[0]['mldc_predicted']:.2f}")
        if moves:
            result.marks["moved"] = moves[0]["time"]
            log(f"app moved {len(moves[0]['partitions_moved'])} partition(s) at "
                f"+{(moves[0]['time'] - result.offer.t0_ms) / 1000:.1f} s in "
                f"{moves[0]['duration_ms']:.0f} ms")
        if not commands:
            log("warning: the distributor did not rebalance during the phase")
        pub.close()
        bench.end(s)
    out = {"max_rate": best, "verdicts": verdicts, "phase": result, "commands": commands,
           "moves": moves}
    live_report.write_rebalance(spec, out, log)
    return out


def run_soak(spec: LiveSpec, log: Log) -> dict:
    """70 % of the maximum sustainable rate with the distributor for ``spec.soak`` seconds;
    lag and the resident memory of every process every 10 s."""
    assert spec.soak is not None
    with Bench(spec, log) as bench:
        workload = workload_for(spec, skewed=spec.scenario == "rebalance", log=log)
        s = bench.session("soak", workload, memory=True)
        s.start_app()
        pub = publisher_for(s, workload)
        s.warm_up(pub, spec.start_rate)
        best, verdicts = find_max_rate(spec, s, pub, log)
        s.start_distributor()
        s.wait_distributor()
        rate = nice(0.7 * best)
        log(f"soak: offering {rate:,.0f} pub/s for {spec.soak:.0f} s with the distributor")
        chunk = 60.0
        offers = []
        t_end = time.monotonic() + spec.soak
        while (left := t_end - time.monotonic()) > 1:
            offers.append(pub.offer(rate, min(chunk, left), pub.new_base()))
            s.check_alive()
            with s.monitor.lock:
                mem = s.monitor.data.memory[-1] if s.monitor.data.memory else {}
            log(f"  soak +{sum(o.seconds for o in offers):.0f} s: lag "
                f"{number(s.monitor.latest_lag())}, RSS "
                + ", ".join(f"{k[:-3]} {v:,.0f} MB" for k, v in mem.items() if k.endswith("_mb")))
        drained = s.drain()
        with s.monitor.lock:
            memory = list(s.monitor.data.memory)
            t0, t1 = offers[0].t0_ms, offers[-1].t1_ms
        samples = s.samples_between(t0, t1)
        batches = s.batches_between(t0, t1 + int(drained * 1000) + 1000)
        memory = [m for m in memory if t0 <= m["time_ms"] <= t1]
        pub.close()
        bench.end(s)
    out = {"max_rate": best, "rate": rate, "verdicts": verdicts, "memory": memory,
           "samples": samples, "batches": batches, "t0_ms": t0, "t1_ms": t1,
           "sent": sum(o.sent for o in offers)}
    live_report.write_soak(spec, out, log)
    return out


def main(spec: LiveSpec, log: Log) -> None:
    log(f"command: {' '.join(spec.command) or ' '.join(sys.argv)} (pid {os.getpid()})")
    if spec.soak is not None:
        run_soak(spec, log)
    elif spec.scenario == "rebalance":
        run_rebalance(spec, log)
    elif spec.scenario == "moving":
        from bench.live.moving import run_moving  # it builds on this module's parts

        run_moving(spec, log)
    else:
        run_steady(spec, log)
