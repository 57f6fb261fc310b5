"""The maximum sustainable rate of the running app: offer a rate for a step, judge the lag,
double while sustainable, then bisect (``calc.RateSearch``)."""

from __future__ import annotations

import os

from bench.harness.deployment import Session
from bench.harness.errors import BenchFailed
from bench.harness.publisher import Log, Publisher
from bench.live import calc
from bench.live.spec import LiveSpec


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


def find_max_rate(spec: LiveSpec, s: Session, pub: Publisher, log: Log
                  ) -> tuple[float, list[calc.Verdict]]:
    """``spec.max_rate`` if given, else the search's maximum sustainable rate."""
    if spec.max_rate is not None:
        log(f"maximum sustainable rate given: {spec.max_rate:,.0f} pub/s (no search)")
        return spec.max_rate, []
    return search(spec, s, pub, log)
