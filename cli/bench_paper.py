"""`geops bench paper`: the paper's evaluation (Fig. 4-8) and a 16-worker simulation (Fig. 9).

``--full`` runs every pipeline x mode x skew three times plus the Fig. 8 redistribution runs
(hours on 2 cores; resumable), then draws the figures and writes the report. ``--quick`` runs one
pipeline on small data, Dynamic LB STAL at skews 0.5 and 0.9 and Static STAL at 0.9 (minutes),
and checks that the harness produced every file it should.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import config
from cli.common import settings, sigterm_as_interrupt
from cli.errors import CommandError
from cli.progress import elapsed_log
from config.exitcodes import EXIT_USAGE

QUICK_FILES = ("runs.csv", "batches.csv", "loads.csv", "status.csv", "meta.json",
               "fig4_throughput.png", "fig4_throughput.csv", "fig5_latency.png",
               "fig5_latency.csv", "README.md")


def register_paper(benches: argparse._SubParsersAction) -> None:
    from bench.paper.plan import HOT_SPOT, MODES, PIPELINES, RUN_MODES, SKEWS

    p = benches.add_parser(
        "paper", help="reproduce the paper's evaluation (six modes x four pipelines x skew)",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    size = p.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true",
                      help="CI check: sPIS, Dynamic LB STAL at skews 0.5, 0.9; Static STAL at 0.9")
    size.add_argument("--full", action="store_true", help="everything (the default)")
    size.add_argument("--first-period-ab", action="store_true",
                      help="A/B of the distributor's first period: Static STAL vs Dynamic LB "
                           "STAL with --first-period min-items and full, back to back per "
                           "point (default skew 0.9; labelled runs, not in Fig. 4-7)")
    p.add_argument("--out", metavar="DIR",
                   help="results directory (default docs/results/full-matrix, where a re-run "
                        "resumes the full matrix; <state-dir>/bench-quick with --quick)")
    p.add_argument("--workdir", metavar="DIR",
                   help="per-run brokers, checkpoints and logs (default <state-dir>/bench-runs)")
    p.add_argument("--repeats", type=int, default=3, metavar="N", help="runs per point (3)")
    p.add_argument("--pipelines", default=",".join(PIPELINES), metavar="LIST",
                   help="subset of " + ",".join(PIPELINES))
    p.add_argument("--modes", default=",".join(MODES), metavar="LIST",
                   help="subset of the paper's six modes (the default), 'Adaptive STAL' "
                        "(the self-tuning distributor) and 'Dynamic LB STAL replicate' "
                        "(Dynamic LB STAL with --policy replicate; every other mode runs the "
                        "paper's greedy), e.g. 'Static STAL,Dynamic LB STAL'; "
                        f"known: {', '.join(RUN_MODES)}")
    p.add_argument("--skews", metavar="LIST",
                   help="skew coefficients with one hot worker of two (0.5 is balanced; "
                        f"default {','.join(map(str, SKEWS))}, 0.9 with --first-period-ab); "
                        "'none' with --hot-partitions: only the hot-spot points")
    p.add_argument("--hot-partitions", type=int, metavar="K",
                   help="also run hot-spot points: the skewed share of the stream in K "
                        "partitions of the hot worker (geops generate --hot-partitions K; "
                        "spatial pipelines only), at --hot-skews")
    p.add_argument("--hot-skews", metavar="LIST", default=str(HOT_SPOT[1]),
                   help=f"skews of the hot-spot points (default {HOT_SPOT[1]}: with K = 1, "
                        "80%% of the items in one partition, the simulation's W = 2 case)")
    p.add_argument("--runs-only", action="store_true",
                   help="only the plan's physical runs: no Fig. 8 redistribution runs, "
                        "simulation, figures or report")
    p.add_argument("--scale", type=float, default=1.0, metavar="F",
                   help="publications and records per batch x F (default 1) for --full and "
                        "--first-period-ab: for a faster machine, when the harness warns that "
                        "runs streamed under 60 s")
    p.add_argument("--no-resume", action="store_true",
                   help="start over instead of skipping runs already in runs.csv")
    p.add_argument("--report-only", action="store_true",
                   help="only redraw the figures and rewrite the report from the CSVs")
    config.add_arguments(p, ["state"])
    p.set_defaults(func=_paper)


def _list(text: str, allowed: tuple[str, ...] | None, flag: str) -> tuple[str, ...]:
    items = tuple(x.strip() for x in text.split(",") if x.strip())
    bad = [x for x in items if allowed is not None and x not in allowed]
    if bad or not items:
        raise CommandError(f"{flag}: unknown {', '.join(bad) or '(empty)'}; expected some of "
                           f"{', '.join(allowed or ())}", EXIT_USAGE)
    return items


def _skews(text: str, flag: str = "--skews") -> tuple[float, ...]:
    try:
        values = tuple(float(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise CommandError(f"{flag}: expected numbers, got {text!r}", EXIT_USAGE) from None
    if not values or any(not 0.5 <= v < 1 for v in values):
        raise CommandError(f"{flag}: each skew must be in [0.5, 1) (one hot worker of two)",
                           EXIT_USAGE)
    return values


def _hot_spots(args: argparse.Namespace) -> tuple[tuple[int, float], ...]:
    """(K, skew) of each hot-spot point asked for (none without --hot-partitions)."""
    skews = _skews(args.hot_skews, "--hot-skews")  # checked even when unused: a typo is named
    if args.hot_partitions is None:
        return ()
    if args.hot_partitions < 1:
        raise CommandError("--hot-partitions must be at least 1", EXIT_USAGE)
    if args.quick or args.first_period_ab:
        raise CommandError("--hot-partitions applies to --full", EXIT_USAGE)
    return tuple((args.hot_partitions, s) for s in skews)


def _paper(args: argparse.Namespace) -> int:
    # A SIGTERM stops the harness as Ctrl-C does: the run in progress stops its app, distributor
    # and broker (each in a session of its own, so no signal reaches them otherwise) and is run
    # again when the same command resumes.
    with sigterm_as_interrupt():
        return _run_paper(args)


def _run_paper(args: argparse.Namespace) -> int:
    from bench.paper import redistribution
    from bench.paper.evaluation import run_plan
    from bench.paper.plan import (
        FULL_SIZES,
        MIN_STREAM_S,
        PIPELINES,
        RUN_MODES,
        SKEWS,
        first_period_plan,
        full_plan,
        quick_plan,
        scaled,
    )
    from bench.paper.runner import DistributorSettings

    cfg = settings(args)
    if args.repeats < 1:
        raise CommandError("--repeats must be at least 1", EXIT_USAGE)
    if not 0 < args.scale <= 100:
        raise CommandError(f"--scale must be in (0, 100], got {args.scale}", EXIT_USAGE)
    if args.quick and args.scale != 1.0:
        raise CommandError("--scale applies to --full and --first-period-ab, not --quick",
                           EXIT_USAGE)
    sizes = scaled(FULL_SIZES, args.scale)
    hot_spots = _hot_spots(args)
    out = Path(args.out) if args.out else (
        cfg.state_dir() / "bench-quick" if args.quick else Path("docs/results/full-matrix"))
    workdir = Path(args.workdir) if args.workdir else cfg.state_dir() / "bench-runs"
    log = elapsed_log("geops bench paper", width=7, digits=0)

    if not args.report_only:
        if args.quick:
            # Short periods so a rebalance can happen within a short stream.
            run_plan(quick_plan(), out, workdir,
                     DistributorSettings(period="2s", min_items=500, wait_periods=2),
                     resume=not args.no_resume, log=log)
        elif args.first_period_ab:
            run_plan(first_period_plan(
                args.repeats, _list(args.pipelines, PIPELINES, "--pipelines"),
                _skews(args.skews or "0.9"), sizes), out, workdir, DistributorSettings(),
                resume=not args.no_resume, log=log, min_stream_s=MIN_STREAM_S)
        else:
            skews = (() if hot_spots and args.skews == "none"
                     else _skews(args.skews or ",".join(map(str, SKEWS))))
            plan = full_plan(args.repeats, _list(args.pipelines, PIPELINES, "--pipelines"),
                             _list(args.modes, tuple(RUN_MODES), "--modes"), skews, sizes,
                             hot_spots)
            run_plan(plan, out, workdir, DistributorSettings(),
                     resume=not args.no_resume, log=log, min_stream_s=MIN_STREAM_S)
            if not args.runs_only:
                redistribution.run_redistribution(redistribution.plan(args.repeats), out,
                                                  workdir, resume=not args.no_resume,
                                                  log=log)
    if args.runs_only:
        log(f"done (--runs-only: no figures or report); results in {out}")
        return 0
    _figures_and_report(out, log)
    if args.quick:
        missing = [name for name in QUICK_FILES if not (out / name).exists()]
        if missing:
            raise CommandError(f"the harness did not produce {', '.join(missing)} in {out}")
        log(f"all {len(QUICK_FILES)} expected files are in {out}")
    log(f"done; results in {out}")
    return 0


def _figures_and_report(out: Path, log) -> None:
    from bench.paper import figures, paper_report, simulate_sweep

    simulate_sweep.run_simulation(out, log=log)
    figures.make_all(out, log=log)
    paper_report.write_report(out)
