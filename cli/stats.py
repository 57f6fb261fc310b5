"""`geops stats`: what the app's metrics say, per assignment epoch, or live (`--follow`).

Per epoch: batches, publications, throughput (publications / wall time from the first batch's
start to the last batch's end), mean batch time, each worker's share of processing time and of
items, the MLDC by both load metrics, and latency from event time to match (the median of the
batches' medians, and the worst batch's p99); then the partition moves the app reported.

With --follow, one line per period (--period, default 5 s) until Ctrl-C or --until-idle:
  in/s     publications arriving: growth of the publications topic's end offsets / period
  out/s    publications the app processed: BatchSummary records of the period / period
  lag      records on the publications topic the app has not processed: the topic's end
           offsets minus the end offsets of the app's last completed batch (BatchSummary v3)
  batches  the app's batches that completed in the period
  p50/p99  latency from event time to match, of the Match records that arrived in the period
           ("~": no Match record came, taken from the batches' own figures: the median of
           their p50s and the largest of their p99s)
  MLDC LB  the period's MLDC of per-worker processing time (PartitionLoad records)
  epoch    the assignment epoch in force (of the app's latest batch)
"-" means unknown (nothing yet, or the topic's end could not be read this period). The metrics
and matches topics are followed from now; --from-beginning puts their whole history into the
first period.
"""

from __future__ import annotations

import argparse
from collections import defaultdict

import numpy as np

import config
from cli.common import positive_int, reachable, settings
from cli.errors import CommandError
from cli.stats_follow import follow
from config import parse_duration
from config.exitcodes import EXIT_USAGE
from distributor.mldc import mldc
from kafkaio.dump import by_schema


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "stats", help="summarise the app's metrics per assignment epoch, or follow them live",
        description=__doc__.split("\n", 1)[1].strip(),
        formatter_class=argparse.RawDescriptionHelpFormatter)
    config.add_arguments(parser, ["kafka", "state", "topics"])
    parser.add_argument("--app-id", metavar="ID",
                        help="app to summarise (default: the configured app id)")
    parser.add_argument("--follow", action="store_true",
                        help="watch the live service: one line per period until Ctrl-C")
    parser.add_argument("--period", type=_duration, metavar="DURATION",
                        help="with --follow: length of a period, e.g. 5s or 500ms (default 5s)")
    parser.add_argument("--until-idle", type=_duration, metavar="DURATION",
                        help="with --follow: stop once no publication, batch or match came for "
                             "this long (checked at the end of each period)")
    parser.add_argument("--periods", type=positive_int, metavar="N",
                        help="with --follow: stop after N periods")
    parser.add_argument("--from-beginning", action="store_true",
                        help="with --follow: read the metrics and matches topics from their "
                             "oldest record (default: from now)")
    parser.add_argument("--expect-publications", type=positive_int, metavar="N",
                        help="exit 1 with one line when the app's batches processed fewer "
                             "than N publications (a smoke check after a known stream)")
    parser.add_argument("--expect-rebalance", action="store_true",
                        help="exit 1 with one line when no batch ran under an assignment "
                             "epoch after the first (no rebalance reached the app)")
    parser.set_defaults(func=_stats)


def _duration(text: str) -> float:
    """argparse type: a positive duration (500ms, 5s, 2m)."""
    try:
        value = parse_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive duration, got {text!r}")
    return value


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
             f"{'time share':<18} {'item share':<18} {'MLDC LB':>7} {'MLDC DB':>7} "
             f"{'p50 ms':>7} {'p99 ms':>7}"]
    for epoch in sorted(by_epoch):
        batches = by_epoch[epoch]
        recs = sum(s["records"] for s in batches)
        span = (max(s["end_time"] for s in batches) - min(s["start_time"] for s in batches))
        rate = recs / max(span / 1000, 1e-9)
        mean_ms = sum(s["duration_ms"] for s in batches) / len(batches)
        load = loads[epoch]
        # Latency from event time to match: the median of the batches' medians, and the
        # worst batch's p99 (an upper bound of the epoch's p99); batches that matched nothing
        # have none.
        timed = [b for b in batches if b["latency_p50_ms"] is not None]
        p50 = f"{np.median([b['latency_p50_ms'] for b in timed]):,.0f}" if timed else "-"
        p99 = f"{max(b['latency_p99_ms'] for b in timed):,.0f}" if timed else "-"
        lines.append(f"{epoch:>5} {len(batches):>7} {recs:>9,} {rate:>8,.0f} {mean_ms:>9,.0f}  "
                     f"{_share(load['ns']):<18} {_share(load['items']):<18} "
                     f"{_mldc(load['ns']):>7} {_mldc(load['items']):>7} "
                     f"{p50:>7} {p99:>7}")
    for m in records.get("MoveReport", []):
        if m["app_id"] == app_id:
            lines.append(f"moved in epoch {m['epoch']}: {len(m['partitions_moved'])} partitions, "
                         f"{m['bytes'] / 1e6:.2f} MB in {m['duration_ms']:.0f} ms "
                         f"(before batch {m['batch_id']})")
    return lines


def shortfall(records: dict[str, list[dict]], app_id: str, publications: int | None = None,
              rebalance: bool = False) -> str | None:
    """What the app's metrics fall short of (one line), or None: fewer than ``publications``
    processed, or (``rebalance``) no batch under an epoch after the first one seen."""
    summaries = {s["batch_id"]: s for s in records.get("BatchSummary", [])
                 if s["app_id"] == app_id}
    done = sum(s["records"] for s in summaries.values())
    if publications is not None and done < publications:
        return (f"the app '{app_id}' processed {done:,} of the {publications:,} publications "
                f"expected")
    epochs = {s["epoch"] for s in summaries.values() if s["records"]}
    if rebalance and len(epochs) < 2:
        return (f"no rebalance reached the app '{app_id}': all its batches ran in epoch "
                f"{min(epochs) if epochs else 0}")
    return None


def _stats(args: argparse.Namespace) -> int:
    if args.follow:
        given = [flag for flag, value in (("--expect-publications", args.expect_publications),
                                          ("--expect-rebalance", args.expect_rebalance or None))
                 if value is not None]
        if given:
            raise CommandError(f"{', '.join(given)} does not apply with --follow", EXIT_USAGE)
    else:
        given = [flag for flag, value in (("--period", args.period),
                                          ("--until-idle", args.until_idle),
                                          ("--periods", args.periods),
                                          ("--from-beginning", args.from_beginning or None))
                 if value is not None]
        if given:
            raise CommandError(f"{', '.join(given)} only applies with --follow", EXIT_USAGE)
    cfg = settings(args)
    reachable(cfg)
    app_id = args.app_id or cfg.view.app.app_id
    if args.follow:
        return follow(cfg, app_id, period=args.period or 5.0, until_idle=args.until_idle,
                      periods=args.periods, from_beginning=args.from_beginning)
    records = by_schema(cfg.kafka_client(), cfg.topic("metrics"))
    for line in summarise(records, app_id):
        print(line)
    missing = shortfall(records, app_id, args.expect_publications, args.expect_rebalance)
    if missing is not None:
        raise CommandError(missing)
    return 0
