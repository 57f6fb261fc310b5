"""`geops stats`: what the app's metrics say, per assignment epoch.

Per epoch: batches, publications, throughput (publications / wall time from the first batch's
start to the last batch's end), mean batch time, each worker's share of processing time and of
items, and the MLDC by both load metrics; then the partition moves the app reported.
"""

from __future__ import annotations

import argparse
from collections import defaultdict

import numpy as np

import config
from cli.common import reachable, settings
from distributor.mldc import mldc
from kafkaio.dump import by_schema


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "stats", help="summarise the app's metrics per assignment epoch",
        description=__doc__)
    config.add_arguments(parser, ["kafka", "state", "topics"])
    parser.add_argument("--app-id", metavar="ID",
                        help="app to summarise (default: the configured app id)")
    parser.set_defaults(func=_stats)


def _share(values: np.ndarray) -> str:
    total = values.sum()
    if not total:
        return "-"
    return " / ".join(f"{100 * v / total:.0f}%" for v in values)


def _mldc(values: np.ndarray) -> str:
    value = mldc(values.tolist())
    return "-" if value is None else f"{value:.2f}"


def summarise(records: dict[str, list[dict]], app_id: str) -> list[str]:
    """The lines `geops stats` prints for one app's metrics records."""
    summaries = {s["batch_id"]: s for s in records.get("BatchSummary", [])
                 if s["app_id"] == app_id and s["records"]}
    if not summaries:
        return [f"no batches with records from app '{app_id}' on the metrics topic"]
    workers = max(s["workers"] for s in summaries.values())
    loads: dict[int, dict[str, np.ndarray]] = defaultdict(
        lambda: {"ns": np.zeros(workers), "items": np.zeros(workers)})
    for r in records.get("PartitionLoad", []):
        if r["app_id"] == app_id and r["batch_id"] in summaries and r["worker"] < workers:
            loads[r["epoch"]]["ns"][r["worker"]] += r["processing_ns"]
            loads[r["epoch"]]["items"][r["worker"]] += r["items"]
    by_epoch: dict[int, list[dict]] = defaultdict(list)
    for s in summaries.values():
        by_epoch[s["epoch"]].append(s)
    total = sum(s["records"] for s in summaries.values())
    dead = sum(s["dead_letters"] for s in summaries.values())
    lines = [f"app {app_id}: {len(summaries)} batches, {total:,} publications, "
             f"{dead:,} dead letters, {workers} workers",
             f"{'epoch':>5} {'batches':>7} {'records':>9} {'pub/s':>8} {'batch ms':>9}  "
             f"{'time share':<18} {'item share':<18} {'MLDC LB':>7} {'MLDC DB':>7}"]
    for epoch in sorted(by_epoch):
        batches = by_epoch[epoch]
        recs = sum(s["records"] for s in batches)
        span = (max(s["end_time"] for s in batches) - min(s["start_time"] for s in batches))
        rate = recs / max(span / 1000, 1e-9)
        mean_ms = sum(s["duration_ms"] for s in batches) / len(batches)
        load = loads[epoch]
        lines.append(f"{epoch:>5} {len(batches):>7} {recs:>9,} {rate:>8,.0f} {mean_ms:>9,.0f}  "
                     f"{_share(load['ns']):<18} {_share(load['items']):<18} "
                     f"{_mldc(load['ns']):>7} {_mldc(load['items']):>7}")
    for m in records.get("MoveReport", []):
        if m["app_id"] == app_id:
            lines.append(f"moved in epoch {m['epoch']}: {len(m['partitions_moved'])} partitions, "
                         f"{m['bytes'] / 1e6:.2f} MB in {m['duration_ms']:.0f} ms "
                         f"(before batch {m['batch_id']})")
    return lines


def _stats(args: argparse.Namespace) -> int:
    cfg = settings(args)
    reachable(cfg)
    app_id = args.app_id or cfg["app.app_id"]
    for line in summarise(by_schema(cfg.kafka_client(), cfg.topic("metrics")), app_id):
        print(line)
    return 0
