"""`geops topics create`: create every configured topic (idempotent)."""

from __future__ import annotations

import argparse

import config
from cli.common import reachable, settings
from kafkaio.topics import create_topics


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("topics", help="create the configured Kafka topics")
    actions = parser.add_subparsers(dest="action", metavar="ACTION")
    actions.required = True
    create = actions.add_parser(
        "create", help="create every configured topic unless it exists",
        description="Create publications, subscriptions (compacted), matches, metrics, control "
                    "(compacted), dead-letter, distributor-status, events, object-positions "
                    "and object-state (compacted) topics. Existing topics "
                    "are left as they are.")
    config.add_arguments(create, ["kafka", "state", "topics", "topic-partitions"])
    create.set_defaults(func=_create)


def _create(args: argparse.Namespace) -> int:
    cfg = settings(args)
    reachable(cfg)
    results = create_topics(cfg)
    for r in results:
        extra = f" ({r.detail})" if r.detail else ""
        print(f"{r.outcome:8} {r.name} [{r.partitions} partitions]{extra}")
    return 1 if any(r.outcome == "failed" for r in results) else 0
