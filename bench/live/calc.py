"""Pure computations of `geops bench live`: the lag verdict, the rate search, latency windows
around a rebalance, and the growth of memory and lag over a soak.

Nothing here touches Kafka, processes or the clock, so every function has a fast unit test
(tests/bench/test_live.py).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from bench.harness.latency import latency_summary

# -- latency ---------------------------------------------------------------------------------

def windows(event_ms: np.ndarray, latency_ms: np.ndarray,
            bounds: Sequence[tuple[str, float, float]]) -> list[dict]:
    """Latency summary of the publications whose event time falls in each [start, end) ms."""
    event_ms = np.asarray(event_ms, dtype=np.float64)
    latency_ms = np.asarray(latency_ms, dtype=np.float64)
    rows = []
    for name, start, end in bounds:
        mask = (event_ms >= start) & (event_ms < end)
        rows.append({"window": name, "start_ms": int(start), "end_ms": int(end),
                     "seconds": (end - start) / 1000, **latency_summary(latency_ms[mask])})
    return rows


def rebalance_windows(start_ms: float, end_ms: float, command_ms: float | None,
                      moved_ms: float | None, settle_s: float = 5.0
                      ) -> list[tuple[str, float, float]]:
    """before [start, command), during [command, moved + settle), after [.., end).

    Without a rebalance the whole run is one "no rebalance" window.
    """
    if command_ms is None:
        return [("no rebalance", start_ms, end_ms)]
    settle_end = max(command_ms, moved_ms if moved_ms is not None else command_ms)
    settle_end = min(settle_end + settle_s * 1000, end_ms)
    command_ms = max(min(command_ms, end_ms), start_ms)
    return [("before", start_ms, command_ms), ("during", command_ms, settle_end),
            ("after", settle_end, end_ms)]


# -- the verdict -----------------------------------------------------------------------------

@dataclass(frozen=True)
class Verdict:
    """Whether an offered rate was sustained over one step, and why."""

    rate: float
    sustainable: bool
    end_lag: float | None       # records, mean over the step's last fifth
    growth: float | None        # records the lag grew over the step's second half (fitted)
    achieved: float | None      # publications/s the app processed during the step
    reason: str

    def line(self) -> str:
        def n(v: float | None) -> str:
            return "-" if v is None else f"{v:,.0f}"
        word = "sustainable" if self.sustainable else "UNSUSTAINABLE"
        return (f"{self.rate:,.0f} pub/s: {word} (lag at end {n(self.end_lag)}, growth over "
                f"2nd half {n(self.growth)}, processed {n(self.achieved)}/s) - {self.reason}")


def judge_step(rate: float, step_s: float, samples: Sequence[tuple[float, int | None]],
               processed: int | None = None, max_lag_s: float = 5.0,
               max_growth_s: float = 1.0) -> Verdict:
    """Judge one step of offering ``rate`` for ``step_s`` seconds.

    ``samples`` are (seconds since the step began, lag in records or None when unknown).
    Sustainable when the lag at the end (mean over the last fifth of the step) is at most
    ``max_lag_s`` seconds of input and the lag, fitted by least squares over the second half,
    grew by at most ``max_growth_s`` seconds of input. A lag that is never known (the app
    reported no batch) is unsustainable.
    """
    achieved = None if processed is None else processed / step_s
    known = [(t, float(v)) for t, v in samples if v is not None and 0 <= t <= step_s + 1e-9]
    if not known:
        return Verdict(rate, False, None, None, achieved, "no batch reported: lag unknown")
    tail = [v for t, v in known if t >= 0.8 * step_s] or [known[-1][1]]
    end_lag = float(np.mean(tail))
    half = [(t, v) for t, v in known if t >= step_s / 2]
    growth = 0.0
    if len(half) >= 2 and len({t for t, _ in half}) >= 2:
        ts, vs = np.array(half).T
        slope = float(np.polyfit(ts, vs, 1)[0])
        growth = slope * (step_s / 2)
    reasons = []
    if end_lag > max_lag_s * rate:
        reasons.append(f"lag {end_lag / rate:.1f} s of input > {max_lag_s:g} s")
    if growth > max_growth_s * rate:
        reasons.append(f"lag grew {growth / rate:.1f} s of input > {max_growth_s:g} s")
    ok = not reasons
    if ok:
        reasons.append(f"lag {end_lag / rate:.1f} s of input, growth {growth / rate:+.1f} s")
    return Verdict(rate, ok, end_lag, growth, achieved, "; ".join(reasons))


# -- the search ------------------------------------------------------------------------------

def drain_rate(batches: Sequence[dict]) -> float:
    """Publications per second over the batches that processed records: their records over
    the time from the first one's start to the last one's end (0 without any)."""
    busy = [b for b in batches if b["records"]]
    if not busy:
        return 0.0
    span_ms = max(b["end_time"] for b in busy) - min(b["start_time"] for b in busy)
    return sum(b["records"] for b in busy) / max(span_ms / 1000, 1e-3)


def nice_rate(rate: float) -> float:
    """Rates rounded to two significant figures at most (1,234 -> 1,200; 75 -> 75)."""
    if rate <= 0:
        return 0.0
    digits = max(math.floor(math.log10(rate)) - 1, 0)
    return float(round(rate / 10**digits) * 10**digits)


@dataclass
class RateSearch:
    """Start low, double while sustainable, then bisect ``bisections`` times.

    If even the first rate is unsustainable, halve until one is (down to ``min_rate``).
    ``next_rate()`` gives the rate to try next or None when done; ``record(verdict)`` feeds the
    result back; ``best`` is the highest sustainable rate found (None: none).
    """

    start: float = 500.0
    bisections: int = 3
    max_rate: float = 1e6
    min_rate: float = 25.0
    lo: float | None = None           # highest sustainable so far
    hi: float | None = None           # lowest unsustainable so far
    bisected: int = 0
    history: list[Verdict] = field(default_factory=list)

    def next_rate(self) -> float | None:
        if not self.history:
            return self.start
        if self.hi is None:  # still doubling
            nxt = nice_rate(self.lo * 2)
            return nxt if nxt <= self.max_rate else None
        if self.lo is None:  # still halving
            nxt = nice_rate(self.hi / 2)
            return nxt if nxt >= self.min_rate else None
        if self.bisected >= self.bisections:
            return None
        mid = nice_rate((self.lo + self.hi) / 2)
        if not self.lo < mid < self.hi:
            return None
        return mid

    def record(self, verdict: Verdict) -> None:
        self.history.append(verdict)
        bisecting = self.lo is not None and self.hi is not None
        if verdict.sustainable:
            self.lo = verdict.rate if self.lo is None else max(self.lo, verdict.rate)
        else:
            self.hi = verdict.rate if self.hi is None else min(self.hi, verdict.rate)
        if bisecting:
            self.bisected += 1

    @property
    def best(self) -> float | None:
        return self.lo


# -- growth over a soak ----------------------------------------------------------------------

def slope_per_minute(seconds: Sequence[float], values: Sequence[float]) -> float | None:
    """The least-squares slope of ``values`` over time, per minute (None with < 2 points)."""
    if len(values) < 2:
        return None
    return float(np.polyfit(np.asarray(seconds, float) / 60, np.asarray(values, float), 1)[0])


def growth(values: Sequence[float], share: float = 0.2) -> dict[str, float | None]:
    """Mean of the first and of the last ``share`` of the samples, and the relative growth."""
    a = np.asarray([v for v in values if v is not None and not math.isnan(v)], np.float64)
    if a.size == 0:
        return {"first": None, "last": None, "growth": None}
    k = max(1, round(a.size * share))
    first, last = float(a[:k].mean()), float(a[-k:].mean())
    return {"first": first, "last": last,
            "growth": (last - first) / first if first else None}
