"""`geops bench chaos`: faults one after another while a live stream runs, exactly-once to
the end.

On a local Apache Kafka of three nodes (replication factor 3, min.insync.replicas 2), a
standalone Spark cluster of two workers, the app in exactly-once mode with a standby (geops app
--standby; --no-standby: without), the distributor and a producer process at --rate
publications/s run for --duration; every --every (jittered by ±50 %) one fault drawn at random
(--seed) from --kinds happens:

  broker-kill         kill -9 of one broker node, started again on its data after 10-30 s
  broker-freeze       one broker node stopped (SIGSTOP) for 10-40 s, then resumed
  driver-kill         kill -9 of the app's driver; the standby takes over and the killed app
                      is started again as the next standby (without a standby: started again
                      on the same checkpoint)
  executor-kill       kill -9 of one executor of the app (its worker starts a new one)
  distributor-kill    kill -9 of the distributor, started again
  producer-kill       kill -9 of the producer, started again where it left off
  subscription-burst  1,000 subscription changes in a second (subscribe, then remove)

At the end the producer is stopped, the app drained and stopped, and the run checks that the
publications topic holds every id once, that the matches topic read with read_committed equals
the oracle's answers exactly (none missing, extra, different or twice), that the distributor's
last epoch is the app's, and that nothing it started still runs. It prints and writes, per
fault kind, how many, the time until the lag was back under 2 s of input (median and worst),
the answer gap (the longest time without a new answer while publications were waiting), the
records the app re-read, and each kind's goal beside its figure: met or not met (README.md,
faults.csv, lag.csv.gz, answers.csv.gz, summary.json in --out). Exit code 1 when the end is not
exact.

The rate should be about half what this deployment sustains (three brokers, two 1-core
executors, exactly-once): on two cores 1,000/s already fell behind (a lag of 30-56 s within 90 s
of a run without faults); the default, 500/s, is about half.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

from cli import bench_live as live
from cli.common import EXIT_USAGE, positive_int
from cli.errors import CommandError
from config.exitcodes import EXIT_FAILED


def register_chaos(benches: argparse._SubParsersAction) -> None:
    from bench.chaos.faults import KINDS

    p = live.bench_parser(benches, "chaos", __doc__,
                          "faults one after another during a live exactly-once stream; the "
                          "answers checked against the oracle")
    p.add_argument("--duration", default="20m", metavar="D",
                   help="how long the stream runs with faults (default 20m)")
    p.add_argument("--every", default="60s", metavar="D",
                   help="mean time between faults, jittered by ±50 %% (default 60s)")
    p.add_argument("--seed", type=int, default=0, help="draws the faults and the workload "
                                                       "(default 0)")
    p.add_argument("--faults", type=int, default=0, metavar="N",
                   help="at most N faults (default 0: as many as the duration holds)")
    p.add_argument("--kinds", default=",".join(KINDS), metavar="LIST",
                   help=f"the faults to draw from (default all: {','.join(KINDS)})")
    p.add_argument("--rate", type=float, default=500.0, metavar="R",
                   help="publications per second (default 500)")
    p.add_argument("--subscriptions", type=positive_int, default=10_000, metavar="N",
                   help="subscriptions (default 10,000)")
    p.add_argument("--base-publications", type=positive_int, default=20_000, metavar="M",
                   help="distinct publications the stream cycles through, each with a new id "
                        "(default 20,000; the oracle answers these)")
    p.add_argument("--standby", action=argparse.BooleanOptionalAction, default=True,
                   help="run a standby of the app (geops app --standby) that takes over after "
                        "a driver kill, and start a new one in its place (default on; "
                        "--no-standby: the killed app is started again on its checkpoint)")
    p.add_argument("--out", metavar="DIR", default="docs/results/chaos",
                   help="results directory (default docs/results/chaos)")
    p.add_argument("--report-only", action="store_true",
                   help="no run: recompute the recoveries and write the page again from the "
                        "faults.csv, lag.csv.gz and summary.json in --out")
    live.add_workdir_arguments(p)
    p.set_defaults(func=_chaos)


def _options(args: argparse.Namespace):
    from bench.chaos.faults import KINDS
    from bench.chaos.run import ChaosOptions

    kinds = [k.strip() for k in args.kinds.split(",") if k.strip()]
    unknown = [k for k in kinds if k not in KINDS]
    if unknown or not kinds:
        raise CommandError(f"--kinds: unknown fault {', '.join(unknown) or '(none given)'}; "
                           f"choose from {','.join(KINDS)}", EXIT_USAGE)
    if args.faults < 0:
        raise CommandError("--faults must be 0 or more", EXIT_USAGE)
    if not args.rate > 0:
        raise CommandError(f"--rate must be positive, got {args.rate}", EXIT_USAGE)
    return ChaosOptions(duration_s=live.duration(args.duration, "--duration"),
                        every_s=live.duration(args.every, "--every"), seed=args.seed,
                        rate=args.rate, max_faults=args.faults, kinds=kinds,
                        subscriptions=args.subscriptions,
                        base_publications=args.base_publications, standby=args.standby)


def _chaos(args: argparse.Namespace) -> int:
    from bench.chaos.run import rerender, run_chaos
    from bench.harness.errors import BenchFailed

    if args.report_only:
        try:
            rerender(Path(args.out))
        except (OSError, ValueError, KeyError) as exc:
            raise CommandError(f"--report-only: cannot read the run in {args.out}: {exc}",
                               EXIT_USAGE) from None
        print((Path(args.out) / "README.md").read_text(), end="")
        return 0
    opts = _options(args)
    workdir = Path(args.workdir) if args.workdir else Path(tempfile.mkdtemp(prefix="geops-chaos-"))
    verdict = None

    def main(_spec, log) -> None:
        nonlocal verdict
        verdict = run_chaos(opts, Path(args.out), workdir, log, list(live.command_line()[1:]))

    try:
        live.run_bench("chaos", main, None, (BenchFailed,))
    finally:
        if not args.workdir and not args.keep_workdir:
            shutil.rmtree(workdir, ignore_errors=True)
    print((Path(args.out) / "README.md").read_text(), end="")
    if not verdict.exact:
        print("geops bench chaos: the end was not exact (see above)", file=sys.stderr)
        return EXIT_FAILED
    return 0
