"""`geops broker start|stop|status`: the local Apache Kafka of a state directory."""

from __future__ import annotations

import argparse
import time

import config
from cli.common import settings
from config.embedded import pid_alive
from kafkaio import broker, security


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "broker", help="start, stop or inspect the local Apache Kafka broker",
        description="Manage a local Apache Kafka (KRaft: each node broker and controller) run "
                    "from the pinned Maven Central jars of jvm/kafka/pom.xml. Its data lives "
                    "under the state directory: a restart on the same directory keeps every "
                    "topic and comes back on the same ports.")
    actions = parser.add_subparsers(dest="action", metavar="ACTION")
    actions.required = True
    start = actions.add_parser("start", help="start the broker in the background and wait "
                                             "until it accepts connections")
    start.add_argument(
        "--secure", action="store_true",
        help="make a new broker secured: clients on SASL_SSL with SCRAM-SHA-512 only, the "
             "controllers on TLS, a CA made in the state directory, one principal per part of "
             "geops (app, distributor, publisher, subscriber, dashboard, admin) with a random "
             "password and only the ACLs it needs, and a settings file per part to pass with "
             "--config (see docs/security.md). A broker made secured stays so.")
    config.add_arguments(start, ["broker", "state", "topics"])
    start.set_defaults(func=_start)
    stop = actions.add_parser("stop", help="stop the broker of the state directory")
    config.add_arguments(stop, ["state"])
    stop.set_defaults(func=_stop)
    status = actions.add_parser("status", help="tell whether the broker runs and where "
                                               "(exit code 1 when it does not)")
    config.add_arguments(status, ["state"])
    status.set_defaults(func=_status)


def _start(args: argparse.Namespace) -> int:
    cfg = settings(args)
    info, started = broker.start(cfg.state_dir(), cfg.view.broker.port,
                                 nodes=cfg.view.broker.nodes, heap=cfg.view.broker.heap,
                                 secure=args.secure,
                                 topic_names={t: cfg.topic(t) for t in config.TOPICS})
    what = f"Apache Kafka {info.kafka_version}, {_nodes(info)}"
    if started:
        print(f"broker started ({what})")
    else:
        print(f"broker already running ({what})")
        if info.port != cfg.view.broker.port and cfg.view.broker.port != 0:
            print(f"note: it listens on port {info.port}, not {cfg.view.broker.port}; "
                  f"stop it first to change the port")
    print(f"bootstrap servers: {info.address}")
    if info.secure_dir:
        print(f"secured (SASL_SSL, SCRAM-SHA-512, ACLs): each part connects with "
              f"--config {info.secure_dir}/<part>.toml "
              f"(part: {', '.join(security.PARTS)})")
    return 0


def _stop(args: argparse.Namespace) -> int:
    cfg = settings(args)
    info = broker.stop(cfg.state_dir())
    print(f"broker stopped ({', '.join(f'pid {p}' for p in info.pids)})" if info
          else "no broker running")
    return 0


def _status(args: argparse.Namespace) -> int:
    cfg = settings(args)
    info = broker.status(cfg.state_dir())
    if info is None:
        print(f"no broker running (state directory {cfg.state_dir()})")
        return 1
    up = time.time() - info.started_at
    print(f"running: Apache Kafka {info.kafka_version}, bootstrap servers {info.address}, "
          f"up {up:.0f} s; {_nodes(info)}")
    return 0


def _nodes(info: broker.BrokerInfo) -> str:
    """'pid P, log L' for one node; one such part per node of a cluster."""
    if len(info.nodes) <= 1:
        return f"pid {info.pid}, log {info.log}"
    return "; ".join(f"node {n.node_id}: pid {n.pid}"
                     f"{'' if pid_alive(n.pid) else ' (not running)'}, log {n.log}"
                     for n in info.nodes)
