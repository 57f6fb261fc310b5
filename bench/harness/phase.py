"""A phase of a benchmark of the running app: a rate offered for some seconds, the app drained,
the phase's Match records read back; its latency, batches and lag, and their rows for the CSV
files."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np

from bench.harness.deployment import Session
from bench.harness.latency import latency_summary, per_second
from bench.harness.publisher import Log, Offer, Publisher
from bench.harness.tables import number
from geops.workload import Workload


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


def publisher_for(s: Session, workload: Workload) -> Publisher:
    """A publisher of the workload's publications to the publications topic of ``s``'s app."""
    return Publisher(s.cfg.kafka_client(), s.cfg.topic("publications"),
                     workload.publications.geoms)


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


def nice(rate: float) -> float:
    """A rate to offer, rounded to tens (10 at least)."""
    return float(max(round(rate / 10) * 10, 10))


def timeline_rows(p: PhaseResult) -> list[dict]:
    """Per second of a phase: offered, processed (each batch's records spread over its
    duration), lag (last sample in the second), latency p50/p99 (by event time)."""
    t0 = p.offer.t0_ms
    seconds = int(np.ceil(p.offer.seconds))
    processed = np.zeros(seconds, float)
    for b in p.batches:
        if not b["records"]:
            continue
        a, z = (b["start_time"] - t0) / 1000, (b["end_time"] - t0) / 1000
        z = max(z, a + 1e-3)
        for s in range(max(int(a), 0), min(int(np.ceil(z)), seconds)):
            overlap = min(z, s + 1) - max(a, s)
            if overlap > 0:
                processed[s] += b["records"] * overlap / (z - a)
    lag: list[int | None] = [None] * seconds
    for x in p.samples:
        s = int((x.time_ms - t0) // 1000)
        if 0 <= s < seconds:
            lag[s] = x.lag
    lat = per_second(p.event_ms, p.latency, t0, seconds)
    return [{"phase": p.label, "second": s, "offered": int(p.offer.per_sec[s])
             if s < len(p.offer.per_sec) else 0, "processed": round(float(processed[s]), 1),
             "lag": lag[s], "p50_ms": lat[s]["p50"], "p99_ms": lat[s]["p99"]}
            for s in range(seconds)]


def batch_rows(p: PhaseResult) -> list[dict]:
    """A phase's BatchSummary records, one row each."""
    return [{"phase": p.label, "batch_id": b["batch_id"], "epoch": b["epoch"],
             "start_ms": b["start_time"], "end_ms": b["end_time"], "records": b["records"],
             "duration_ms": b["duration_ms"], "join_stage_ms": b.get("join_stage_ms"),
             "job_ms": b.get("job_ms"), "write_ms": b.get("write_ms"),
             "latency_p50_ms": b.get("latency_p50_ms"), "latency_p99_ms": b.get("latency_p99_ms")}
            for b in p.batches]
