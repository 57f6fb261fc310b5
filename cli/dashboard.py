"""`geops dashboard`: a web page that follows the live service through Kafka."""

from __future__ import annotations

import argparse
import logging
import sys
import threading

import config
from cli.common import settings, sigterm_as_interrupt
from cli.errors import CommandError
from config.exitcodes import EXIT_USAGE

EPILOG = """\
The page shows, updated once a --period without reloading:
  - a map of the app's static partitions (the partitioner's cells over the subscriptions'
    extent, from the PartitionLayout records the app writes on the metrics topic), each cell
    coloured by its load over the last --map-window and outlined in the colour of the worker
    that owns it (a replicated cell: dashes of each owner's colour), with the publications of
    that window as points; hover a cell for its id, owners, load and subscriptions;
  - time series of the input and output rate, the consumer lag, latency p50/p99, each
    worker's load and the MLDC with the distributor's threshold, each rebalance marked with
    its epoch and moves (the figures of `geops stats --follow`);
  - the distributor's last decision and its reason, and the rebalances.
It reads the metrics, distributor-status, control, matches and publications topics (committed
records only); at start it reads back --history of them, so it shows the current state at
once. An app or distributor that restarts is followed on; Kafka that cannot be reached is a
banner on the page, retried every period.

The same data, for other tools (docs/dashboard.md):
  /api/state   /api/map   /api/series   JSON documents of the newest period
  /api/events  server-sent events: a snapshot, then an update per period
  /metrics     the figures in the Prometheus text format

It listens on 127.0.0.1 (this machine only) unless --host says otherwise; every view is
read-only. --port 0 takes any free port. The address is printed on stdout once it listens.
Ctrl-C or SIGTERM stops it. Exit codes: 0 stopped, 1 the address cannot be used, 2 bad option.

Example:  geops dashboard --port 8050      then open http://127.0.0.1:8050/
"""

MAX_ROWS = 7200  # periods the series hold at most (--history / --period)


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "dashboard", help="serve a live web page of the service: partition map, rates, "
                          "lag, latency, loads, rebalances",
        description="Serve a web page on this machine that follows the running app and "
                    "distributor through Kafka: a map of the static partitions coloured by "
                    "load and outlined by owner, time series of rates, lag, latency, worker "
                    "loads and MLDC with each rebalance marked, and the distributor's last "
                    "decision.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    app_id = config.BY_PATH["app.app_id"]
    parser.add_argument(app_id.flag, metavar="ID",
                        help=f"the app to show (its metrics and commands carry this id) "
                             f"[env: {app_id.env}]")
    config.add_arguments(parser, ["dashboard", "kafka", "state", "topics"])
    parser.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from dashboard.feed import Feed
    from dashboard.server import DashboardServer, Hub
    from dashboard.state import View

    cfg = settings(args)
    app_id = args.app_id or cfg.view.app.app_id
    period, history = cfg.view.dashboard.period, cfg.view.dashboard.history
    if history / period > MAX_ROWS:
        raise CommandError(f"--history {history:g} s / --period {period:g} s gives "
                           f"{history / period:.0f} points per series; at most {MAX_ROWS}",
                           EXIT_USAGE)
    host, port = cfg.view.dashboard.host, cfg.view.dashboard.port
    hub = Hub()
    try:
        server = DashboardServer(host, port, hub)
    except OSError as exc:
        raise CommandError(f"cannot listen on --host {host} --port {port}: "
                           f"{exc.strerror or exc}") from None
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    view = View(app_id, period_s=period, history_s=history,
                window_s=cfg.view.dashboard.map_window)
    feed = Feed(cfg, view, hub.publish)
    stop = threading.Event()
    reader = threading.Thread(target=feed.run, args=(stop,), name="dashboard-feed",
                              daemon=True)
    serving = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.2},
                               name="dashboard-http", daemon=True)
    print(f"geops dashboard: app '{app_id}' at {server.url} (Kafka at "
          f"{cfg.bootstrap_servers()}; Ctrl-C stops)", flush=True)
    try:
        with sigterm_as_interrupt():
            reader.start()
            serving.start()
            while reader.is_alive():
                reader.join(0.5)
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM: how the dashboard stops
        pass
    finally:
        stop.set()
        hub.close()
        if serving.is_alive():
            server.shutdown()
        server.server_close()
        reader.join(10)
    return 0
