"""`geops bench load`: reading and encoding subscriptions for `geops subscribe`, before and now."""

from __future__ import annotations

import argparse

from cli.common import positive_int
from cli.progress import elapsed_log


def register_load(benches: argparse._SubParsersAction) -> None:
    p = benches.add_parser(
        "load", help="geops subscribe's reading and encoding: before vs now",
        description="On the subscriptions of a generated GeoPS workload (GeoJSON and an Avro "
                    "container file, as geops generate writes them), time each stage of geops "
                    "subscribe short of Kafka the way it was done before and the way it is "
                    "done now (JSON parsing, building the geometries, encoding the records, "
                    "the whole path), check both give the same subscriptions and bytes, and "
                    "print the time per feature with ratio = before / now, from the same run.")
    p.add_argument("--subscriptions", type=positive_int, default=50_000, metavar="N",
                   help="subscriptions (default 50,000)")
    p.add_argument("--seed", type=int, default=0, help="workload seed (default 0)")
    p.set_defaults(func=_load)


def _load(args: argparse.Namespace) -> int:
    from bench.load.run import format_table, run_load_bench

    log = elapsed_log("geops bench load")
    rows = run_load_bench(subscriptions=args.subscriptions, seed=args.seed, log=log)
    print(format_table(rows))
    return 0
