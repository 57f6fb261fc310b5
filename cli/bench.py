"""`geops bench`: benchmarks, one sub-subcommand each (``geops bench kernel``, ...).

Each entry of ``BENCHES`` registers one benchmark on the ``bench`` subparsers; add a new
benchmark (say ``paper``) by appending its register function.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

from bench.kernel.run import format_table, run_kernel_bench
from cli.bench_chaos import register_chaos
from cli.bench_churn import register_churn
from cli.bench_delivery import register_delivery
from cli.bench_events import register_events
from cli.bench_live import register_live
from cli.bench_load import register_load
from cli.bench_paper import register_paper
from cli.bench_scale import register_scale
from cli.common import positive_int
from cli.errors import CommandError
from cli.progress import elapsed_log
from cli.workload_args import add_mix_arguments, point_share_from, relation_from
from config.exitcodes import EXIT_USAGE
from geops.partitioning import PARTITIONERS
from geops.strategies import STRATEGIES


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bench",
                       help="run a benchmark (kernel, decode, paper, live, churn, load, "
                            "scale, delivery, chaos)",
                       description="Benchmarks of the matching core and the product.")
    benches = p.add_subparsers(dest="bench", metavar="BENCH")
    benches.required = True
    for add in BENCHES:
        add(benches)


def register_kernel(benches: argparse._SubParsersAction) -> None:
    p = benches.add_parser(
        "kernel", help="each strategy vs the vectorised single-core matcher",
        description="On a generated GeoPS workload, time on one core the reference "
                    "(shapely STRtree bulk query + the exact vectorised kernel), each strategy "
                    "through the app's route/match/merge interface, and plain shapely tree "
                    "predicates; check every result equals the reference's; print the table "
                    "with ratio = reference time / strategy time.")
    p.add_argument("--subscriptions", type=positive_int, default=10_000, metavar="N",
                   help="subscriptions (default 10,000)")
    p.add_argument("--publications", type=positive_int, default=20_000, metavar="M",
                   help="publications (default 20,000)")
    p.add_argument("--seed", type=int, default=0, help="workload seed (default 0)")
    p.add_argument("--partitions", type=positive_int, default=16, metavar="P",
                   help="static partitions (default 16)")
    p.add_argument("--partitioner", choices=PARTITIONERS, default="kdbtree",
                   help="spatial partitioner (default kdbtree)")
    p.add_argument("--strategies", default=",".join(STRATEGIES), metavar="LIST",
                   help=f"comma-separated subset of {','.join(STRATEGIES)} (default all)")
    p.add_argument("--repeat", type=positive_int, default=1, metavar="R",
                   help="time each matcher R times, keep the best (default 1)")
    p.add_argument("--no-plain", action="store_true",
                   help="skip the plain shapely predicate row")
    add_mix_arguments(p)
    p.set_defaults(func=_kernel)


def _kernel(args: argparse.Namespace) -> int:
    chosen = [s.strip() for s in args.strategies.split(",") if s.strip()]
    unknown = sorted(set(chosen) - set(STRATEGIES))
    if unknown or not chosen:
        raise CommandError(f"--strategies: unknown {', '.join(unknown) or '(none given)'}; "
                           f"expected names from {', '.join(STRATEGIES)}", EXIT_USAGE)
    log = elapsed_log("geops bench kernel")

    report = run_kernel_bench(subscriptions=args.subscriptions,
                              publications=args.publications, seed=args.seed,
                              partitions=args.partitions, partitioner=args.partitioner,
                              strategies=chosen, repeat=args.repeat,
                              plain=not args.no_plain,
                              point_share=point_share_from(args),
                              relation=relation_from(args), log=log)
    print(format_table(report))
    return 0


def register_decode(benches: argparse._SubParsersAction) -> None:
    p = benches.add_parser(
        "decode", help="decoding publications: the codec per record vs one NumPy pass",
        description="On the publications of a generated GeoPS workload, time the codec's "
                    "per-record decode and the read tasks' one-pass decoder on one core, check "
                    "they give the same records, and print the table with ratio = per-record "
                    "time / this decoder's time.")
    p.add_argument("--publications", type=positive_int, default=20_000, metavar="M",
                   help="publications (default 20,000, about one read task's share of a "
                        "benchmark batch)")
    p.add_argument("--seed", type=int, default=0, help="workload seed (default 0)")
    p.add_argument("--repeat", type=positive_int, default=5, metavar="R",
                   help="time each decoder R times, keep the best (default 5)")
    p.set_defaults(func=_decode)


def _decode(args: argparse.Namespace) -> int:
    from bench.decode.run import format_table, run_decode_bench

    log = elapsed_log("geops bench decode")

    timings = run_decode_bench(publications=args.publications, seed=args.seed,
                               repeat=args.repeat, log=log)
    print(format_table(timings))
    return 0


# One register function per `geops bench` subcommand.
BENCHES: tuple[Callable[[argparse._SubParsersAction], None], ...] = (
    register_kernel, register_decode, register_paper, register_live, register_churn,
    register_load, register_scale, register_delivery, register_chaos, register_events)
