"""What the app's BatchSummary records say of its work: one summary per batch, the cost of a
batch (fixed plus per record, fitted by least squares) and the throughput over a window of
time."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

# A batch of at most this many records is a small (live) one: its fit gives the fixed cost that
# a person watching a geofence waits for, unmixed with the backlog's large batches.
SMALL_BATCH = 5_000


def dedupe_batches(summaries: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """One summary per batch id, in batch order (a replayed batch reports again; the last one
    counts)."""
    return sorted({s["batch_id"]: s for s in summaries}.values(), key=lambda s: s["batch_id"])


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


def window_throughput(batches: Iterable[Mapping], t0_ms: float, t1_ms: float) -> dict:
    """Over the batches that ended in [t0, t1]: publications processed, processed per second
    of the window, the seconds the app spent in batches (busy) and their share of the window,
    and publications per busy second (what the app would process if it were never idle, an
    estimate of its capacity under this load)."""
    bs = [b for b in batches if t0_ms <= b["end_time"] <= t1_ms]
    records = int(sum(b["records"] for b in bs))
    busy_ms = float(sum(b["duration_ms"] for b in bs))
    window_s = max((t1_ms - t0_ms) / 1000, 1e-9)
    return {"batches": len(bs), "records": records, "processed_rate": records / window_s,
            "busy_s": busy_ms / 1000, "busy_share": busy_ms / 1000 / window_s,
            "per_busy_s": records / (busy_ms / 1000) if busy_ms > 0 else None,
            "batch_ms_mean": busy_ms / len(bs) if bs else None}
