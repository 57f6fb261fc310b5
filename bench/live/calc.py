"""Pure computations of `geops bench live`: percentiles, the lag verdict, the rate search,
latency windows, memory growth, the process tree and a fast Publication encoder.

Nothing here touches Kafka, processes or the clock, so every function has a fast unit test
(tests/bench/test_live.py).
"""

from __future__ import annotations

import contextlib
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

PERCENTILES = (50, 95, 99)


# -- latency ---------------------------------------------------------------------------------

def latency_summary(latencies_ms: Sequence[float] | np.ndarray) -> dict[str, float | None]:
    """{count, p50, p95, p99, max, mean} of latencies in ms (None when there are none)."""
    a = np.asarray(latencies_ms, dtype=np.float64)
    if a.size == 0:
        return {"count": 0, "p50": None, "p95": None, "p99": None, "max": None, "mean": None}
    p50, p95, p99 = np.percentile(a, PERCENTILES)
    return {"count": int(a.size), "p50": float(p50), "p95": float(p95), "p99": float(p99),
            "max": float(a.max()), "mean": float(a.mean())}


# -- the cost of a batch ----------------------------------------------------------------------

# A batch of at most this many records is a small (live) one: its fit gives the fixed cost that
# a person watching a geofence waits for, unmixed with the backlog's large batches.
SMALL_BATCH = 5_000


def fit(records: Sequence[float], ms: Sequence[float]) -> tuple[float, float, float]:
    """Least squares ms = fixed + per_record × records: (fixed ms, per-record ms, R²)."""
    x, y = np.asarray(records, float), np.asarray(ms, float)
    a = np.column_stack([np.ones_like(x), x])
    (fixed, slope), *_ = np.linalg.lstsq(a, y, rcond=None)
    ss = float(((y - y.mean()) ** 2).sum())
    r2 = 1 - float(((y - a @ (fixed, slope)) ** 2).sum()) / ss if ss > 0 else float("nan")
    return float(fixed), float(slope), r2


def batch_cost(batches: Sequence[Mapping]) -> dict[str, float | int | None]:
    """Fixed and per-record cost of the batch function (``BatchSummary.duration_ms`` against
    its records) over the batches with records, and the median of the small ones (at most
    ``SMALL_BATCH`` records). The line is None unless at least three batches whose sizes span
    a factor of 4 or more fix it: over a narrow range its intercept means nothing."""
    rows = [(float(b["records"]), float(b["duration_ms"])) for b in batches if b["records"]]
    small = [r for r in rows if r[0] <= SMALL_BATCH]
    sizes = [x for x, _ in rows]
    line = (fit(sizes, [y for _, y in rows])
            if len(rows) >= 3 and max(sizes) >= 4 * min(sizes) else None)
    return {"batches": len(rows), "small_batches": len(small),
            "fixed_ms": line[0] if line else None,
            "us_per_record": line[1] * 1000 if line else None,
            "r2": line[2] if line else None,
            "small_median_ms": float(np.median([y for _, y in small])) if small else None,
            "small_median_records": float(np.median([x for x, _ in small])) if small else None}


def per_second(times_ms: np.ndarray, values: np.ndarray, t0_ms: int, seconds: int
               ) -> list[dict[str, float | None]]:
    """Latency summary per whole second since ``t0_ms`` (by ``times_ms``, e.g. event time)."""
    times_ms = np.asarray(times_ms, dtype=np.int64)
    values = np.asarray(values, dtype=np.float64)
    sec = (times_ms - t0_ms) // 1000
    out = []
    for s in range(seconds):
        out.append(latency_summary(values[sec == s]))
    return out


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


# -- lag -------------------------------------------------------------------------------------

def lag(topic_end: Mapping[int, int], batch_end: Mapping[str | int, int]) -> int:
    """Records of the topic the app has not processed: end offsets minus the end offsets of
    its last batch (BatchSummary.source_end_offsets; keys are partition numbers as strings)."""
    done = {int(p): int(o) for p, o in batch_end.items()}
    return sum(max(end - done.get(int(p), 0), 0) for p, end in topic_end.items())


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


# -- memory ----------------------------------------------------------------------------------

def tree_bytes(root: Path) -> int:
    """Bytes on disk of the files below ``root``: allocated blocks, not the apparent size
    (Kafka preallocates its index files sparsely at 10 MB each); files that vanish meanwhile
    count nothing."""
    total = 0
    for path in root.rglob("*"):
        with contextlib.suppress(OSError):
            if path.is_file():
                total += path.stat().st_blocks * 512
    return total


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


_RSS = re.compile(r"^VmRSS:\s+(\d+)\s+kB", re.MULTILINE)


def rss_kb(status_text: str) -> int:
    """VmRSS of a /proc/<pid>/status text in kB (0 for a zombie or kernel thread)."""
    m = _RSS.search(status_text)
    return int(m.group(1)) if m else 0


def parse_stat(text: str) -> tuple[int, int]:
    """(pid, ppid) of a /proc/<pid>/stat line (the command may contain spaces and ')')."""
    pid = int(text.split(" ", 1)[0])
    rest = text.rsplit(")", 1)[1].split()
    return pid, int(rest[1])


def cpu_ticks(text: str) -> int:
    """CPU time of a /proc/<pid>/stat line in clock ticks: user + system, its own and that of
    its children it has waited for (utime, stime, cutime, cstime)."""
    rest = text.rsplit(")", 1)[1].split()
    return sum(int(x) for x in rest[11:15])


def descendants(root: int, parents: Mapping[int, int]) -> list[int]:
    """``root`` and every process below it, given {pid: ppid}."""
    children: dict[int, list[int]] = {}
    for pid, ppid in parents.items():
        children.setdefault(ppid, []).append(pid)
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(sorted(children.get(pid, ())))
    return out


def role(cmdline: str, default: str) -> str:
    """What a process of the app's tree is, from its command line."""
    if "java" in cmdline.split(" ", 1)[0] or " org.apache.spark" in cmdline:
        return "app-jvm"
    if "pyspark.daemon" in cmdline or "pyspark/daemon" in cmdline or "pyspark.worker" in cmdline:
        return "app-python-workers"
    return default


# -- encoding --------------------------------------------------------------------------------

def zigzag_varint(n: int) -> bytes:
    """Avro's encoding of a long."""
    z = (n << 1) ^ (n >> 63)
    out = bytearray()
    while z & ~0x7F:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


def encoded_geometry(wkb: bytes) -> bytes:
    """Avro bytes field: length then data."""
    return zigzag_varint(len(wkb)) + wkb


def publication_bytes(header: bytes, pid: int, geometry_field: bytes, event_ms: int) -> bytes:
    """A single-object-encoded Publication, as ``codec().encode("Publication", ...)`` makes
    it, from the schema header and the pre-encoded geometry field; no object (a null
    ``object_id``: the union's first branch)."""
    return header + zigzag_varint(pid) + geometry_field + zigzag_varint(event_ms) + b"\x00"


def match_event_time(value: bytes, header_len: int = 10) -> int:
    """The event_time of a single-object-encoded Match record without decoding all of it:
    publication_id (long), subscription_ids (array of long blocks), event_time (long)."""
    pos = header_len

    def read_long() -> int:
        nonlocal pos
        shift = z = 0
        while True:
            b = value[pos]
            pos += 1
            z |= (b & 0x7F) << shift
            if not b & 0x80:
                break
            shift += 7
        return (z >> 1) ^ -(z & 1)

    read_long()  # publication_id
    while True:
        count = read_long()
        if count == 0:
            break
        if count < 0:  # a block with its byte size: skip it
            size = read_long()
            pos += size
            continue
        for _ in range(count):
            read_long()
    return read_long()
