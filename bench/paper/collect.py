"""What a run measured, read back from its topics and turned into CSV rows.

- throughput: publications / (end of the last batch - start of the first batch with records);
- latency: publication event time (when it was produced) to match time, exact per Match
  record (mean, p50, p99), plus GeoPS's processing delay (sum of batch durations / records);
- skew seen by the app: the hot worker's share of items (DB view) and of processing time
  (LB view) under the initial assignment (epoch 0);
- the distributor's statuses (MLDC per period), commands, and the app's move reports.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import config
from bench.harness.batches import dedupe_batches
from bench.paper.plan import RunSpec
from kafkaio.dump import by_schema


def read_run(cfg: config.Config) -> dict[str, list[dict[str, Any]]]:
    """Every record of the run's metrics, matches, status and control topics, by schema."""
    conf = cfg.kafka_client()
    out: dict[str, list[dict[str, Any]]] = {}
    for logical in ("metrics", "matches", "status", "control"):
        for name, records in by_schema(conf, cfg.topic(logical)).items():
            out.setdefault(name, []).extend(records)
    return out


def run_rows(spec: RunSpec, data: dict[str, list[dict]], wall_s: float) -> dict[str, list[dict]]:
    """The rows this run contributes to runs.csv, batches.csv, loads.csv, status.csv and
    moves.csv."""
    rid = spec.run_id
    batches = [s for s in dedupe_batches(data.get("BatchSummary", [])) if s["records"]]
    if not batches:
        raise ValueError(f"{rid}: the app reported no batch with records")
    records = sum(s["records"] for s in batches)
    first, last = min(s["start_time"] for s in batches), max(s["end_time"] for s in batches)
    matches = data.get("Match", [])
    latency = np.array([m["match_time"] - m["event_time"] for m in matches], np.float64)
    loads = data.get("PartitionLoad", [])
    epoch0 = [r for r in loads if r["epoch"] == 0]
    hot = [r for r in epoch0 if r["worker"] < spec.hot_workers]
    items0 = sum(r["items"] for r in epoch0) or 1
    ns0 = sum(r["processing_ns"] for r in epoch0) or 1
    statuses = sorted(data.get("DistributorStatus", []), key=lambda s: s["time"])
    commands = data.get("RebalanceCommand", [])
    base = {"run_id": rid, "pipeline": spec.pipeline, "mode": spec.mode, "skew": spec.skew,
            "repeat": spec.repeat}
    run = {
        **base, "join": spec.join, "balancing": spec.balancing,
        "subscriptions": spec.sizes.subscriptions, "publications": spec.sizes.publications,
        "partitions": batches[0]["partitions"], "workers": batches[0]["workers"],
        "records": records, "batches": len(batches), "first_start_ms": first,
        "last_end_ms": last, "throughput": records / max((last - first) / 1000, 1e-9),
        "latency_mean_ms": float(latency.mean()) if len(latency) else None,
        "latency_p50_ms": float(np.percentile(latency, 50)) if len(latency) else None,
        "latency_p99_ms": float(np.percentile(latency, 99)) if len(latency) else None,
        "delay_ms_per_record": sum(s["duration_ms"] for s in batches) / records,
        "skew_items": sum(r["items"] for r in hot) / items0,
        "skew_load": sum(r["processing_ns"] for r in hot) / ns0,
        "rebalances": len(commands), "matched": len(matches), "wall_s": wall_s,
    }
    return {
        "runs": [run],
        "batches": [{**base, "batch_id": s["batch_id"], "epoch": s["epoch"],
                     "start_ms": s["start_time"], "end_ms": s["end_time"],
                     "records": s["records"], "items": s["items"],
                     "duration_ms": s["duration_ms"], "join_stage_ms": s["join_stage_ms"],
                     "job_ms": s["job_ms"], "write_ms": s["write_ms"],
                     "latency_mean_ms": s["latency_mean_ms"],
                     "latency_p99_ms": s["latency_p99_ms"]} for s in batches],
        "loads": [{**base, "batch_id": r["batch_id"], "epoch": r["epoch"],
                   "partition": r["partition"], "worker": r["worker"], "items": r["items"],
                   "processing_ns": r["processing_ns"], "index_builds": r["index_builds"],
                   "static_bytes": r["static_bytes"], "build_ns": r["build_ns"]}
                  for r in loads],
        "status": [{**base, "period": s["period"], "time_ms": s["time"], "epoch": s["epoch"],
                    "mldc": s["mldc"], "threshold": s["threshold"], "decision": s["decision"]}
                   for s in statuses],
        "moves": [{**base, "subscriptions": spec.sizes.subscriptions, "epoch": m["epoch"],
                   "batch_id": m["batch_id"], "partitions_moved": len(m["partitions_moved"]),
                   "bytes": m["bytes"], "duration_ms": m["duration_ms"]}
                  for m in data.get("MoveReport", [])],
    }
