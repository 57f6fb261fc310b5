"""The pure parts of `geops bench scale`: what the app's log and metrics say about a run
(start-up phases, static size, throughput, cost per candidate pair, why it failed), the ratios
to the reference size, and the rows of its CSV files."""

from __future__ import annotations

import re
import time
from collections.abc import Mapping, Sequence
from typing import Any

from bench.harness.batches import dedupe_batches

STATIC_LINE = re.compile(
    r"static data: (?P<bytes>\d+) bytes in (?P<partitions>\d+) partitions \((?P<per_sub>[\d.]+) "
    r"bytes per subscription, the largest partition (?P<largest>\d+) bytes\), built on the "
    r"executors in (?P<build_s>[\d.]+) s")
SUBS_LINE = re.compile(r"(?P<subs>\d+) subscriptions \((?P<records>\d+) records read.*?"
                       r"\(built in (?P<router_s>[\d.]+) s\)")
ERROR_HINTS = ("OutOfMemoryError", "ERROR", "Error", "Traceback", "Killed")


def parse_app_log(text: str) -> dict[str, float | None]:
    """Static side and router figures from an app log (None where the line is missing)."""
    out: dict[str, float | None] = {"static_bytes": None, "static_partitions": None,
                                    "bytes_per_subscription": None, "largest_partition_bytes": None,
                                    "static_build_s": None, "router_build_s": None}
    m = STATIC_LINE.search(text)
    if m:
        out.update(static_bytes=int(m["bytes"]), static_partitions=int(m["partitions"]),
                   bytes_per_subscription=float(m["per_sub"]),
                   largest_partition_bytes=int(m["largest"]), static_build_s=float(m["build_s"]))
    m = SUBS_LINE.search(text)
    if m:
        out["router_build_s"] = float(m["router_s"])
    return out


_STAMP = r"^(?P<t>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) geops\.app INFO "
PHASE_LINES = {
    "router_at_s": re.compile(_STAMP + r"\d+ subscriptions \(", re.M),
    "static_at_s": re.compile(_STAMP + r"static data: ", re.M),
    "streaming_at_s": re.compile(_STAMP + r"streaming from ", re.M),
    "first_batch_at_s": re.compile(_STAMP + r"batch \d+ epoch \d+: [1-9]\d* records", re.M),
}


def _log_time(stamp: str) -> float:
    """Seconds of a log timestamp (local time, as Python's logging writes it)."""
    return time.mktime(time.strptime(stamp[:19], "%Y-%m-%d %H:%M:%S")) + int(stamp[20:]) / 1000


def phases(text: str, first_batch_s: float | None) -> dict[str, float | None]:
    """When the app's start-up steps ended, in seconds from its launch: the subscriptions are
    scanned (by the executors) and the router built, the static side is built, the query
    streams, the first batch with records is done. Anchored on the first batch
    (``first_batch_s`` from the launch, as the metrics say), so the log's clock and time zone
    do not matter."""
    out: dict[str, float | None] = dict.fromkeys(PHASE_LINES)
    stamps = {k: (m["t"] if (m := rx.search(text)) else None) for k, rx in PHASE_LINES.items()}
    anchor = stamps["first_batch_at_s"]
    if anchor is None or first_batch_s is None:
        return out
    t_anchor = _log_time(anchor)
    for k, stamp in stamps.items():
        if stamp is not None:
            out[k] = round(first_batch_s - (t_anchor - _log_time(stamp)), 1)
    return out


def failure_reason(text: str, limit: int = 300) -> str:
    """The most telling line of a failed app's log: an OutOfMemoryError first, else the last
    line naming an error."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for ln in lines:
        if "OutOfMemoryError" in ln:
            return ln[:limit]
    for ln in reversed(lines):
        if any(h in ln for h in ERROR_HINTS):
            return ln[:limit]
    return (lines[-1] if lines else "(empty log)")[:limit]


def summarise(batches: Sequence[Mapping[str, Any]], loads: Sequence[Mapping[str, Any]],
              moves: Sequence[Mapping[str, Any]], launch_ms: int) -> dict[str, Any]:
    """Time to the first batch, throughput and cost per candidate pair of one run.

    The first batch (warm-up) and the batch a move ran before are left out of the steady
    figures; throughput = records / summed batch time (busy throughput: the backlog keeps the
    app busy) and records / span of those batches."""
    done = [b for b in dedupe_batches(batches) if b["records"]]
    if not done:
        raise ValueError("no batch with records")
    first = done[0]
    moved = {m["batch_id"] for m in moves}
    steady = [b for b in done[1:] if b["batch_id"] not in moved]
    ids = {b["batch_id"] for b in steady}
    cand = {}
    proc_ns = {}
    for r in loads:
        cand[r["batch_id"]] = cand.get(r["batch_id"], 0) + r["candidates"]
        proc_ns[r["batch_id"]] = proc_ns.get(r["batch_id"], 0) + r["processing_ns"]
    records = sum(b["records"] for b in steady)
    busy_ms = sum(b["duration_ms"] for b in steady)
    candidates = sum(cand.get(i, 0) for i in ids)
    span_ms = (max(b["end_time"] for b in steady) - min(b["start_time"] for b in steady)
               if steady else 0)
    move = moves[0] if moves else None
    return {
        "first_batch_s": (first["end_time"] - launch_ms) / 1000,
        "first_batch_start_s": (first["start_time"] - launch_ms) / 1000,
        "first_batch_ms": first["duration_ms"],
        "batches": len(done), "steady_batches": len(steady),
        "records": sum(b["records"] for b in done), "steady_records": records,
        "throughput_busy": records / (busy_ms / 1000) if busy_ms else None,
        "throughput_span": records / (span_ms / 1000) if span_ms else None,
        "candidates": candidates,
        "candidates_per_record": candidates / records if records else None,
        "batch_us_per_candidate": busy_ms * 1000 / candidates if candidates else None,
        "join_us_per_candidate": (sum(proc_ns.get(i, 0) for i in ids) / 1000 / candidates
                                  if candidates else None),
        "move_batch": move["batch_id"] if move else None,
        "move_partitions": len(move["partitions_moved"]) if move else None,
        "move_bytes": move["bytes"] if move else None,
        "move_ms": move["duration_ms"] if move else None,
    }


def batch_rows(batches: Sequence[Mapping[str, Any]], loads: Sequence[Mapping[str, Any]],
               launch_ms: int, base: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One row per batch (the raw data): its summary, its candidates and join-task time."""
    cand: dict[int, int] = {}
    proc_ns: dict[int, int] = {}
    for r in loads:
        cand[r["batch_id"]] = cand.get(r["batch_id"], 0) + r["candidates"]
        proc_ns[r["batch_id"]] = proc_ns.get(r["batch_id"], 0) + r["processing_ns"]
    return [{**base, "batch_id": b["batch_id"], "epoch": b.get("epoch"),
             "start_s": (b["start_time"] - launch_ms) / 1000,
             "end_s": (b["end_time"] - launch_ms) / 1000, "records": b["records"],
             "items": b.get("items"), "duration_ms": b["duration_ms"],
             "job_ms": b.get("job_ms"), "write_ms": b.get("write_ms"),
             "candidates": cand.get(b["batch_id"], 0),
             "processing_ns": proc_ns.get(b["batch_id"], 0)}
            for b in dedupe_batches(batches)]


REL_KEYS = ("first_batch_s", "throughput_busy", "batch_us_per_candidate", "join_us_per_candidate")


def batch_size(row: Mapping[str, Any]) -> int | None:
    """Records per batch of a run (its batches were full: the backlog outlasted them)."""
    records, batches = to_float(row.get("records")), to_float(row.get("batches"))
    return round(records / batches) if records and batches else None


def relative_to_reference(rows: Sequence[dict[str, Any]], reference: int) -> list[dict[str, Any]]:
    """Each row with ``<key>_rel`` = its value / the same strategy's value at ``reference``
    subscriptions, from the reference run with the same records per batch when there is one
    (else the strategy's last ok reference run); ``reference_batch`` says which."""
    ok = [r for r in rows if r.get("status") == "ok" and int(r["subscriptions"]) == reference]
    by_size = {(r["strategy"], batch_size(r)): r for r in ok}
    last = {r["strategy"]: r for r in ok}
    out = []
    for r in rows:
        r = dict(r)
        base = by_size.get((r["strategy"], batch_size(r))) or last.get(r["strategy"])
        r["reference_batch"] = batch_size(base) if base else None
        for k in REL_KEYS:
            v, b = to_float(r.get(k)), to_float(base.get(k)) if base else None
            r[f"{k}_rel"] = round(v / b, 3) if v is not None and b else None
        out.append(r)
    return out


def to_float(v: Any) -> float | None:
    if v is None or v == "":
        return None
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def forced_assignment(partitions: int, workers: int) -> tuple[list[int], list[int]]:
    """(old, new): the initial assignment and the one with every fourth partition moved to the
    next worker (Fig. 8's forced move)."""
    from schemas.assignment import initial_assignment
    old = list(initial_assignment(partitions, workers))
    return old, [(w + 1) % workers if p % 4 == 0 else w for p, w in enumerate(old)]
