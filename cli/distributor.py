"""`geops distributor`: run the Dynamic Distributor service until stopped (or idle)."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from types import FrameType

import config
from cli.common import settings

EPILOG = """\
Reads the app's PartitionLoad and BatchSummary records from the metrics topic (only those
produced after it started) and writes what it decides, and why, to the status topic. In mode
adaptive (the default) it judges after every batch of the app and writes a RebalanceCommand to
the control topic when the saving predicted over the load pattern's expected lifetime pays for
the learnt cost of the move (distributor/README.md). In mode dynamic (the paper's) it judges
every --period and commands when all four of Table 1's conditions hold: MLDC > --threshold, at
least --min-items items under the assignment in force, no change in the last --wait-periods
periods, and an improvement of more than --min-improvement. On start it recovers the epoch in
force from the control topic, so epochs only grow.
If the app does not report a commanded epoch within --resync-periods periods, it goes back to
the epoch and assignment the app reports (decision `resync`).

--policy picks the new assignment: replicate (default) gives a partition hotter than a
worker's fair share several owners (its stream items split among them) and moves the rest;
greedy (the paper's) only moves; llfd, minmig, mixed are the migration-aware movers of Fang
et al. (HPDC 2017) (distributor/README.md#policies).

Logs one line per decision on stderr. SIGINT/SIGTERM stop it cleanly. Exit codes: 0 stopped,
1 Kafka unreachable or a topic missing (create them with `geops topics create`), 2 bad option,
4 Kafka did not answer for --outage-limit.

Watch it:  geops tail --topic status      geops tail --topic control --from-beginning
"""


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "distributor", help="balance the app: watch its loads, command rebalances",
        description="The Dynamic Distributor: every period it computes each worker's load\n"
                    "(LB: processing time, DB: items) from the app's metrics and their maximum\n"
                    "load distance coefficient (MLDC), and commands a new partition-to-worker\n"
                    "assignment when the load is skewed. Defaults are the paper's Table 1\n"
                    "(config/default.toml), with the replicate policy.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    app_id = config.BY_PATH["app.app_id"]
    parser.add_argument(app_id.flag, metavar="ID",
                        help=f"the app to balance (its metrics and commands carry this id) "
                             f"[env: {app_id.env}]")
    config.add_arguments(parser, ["kafka", "state", "topics", "distributor"])
    parser.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from distributor.service import Service

    cfg = settings(args)
    if args.app_id is not None:
        cfg = cfg.with_overrides({"app.app_id": args.app_id})
    service = Service(cfg)  # bad settings fail here, before any Kafka traffic
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    stop = threading.Event()

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        logging.getLogger("geops.distributor").info(
            "received %s; stopping", signal.Signals(signum).name)
        stop.set()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        return service.run(stop)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
