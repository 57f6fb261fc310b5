"""`geops bench live`: the app on a live stream, as a user runs it.

Starts a broker (or uses --bootstrap-servers), creates topics with a unique prefix, generates a
workload, loads the subscriptions and starts `geops app` as a subprocess; a producer in this
process then offers publications at a steady rate with event time = time of sending.

steady (default): find the maximum sustainable rate (the highest offered rate at which the
  consumer lag stays bounded: offer each rate for --step, starting at --start-rate and doubling
  until the lag at the end of a step exceeds --max-lag seconds of input or grew by more than
  --max-growth seconds of input over the step's second half; then bisect --bisections times),
  then offer --levels of it (default 50, 70, 90 %) for --duration each and report latency
  (event time -> the Match record's Kafka timestamp) p50/p95/p99/max, lag and throughput;
  --trigger-sweep restarts the app with each trigger interval and offers 70 % again.
rebalance: a skewed stream (--skew of the items on --hot-workers of the workers); after the
  search, 70 % of the rate sustained while skewed for --duration, the distributor (Table 1
  defaults) starting a third of the way in; latency before, during and after its rebalance.
moving: a hot spot that moves mid-stream (--skew of the items on workers 0..H-1, then on
  W/2..W/2+H-1, --shifts times, every --duration); 70 % of the rate the first side's stream
  sustains, the distributor (--distributor-mode, adaptive by default) running throughout;
  rebalances after each shift, latency per phase, and capacity (publications per busy second)
  against an ideal run of the same phases on balanced assignments.
--soak DURATION: 70 % with the distributor for DURATION; lag and the resident memory of every
  process (app JVM, Python workers, broker, distributor) every 10 s; growth first vs last 20 %.

Writes CSVs (raw latencies xz-compressed), PNG plots and README.md to --out. Everything it
starts is stopped at the end, also on Ctrl-C or a failure.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import config
from cli.common import EXIT_FAILED, EXIT_USAGE, positive_int, sigterm_as_interrupt
from cli.errors import CommandError
from cli.progress import elapsed_log
from cli.workload_args import add_mix_arguments, point_share_from, relation_from
from config import choices


def register_live(benches: argparse._SubParsersAction) -> None:
    p = bench_parser(benches, "live", __doc__,
                     "max sustainable rate and latency on a live stream (also a rebalance "
                     "scenario and a soak)")
    p.add_argument("--scenario", choices=("steady", "rebalance", "moving"), default="steady",
                   help="steady (default), rebalance (skewed stream, distributor) or moving "
                        "(the hot spot moves between workers, distributor, ideal run)")
    p.add_argument("--soak", metavar="DURATION",
                   help="run at 70%% with the distributor for DURATION (e.g. 30m) and record "
                        "lag and memory every 10 s")
    p.add_argument("--out", metavar="DIR",
                   help="results directory (default docs/results/live, .../live/rebalance, "
                        ".../live/soak or, for moving, docs/results/adaptive/moving)")
    add_workdir_arguments(p)
    w = add_workload_arguments(p, mix=True)
    w.add_argument("--skew", type=float, default=0.9,
                   help="rebalance and moving scenarios: share of stream items on the hot "
                        "workers (0.9)")
    w.add_argument("--hot-workers", type=positive_int, default=1, metavar="H",
                   help="rebalance and moving scenarios: hot workers (default 1)")
    w.add_argument("--shifts", type=positive_int, default=2, metavar="N",
                   help="moving scenario: times the hot spot moves, every --duration (default "
                        "2: on worker 0, then 1, then 0 again)")
    w.add_argument("--distributor-mode", choices=("adaptive", "dynamic"), default="adaptive",
                   help="moving scenario: the distributor's --mode (default adaptive; dynamic "
                        "= Table 1)")
    a = p.add_argument_group("app")
    a.add_argument("--strategy", choices=choices.STRATEGIES, default="sPIS")
    a.add_argument("--join", choices=choices.JOINS, default="STAL")
    add_app_arguments(a)
    add_delivery_argument(a)
    a.add_argument("--mode", choices=choices.APP_MODES,
                   help="the app's --mode (default: its configured default, micro-batch)")
    a.add_argument("--modes", metavar="LIST",
                   help="steady: run the app in each of these modes in turn on the same "
                        "workload and broker, e.g. micro-batch,real-time: the backlog, then "
                        "each of --rates for --duration, and a table of both side by side with "
                        "their ratios (no search; --rates is required)")
    s = p.add_argument_group("search and phases")
    s.add_argument("--step", default="20s", metavar="D", help="search step length (20s)")
    s.add_argument("--start-rate", type=float, default=500.0, metavar="R",
                   help="first rate tried, publications/s (500); also the warm-up rate")
    s.add_argument("--bisections", type=int, default=3, metavar="K",
                   help="bisection steps after the doubling (3)")
    s.add_argument("--max-lag", type=float, default=5.0, metavar="S",
                   help="sustainable: lag at the end of a step <= S seconds of input (5)")
    s.add_argument("--max-growth", type=float, default=1.0, metavar="S",
                   help="sustainable: lag growth over the second half <= S s of input (1)")
    s.add_argument("--max-rate", type=float, metavar="R",
                   help="skip the search: take R publications/s as the maximum")
    s.add_argument("--backlog", type=int, default=60_000, metavar="N",
                   help="steady: before the search, write N publications at once and measure "
                        "how fast the same app drains them, for the ratio of the maximum "
                        "sustainable rate to it (60000; 0: skip)")
    s.add_argument("--levels", default="50,70,90", metavar="LIST",
                   help="percentages of the maximum to offer (default 50,70,90)")
    s.add_argument("--rates", default="", metavar="LIST",
                   help="steady: also offer each of these fixed rates (publications/s) for "
                        "--duration after the levels, e.g. 1000")
    s.add_argument("--idle", default="0s", metavar="D",
                   help="steady: at the end, measure the CPU the app and the broker use while "
                        "no publication arrives for D (default 0s: skip)")
    s.add_argument("--duration", default="60s", metavar="D",
                   help="length of each level / of the rebalance phase / of each phase of the "
                        "moving hot spot (60s)")
    s.add_argument("--trigger-sweep", default="", metavar="LIST",
                   help="steady: also offer 70%% with each of these triggers, e.g. "
                        "100ms,250ms,1s (the app restarts for each)")
    config.add_arguments(p, ["kafka"])
    p.set_defaults(func=_live)


def bench_parser(benches: argparse._SubParsersAction, name: str, doc: str | None,
                 help: str) -> argparse.ArgumentParser:
    """The parser of `geops bench NAME`, its module's docstring as the description."""
    return benches.add_parser(name, help=help, description=doc,
                              formatter_class=argparse.RawDescriptionHelpFormatter)


def add_workdir_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--workdir", metavar="DIR",
                   help="broker state, checkpoints and logs (default: a temporary directory, "
                        "removed at the end)")
    p.add_argument("--keep-workdir", action="store_true", help="keep the temporary work dir")


def add_workload_arguments(p: argparse.ArgumentParser, mix: bool = False
                           ) -> argparse._ArgumentGroup:
    """The generated workload's size and seed; ``mix``: also its point share and relation."""
    w = p.add_argument_group("workload")
    w.add_argument("--subscriptions", type=positive_int, default=10_000, metavar="N",
                   help="subscriptions (default 10,000)")
    w.add_argument("--pool", type=positive_int, default=20_000, metavar="N",
                   help="publication geometries generated and cycled (default 20,000)")
    w.add_argument("--seed", type=int, default=5, help="workload seed (default 5)")
    if mix:
        add_mix_arguments(w)
    return w


def add_app_arguments(a: argparse._ArgumentGroup, trigger: str = "0s") -> None:
    """The app's options other than its strategy and join; ``trigger``: the default of
    --trigger (the app's own, 0s, unless a benchmark counts in triggers)."""
    a.add_argument("--workers", type=positive_int, default=2, metavar="W", help="(default 2)")
    a.add_argument("--partitions", type=positive_int, default=64, metavar="P",
                   help="static partitions (default 64)")
    a.add_argument("--partitioner", choices=choices.PARTITIONERS, default="kdbtree")
    a.add_argument("--trigger", default=trigger,
                   help=f"micro-batch interval (default {trigger}; 0s: back to back)")
    a.add_argument("--master", help="Spark master (default local[W])")


def add_delivery_argument(a: argparse._ArgumentGroup) -> None:
    a.add_argument("--delivery", choices=("exactly-once", "at-least-once"),
                   help="the app's --delivery (default: its configured default)")


def add_backlog_live_arguments(p: argparse.ArgumentParser, *, repeats: int,
                               backlog_rate: float, duration: str, baseline: str
                               ) -> argparse._ArgumentGroup:
    """The runs of a benchmark that compares modes on a backlog and then a live rate:
    --repeats, --backlog-rate, --backlog, --rate (default 70 % of the first ``baseline``
    backlog throughput) and --duration, with these defaults."""
    r = p.add_argument_group("runs")
    r.add_argument("--repeats", type=positive_int, default=repeats, help=f"(default {repeats})")
    r.add_argument("--backlog-rate", type=float, default=backlog_rate, metavar="R",
                   help=f"publications/s offered for the backlog, far more than the app takes "
                        f"({backlog_rate:.0f})")
    r.add_argument("--backlog", default="5s", metavar="D", help="backlog offer (5s)")
    r.add_argument("--rate", type=float, metavar="R",
                   help=f"live publications/s (default 70%% of the first {baseline} backlog "
                        f"throughput)")
    r.add_argument("--duration", default=duration, metavar="D",
                   help=f"live phase ({duration})")
    return r


def check_rates(args: argparse.Namespace) -> None:
    """--backlog-rate and --rate above zero, else a usage error."""
    if args.backlog_rate <= 0 or (args.rate is not None and args.rate <= 0):
        raise CommandError("--backlog-rate and --rate must be positive", EXIT_USAGE)


def kafka_settings(args: argparse.Namespace) -> tuple[str | None, dict[str, str]]:
    """The bootstrap servers given on the command line (None: start a broker) and the other
    librdkafka settings, from the options only (not the GEOPS_* environment); a --config file
    is handed on to every process the benchmark starts (GEOPS_CONFIG)."""
    import os

    cfg = config.from_args(args, environ={k: v for k, v in os.environ.items()
                                          if not k.startswith("GEOPS_")})
    if args.config:  # every process the benchmark starts reads the same file (e.g. topics)
        os.environ["GEOPS_CONFIG"] = str(Path(args.config).resolve())
    props = dict(cfg.kafka_client())
    props.pop("bootstrap.servers", None)
    return (args.cfg__kafka__bootstrap_servers or None,
            {k: str(v) for k, v in props.items()})


def command_line() -> tuple[str, ...]:
    """The command as a user typed it, from `geops bench` on."""
    return (("geops", *sys.argv[sys.argv.index("bench"):]) if "bench" in sys.argv
            else tuple(sys.argv))


def run_bench(name: str, main, spec, exceptions: tuple[type[BaseException], ...]) -> int:
    """Run ``main(spec, log)`` with SIGTERM as Ctrl-C (so everything started is stopped);
    ``exceptions`` become a failed command."""
    log = elapsed_log(f"geops bench {name}")
    try:
        with sigterm_as_interrupt():
            main(spec, log)
    except exceptions as exc:
        raise CommandError(str(exc), EXIT_FAILED) from None
    return 0


def duration(text: str, flag: str, zero: bool = False) -> float:
    """``text`` in seconds; positive (or, with ``zero``, at least 0), else a usage error
    naming ``flag``."""
    try:
        value = config.parse_duration(text)
    except ValueError as exc:
        raise CommandError(f"{flag}: {exc}", EXIT_USAGE) from None
    if value < 0 or (value == 0 and not zero):
        raise CommandError(f"{flag} must be {'0 or more' if zero else 'positive'}, got "
                           f"{text!r}", EXIT_USAGE)
    return value


def build_spec(args: argparse.Namespace):
    from bench.harness.deployment import AppOptions
    from bench.live.spec import LiveSpec

    try:
        levels = tuple(float(x) / 100 for x in args.levels.split(",") if x.strip())
    except ValueError:
        raise CommandError(f"--levels: expected percentages, got {args.levels!r}",
                           EXIT_USAGE) from None
    if not levels or any(not 0 < v <= 2 for v in levels):
        raise CommandError("--levels: each must be in (0, 200]", EXIT_USAGE)
    try:
        rates = tuple(float(x) for x in args.rates.split(",") if x.strip())
    except ValueError:
        raise CommandError(f"--rates: expected publications/s, got {args.rates!r}",
                           EXIT_USAGE) from None
    if any(r <= 0 for r in rates):
        raise CommandError(f"--rates: each must be positive, got {args.rates!r}", EXIT_USAGE)
    idle = duration(args.idle, "--idle", zero=True)
    sweep = tuple(x.strip() for x in args.trigger_sweep.split(",") if x.strip())
    for t in (args.trigger, *sweep):
        duration(t, "--trigger", zero=True)
    if not 0.5 <= args.skew < 1:
        raise CommandError("--skew must be in [0.5, 1)", EXIT_USAGE)
    if args.hot_workers >= args.workers and args.scenario == "rebalance":
        raise CommandError("--hot-workers must be fewer than --workers", EXIT_USAGE)
    if args.scenario == "moving" and 2 * args.hot_workers > args.workers:
        raise CommandError("--hot-workers: the moving hot spot needs --workers >= 2 x "
                           f"--hot-workers, got {args.hot_workers} of {args.workers}", EXIT_USAGE)
    if args.scenario == "moving" and args.soak:
        raise CommandError("--soak runs the steady or rebalance stream, not --scenario moving",
                           EXIT_USAGE)
    if args.start_rate <= 0 or (args.max_rate is not None and args.max_rate <= 0):
        raise CommandError("rates must be positive", EXIT_USAGE)
    if args.backlog < 0:
        raise CommandError(f"--backlog must be 0 or more, got {args.backlog}", EXIT_USAGE)
    soak = duration(args.soak, "--soak") if args.soak else None
    modes = _modes(args)
    given, kafka_props = kafka_settings(args)
    default_out = ("docs/results/live/soak" if soak else
                   "docs/results/live/rebalance" if args.scenario == "rebalance"
                   else "docs/results/adaptive/moving" if args.scenario == "moving"
                   else "docs/results/live")
    return LiveSpec(
        out=Path(args.out or default_out), scenario=args.scenario, soak=soak,
        subscriptions=args.subscriptions, pool=args.pool, seed=args.seed,
        point_share=point_share_from(args), relation=relation_from(args),
        app=AppOptions(args.strategy, args.join, args.workers, args.partitions,
                       args.partitioner, args.trigger, args.master, args.delivery, args.mode),
        step_s=duration(args.step, "--step"), start_rate=args.start_rate,
        bisections=max(args.bisections, 0), max_lag_s=args.max_lag,
        max_growth_s=args.max_growth, max_rate=args.max_rate, backlog=args.backlog,
        levels=levels, rates=rates, idle_s=idle,
        duration_s=duration(args.duration, "--duration"), trigger_sweep=sweep,
        skew=args.skew, hot_workers=args.hot_workers, shifts=args.shifts,
        distributor_mode=args.distributor_mode, modes=modes, bootstrap_servers=given,
        kafka_properties=kafka_props,
        workdir=Path(args.workdir) if args.workdir else None, keep_workdir=args.keep_workdir,
        command=command_line())


def _modes(args: argparse.Namespace) -> tuple[str, ...]:
    """The modes of --modes, checked: known, no repeats, with --rates, steady only."""
    if not args.modes:
        return ()
    modes = tuple(m.strip() for m in args.modes.split(",") if m.strip())
    unknown = [m for m in modes if m not in choices.APP_MODES]
    if unknown or len(set(modes)) != len(modes) or len(modes) < 2:
        raise CommandError(f"--modes: expected two or more of {', '.join(choices.APP_MODES)}, "
                           f"each once, "
                           f"got {args.modes!r}", EXIT_USAGE)
    if args.mode:
        raise CommandError("--mode and --modes: give one", EXIT_USAGE)
    if not args.rates or args.scenario != "steady" or args.soak:
        raise CommandError("--modes runs the steady scenario at --rates: give --rates, "
                           "without --scenario or --soak", EXIT_USAGE)
    return modes


def _live(args: argparse.Namespace) -> int:
    from bench.harness.errors import BenchFailed
    from bench.live.run import main

    return run_bench("live", main, build_spec(args), (BenchFailed,))
