"""`geops bench delivery`: backlog throughput and live latency of the app with exactly-once
and with at-least-once delivery, interleaved, on one broker.

Starts a broker (or uses --bootstrap-servers). For each of --repeats repeats, each mode in turn
(the order alternates between repeats): fresh topics with --subscriptions loaded, `geops app
--delivery MODE` warmed up, then a backlog (--backlog-rate publications/s for --backlog, more
than the app takes: throughput is what its batches processed per second) and a live stream
(--rate publications/s, default 70 % of the first at-least-once backlog throughput, for
--duration: latency p50/p99 from event time to the Match record's Kafka timestamp, and to when
a read_committed reader saw the batch's output). First, unless --write-batches 0, the write
path alone: batches of Match records, loads and a summary written through the app's output
of each mode, without Spark (time per batch). Writes runs.csv, latency_percentiles.csv,
batches_raw.csv.gz and README.md to --out; the machine's load average is in every row.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import config
from cli import bench_live as live
from cli.common import EXIT_USAGE
from cli.errors import CommandError
from config import choices


def register_delivery(benches: argparse._SubParsersAction) -> None:
    p = live.bench_parser(benches, "delivery", __doc__,
                          "what exactly-once delivery costs: throughput and latency against "
                          "at-least-once")
    p.add_argument("--out", metavar="DIR", default="docs/results/delivery",
                   help="results directory (default docs/results/delivery)")
    live.add_workdir_arguments(p)
    live.add_workload_arguments(p)
    a = p.add_argument_group("app")
    a.add_argument("--strategy", choices=choices.STRATEGIES, default="sPIS")
    a.add_argument("--join", choices=choices.JOINS, default="STAL")
    live.add_app_arguments(a)
    r = live.add_backlog_live_arguments(p, repeats=3, backlog_rate=20000.0, duration="60s",
                                        baseline="at-least-once")
    r.add_argument("--write-batches", type=int, default=200, metavar="N",
                   help="first, the write path alone (no Spark): N batches of 1,000 matches "
                        "per mode and repeat (200; 0 = skip)")
    r.add_argument("--write-only", action="store_true",
                   help="measure only the write path, not the app")
    config.add_arguments(p, ["kafka"])
    p.set_defaults(func=_delivery)


def _delivery(args: argparse.Namespace) -> int:
    from bench.delivery.run import DeliverySpec, main
    from bench.harness.deployment import AppOptions
    from bench.harness.errors import BenchFailed

    if args.write_only and args.write_batches <= 0:
        raise CommandError("--write-only needs --write-batches above 0", EXIT_USAGE)
    live.check_rates(args)
    live.duration(args.trigger, "--trigger", zero=True)
    given, kafka_props = live.kafka_settings(args)
    spec = DeliverySpec(
        out=Path(args.out), repeats=args.repeats, subscriptions=args.subscriptions,
        pool=args.pool, seed=args.seed, backlog_rate=args.backlog_rate,
        backlog_s=live.duration(args.backlog, "--backlog"), rate=args.rate,
        duration_s=live.duration(args.duration, "--duration"),
        write_batches=max(args.write_batches, 0), write_only=args.write_only,
        app=AppOptions(args.strategy, args.join, args.workers, args.partitions,
                       args.partitioner, args.trigger, args.master),
        bootstrap_servers=given, kafka_properties=kafka_props,
        workdir=Path(args.workdir) if args.workdir else None, keep_workdir=args.keep_workdir,
        command=live.command_line())
    return live.run_bench("delivery", main, spec, (BenchFailed,))
