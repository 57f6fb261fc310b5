"""`geops bench events`: what detecting geofence events costs: throughput and latency of the
app on positions of moving objects, against the same stream without object ids, interleaved.

Starts a broker (or uses --bootstrap-servers). A moving-object workload (--objects objects,
--subscriptions subscriptions, a fifth of them fences, a pool of --pool positions). For each of
--repeats repeats, each mode in turn (the order alternates between repeats): fresh topics,
`geops app` warmed up, then a backlog (--backlog-rate publications/s for --backlog, more than
the app takes: the matching throughput, and for positions the events' throughput to the events
query's last batch) and a live stream (--rate publications/s, default 70 % of the first
anonymous backlog throughput, for --duration: Match and event latency). Also the state's bytes
per object, from the workload's positions without Spark. Writes runs.csv, state.json and
README.md to --out.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import config
from cli import bench_live as live
from cli.common import EXIT_USAGE, positive_int
from cli.errors import CommandError
from config import choices


def register_events(benches: argparse._SubParsersAction) -> None:
    p = live.bench_parser(benches, "events", __doc__,
                          "what detecting geofence events costs: throughput and latency "
                          "against the same stream without objects")
    p.add_argument("--out", metavar="DIR", default="docs/results/events",
                   help="results directory (default docs/results/events)")
    live.add_workdir_arguments(p)
    w = p.add_argument_group("workload")
    w.add_argument("--objects", type=positive_int, default=100_000, metavar="N",
                   help="moving objects (default 100,000)")
    w.add_argument("--subscriptions", type=positive_int, default=50_000, metavar="N",
                   help="subscriptions, a fifth of them fences (default 50,000: 10,000 fences)")
    w.add_argument("--pool", type=positive_int, default=200_000, metavar="N",
                   help="positions generated, cycled by the stream (default 200,000)")
    w.add_argument("--seed", type=int, default=5, help="(default 5)")
    a = p.add_argument_group("app")
    a.add_argument("--strategy", choices=choices.STRATEGIES, default="sPIS")
    a.add_argument("--join", choices=choices.JOINS, default="STAL")
    live.add_app_arguments(a)
    a.add_argument("--mode", choices=choices.APP_MODES,
                   help="the app's --mode (default: its configured default, micro-batch)")
    live.add_backlog_live_arguments(p, repeats=2, backlog_rate=30000.0, duration="30s",
                                    baseline="anonymous")
    config.add_arguments(p, ["kafka"])
    p.set_defaults(func=_events)


def _events(args: argparse.Namespace) -> int:
    from bench.events.run import EventsSpec, main
    from bench.harness.deployment import AppOptions
    from bench.harness.errors import BenchFailed

    live.check_rates(args)
    if args.objects > args.pool:
        raise CommandError(f"--objects ({args.objects:,}) must not exceed --pool "
                           f"({args.pool:,}): every object needs a position", EXIT_USAGE)
    live.duration(args.trigger, "--trigger", zero=True)
    given, kafka_props = live.kafka_settings(args)
    spec = EventsSpec(
        out=Path(args.out), repeats=args.repeats, objects=args.objects,
        subscriptions=args.subscriptions, pool=args.pool, seed=args.seed,
        backlog_rate=args.backlog_rate, backlog_s=live.duration(args.backlog, "--backlog"),
        rate=args.rate, duration_s=live.duration(args.duration, "--duration"),
        app=AppOptions(args.strategy, args.join, args.workers, args.partitions,
                       args.partitioner, args.trigger, args.master, mode=args.mode),
        bootstrap_servers=given, kafka_properties=kafka_props,
        workdir=Path(args.workdir) if args.workdir else None, keep_workdir=args.keep_workdir,
        command=live.command_line())
    return live.run_bench("events", main, spec, (BenchFailed,))
