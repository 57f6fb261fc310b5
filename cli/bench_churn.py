"""`geops bench churn`: a live publication stream while subscriptions change.

Starts a broker (or uses --bootstrap-servers) and, per cell (each --strategies x --joins), one
`geops app` on fresh topics with --subscriptions loaded, as `geops bench live` does. Each level
offers --rate publications/s (event time = time of sending) for --duration while a second
producer writes subscription changes at the level's rate (--change-rates): new ids, updates of
live ids with a new geometry and another relation, and tombstones of live ids, in the
proportions of --mix; the changes stop --tail before the level ends. The levels run --rounds
times, odd rounds in reverse order, so drift favours none; the app drains between levels.

Per cell and change rate: offered and processed publications/s and their ratio to 0 changes/s
in the same run, publications per busy second of the app (and that ratio), latency p50/p99
(event time -> the Match record's Kafka timestamp), and the time from writing a change to the
start of the first batch whose BatchSummary.subscription_offsets include it (time to effect
p50/p99, in ms and in triggers), into CSVs, PNG plots and a README.md in --out. The broker,
apps and producers it starts are stopped when it ends, however it ends.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

import config
from cli import bench_live as live
from cli.common import EXIT_USAGE
from cli.errors import CommandError
from config.choices import JOINS, STRATEGIES


def register_churn(benches: argparse._SubParsersAction) -> None:
    p = live.bench_parser(benches, "churn", __doc__,
                          "throughput, latency and time-to-effect of a live stream while "
                          "subscriptions change")
    p.add_argument("--out", metavar="DIR", default="docs/results/churn",
                   help="results directory (default docs/results/churn)")
    live.add_workdir_arguments(p)
    live.add_workload_arguments(p)
    a = p.add_argument_group("app")
    a.add_argument("--strategies", default="sPIS,RIsPS", metavar="LIST",
                   help=f"comma-separated, of {','.join(STRATEGIES)} (default sPIS,RIsPS)")
    a.add_argument("--joins", default="STAL,STRL", metavar="LIST",
                   help=f"comma-separated, of {','.join(JOINS)} (default both)")
    # time to effect is counted in triggers: a fixed interval
    # time to effect is counted in triggers: a fixed interval (bench.churn.run's
    # CHURN_TRIGGER, not imported here so that --help stays quick)
    live.add_app_arguments(a, trigger="500ms")
    c = p.add_argument_group("levels")
    c.add_argument("--change-rates", default="0,100,1000,10000", metavar="LIST",
                   help="subscription changes/s of the levels (default 0,100,1000,10000; "
                        "include 0, the ratios are to it)")
    c.add_argument("--rate", type=float, default=900.0, metavar="R",
                   help="publications/s offered at every level (default 900, half the "
                        "1,800/s `geops bench live` sustained for sPIS STAL on 2 cores)")
    c.add_argument("--duration", default="60s", metavar="D", help="length of a level (60s)")
    c.add_argument("--tail", default="3s", metavar="D",
                   help="the end of each level without changes, so the last ones take "
                        "effect while publications still flow (3s)")
    c.add_argument("--warmup", default="30s", metavar="D",
                   help="before the levels, offer --rate with changes at the lowest change "
                        "rate for D, not kept (30s; 0 for none)")
    c.add_argument("--rounds", type=int, default=2, metavar="K",
                   help="times each level runs, odd rounds in reverse order (default 2)")
    c.add_argument("--mix", default="25,50,25", metavar="NEW,UPDATE,TOMBSTONE",
                   help="shares of new subscriptions, updates and tombstones (25,50,25)")
    config.add_arguments(p, ["kafka"])
    p.set_defaults(func=_churn)


def _names(text: str, allowed: Sequence[str], flag: str) -> tuple[str, ...]:
    names = tuple(x.strip() for x in text.split(",") if x.strip())
    bad = [n for n in names if n not in allowed]
    if not names or bad:
        raise CommandError(f"{flag}: expected names from {','.join(allowed)}, got {text!r}",
                           EXIT_USAGE)
    return names


def _numbers(text: str, flag: str, count: int | None = None) -> tuple[float, ...]:
    try:
        values = tuple(float(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise CommandError(f"{flag}: expected numbers, got {text!r}", EXIT_USAGE) from None
    if not values or any(v < 0 for v in values) or (count and len(values) != count):
        raise CommandError(f"{flag}: expected {count or 'some'} non-negative numbers, got "
                           f"{text!r}", EXIT_USAGE)
    return values


def build_spec(args: argparse.Namespace):
    from bench.churn.run import ChurnSpec
    from bench.harness.deployment import AppOptions

    strategies = _names(args.strategies, STRATEGIES, "--strategies")
    joins = _names(args.joins, JOINS, "--joins")
    rates = tuple(dict.fromkeys(_numbers(args.change_rates, "--change-rates")))
    if 0 not in rates:
        raise CommandError("--change-rates must include 0 (the ratios are to it)", EXIT_USAGE)
    mix = _numbers(args.mix, "--mix", 3)
    if sum(mix) <= 0:
        raise CommandError("--mix: the shares must not all be 0", EXIT_USAGE)
    if args.rate <= 0:
        raise CommandError("--rate must be positive", EXIT_USAGE)
    if args.rounds < 1:
        raise CommandError("--rounds must be at least 1", EXIT_USAGE)
    duration = live.duration(args.duration, "--duration")
    tail = live.duration(args.tail, "--tail")
    if tail >= duration:
        raise CommandError("--tail must be shorter than --duration", EXIT_USAGE)
    live.duration(args.trigger, "--trigger")
    try:
        warmup = config.parse_duration(args.warmup)
    except ValueError as exc:
        raise CommandError(f"--warmup: {exc}", EXIT_USAGE) from None
    given, kafka_props = live.kafka_settings(args)
    return ChurnSpec(
        out=Path(args.out), cells=tuple((s, j) for s in strategies for j in joins),
        change_rates=rates, rate=args.rate, duration_s=duration, tail_s=tail, warmup_s=warmup,
        rounds=args.rounds, mix=mix, subscriptions=args.subscriptions, pool=args.pool,
        seed=args.seed,
        app=AppOptions(strategies[0], joins[0], args.workers, args.partitions,
                       args.partitioner, args.trigger, args.master),
        bootstrap_servers=given, kafka_properties=kafka_props,
        workdir=Path(args.workdir) if args.workdir else None, keep_workdir=args.keep_workdir,
        command=live.command_line())


def _churn(args: argparse.Namespace) -> int:
    from bench.churn.run import main
    from bench.harness.errors import BenchFailed

    return live.run_bench("churn", main, build_spec(args), (BenchFailed,))
