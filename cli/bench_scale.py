"""`geops bench scale`: time to the first batch, throughput, cost per candidate pair, peak
memory and a move's redistribution time with 10k .. 1M subscriptions."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from cli.common import duration_text, memory_size, positive_int, sigterm_as_interrupt
from cli.errors import CommandError
from cli.progress import elapsed_log
from config.exitcodes import EXIT_FAILED, EXIT_USAGE

STRATEGIES = ("sPS", "sPIS", "RIhPS", "RIsPS")


def register_scale(benches: argparse._SubParsersAction) -> None:
    p = benches.add_parser(
        "scale", help="the app with 10k .. 1M subscriptions: start-up, throughput, memory, moves",
        description="Per number of subscriptions (ascending) and strategy, on a broker of its "
                    "own: load a generated workload's subscriptions, write a backlog of "
                    "publications, start geops app (STAL, local[W]) and measure the time from "
                    "its launch to its first batch, the static build (from its log), the "
                    "throughput and cost per candidate pair over the batches after the first, "
                    "the peak memory of the driver's Python, the JVM and the Python workers, "
                    "and the duration and bytes of one forced move (every fourth partition to "
                    "the next worker, commanded after --move-after batches). A run that fails "
                    "is recorded with its reason and retried once with --retry-driver-memory. "
                    "Rows are appended to OUT/runs.csv after every run; OUT/uptime.csv logs "
                    "the machine's load every 10 s. --report only redraws the plots and "
                    "README table from OUT/runs.csv.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--sizes", default="10000,100000,300000,1000000", metavar="LIST",
                   help="numbers of subscriptions, comma-separated")
    p.add_argument("--strategies", default="sPIS,RIsPS", metavar="LIST",
                   help=f"comma-separated subset of {','.join(STRATEGIES)}")
    p.add_argument("--publications", type=positive_int, default=20_000, metavar="M",
                   help="publications generated per workload")
    p.add_argument("--publish-times", type=positive_int, default=2, metavar="K",
                   help="the publications file is written K times as the backlog")
    p.add_argument("--seed", type=int, default=9, help="workload seed (every size)")
    p.add_argument("--workers", type=positive_int, default=2, metavar="W")
    p.add_argument("--partitions", type=positive_int, default=16, metavar="P")
    p.add_argument("--trigger", type=duration_text, default="100ms")
    p.add_argument("--max-records-per-trigger", type=positive_int, default=2_000, metavar="R")
    p.add_argument("--move-after", type=positive_int, default=3, metavar="B",
                   help="batches with records before the forced move")
    p.add_argument("--max-batches", type=int, default=0, metavar="B",
                   help="stop a run after B batches with records once the move is reported "
                        "(0 = when the whole backlog is processed)")
    p.add_argument("--driver-memory", type=memory_size, default="4g")
    p.add_argument("--retry-driver-memory", type=lambda t: memory_size(t) if t.strip() else "",
                   default="8g",
                   help="driver memory of the one retry of a failed run ('' = no retry)")
    p.add_argument("--memory-limit", type=float, default=10_240.0, metavar="MB",
                   help="stop a run when the app's processes together hold more than MB "
                        "resident (0 = no limit); recorded as a failure")
    p.add_argument("--first-batch-timeout", type=float, default=600.0, metavar="S")
    p.add_argument("--run-timeout", type=float, default=900.0, metavar="S")
    p.add_argument("--reference", type=positive_int, default=10_000, metavar="N",
                   help="subscriptions of the reference run the ratios are relative to")
    p.add_argument("--out", default="docs/results/scale", metavar="DIR")
    p.add_argument("--workdir", default=None, metavar="DIR",
                   help="workloads, broker state, checkpoints and logs (default /tmp/geops-scale)")
    p.add_argument("--report", action="store_true",
                   help="only write the plots and README table from OUT/runs.csv")
    p.set_defaults(func=_scale)


def _ints(text: str, what: str) -> tuple[int, ...]:
    try:
        vals = tuple(int(x.replace("_", "")) for x in text.split(",") if x.strip())
    except ValueError:
        raise CommandError(f"{what}: expected comma-separated integers, got {text!r}",
                           EXIT_USAGE) from None
    if not vals or min(vals) <= 0:
        raise CommandError(f"{what}: expected positive integers, got {text!r}", EXIT_USAGE)
    return vals


def _scale(args: argparse.Namespace) -> int:
    from bench.scale.report import write_report
    from bench.scale.run import ScaleSpec, run_scale

    out = Path(args.out)
    if args.report:
        if not (out / "runs.csv").exists():
            raise CommandError(f"--report: no {out / 'runs.csv'} yet", EXIT_USAGE)
        write_report(out, args.reference, " ".join(sys.argv),
                     Path(args.workdir or "/tmp/geops-scale"))
        return 0
    strategies = tuple(s.strip() for s in args.strategies.split(",") if s.strip())
    unknown = sorted(set(strategies) - set(STRATEGIES))
    if unknown or not strategies:
        raise CommandError(f"--strategies: unknown {', '.join(unknown) or '(none given)'}; "
                           f"expected names from {', '.join(STRATEGIES)}", EXIT_USAGE)
    spec = ScaleSpec(out=out, workdir=Path(args.workdir or "/tmp/geops-scale"),
                     sizes=_ints(args.sizes, "--sizes"), strategies=strategies,
                     workers=args.workers, partitions=args.partitions,
                     publications=args.publications, publish_times=args.publish_times,
                     seed=args.seed, trigger=args.trigger,
                     max_records=args.max_records_per_trigger, move_after=args.move_after,
                     max_batches=args.max_batches,
                     driver_memory=args.driver_memory,
                     retry_driver_memory=args.retry_driver_memory or None,
                     first_batch_timeout=args.first_batch_timeout, run_timeout=args.run_timeout,
                     reference=args.reference, memory_limit_mb=args.memory_limit)
    log = elapsed_log("geops bench scale")
    with sigterm_as_interrupt():  # stop what it started, as on Ctrl-C
        rows = run_scale(spec, log)
    write_report(out, args.reference, " ".join(sys.argv), spec.workdir)
    if not any(r.get("status") == "ok" for r in rows):
        raise CommandError(f"no run succeeded; see the logs under {spec.workdir}", EXIT_FAILED)
    return 0
