"""`geops match`: the offline matcher, the app's matching path without Kafka or Spark.

Reads subscriptions and publications from GeoJSON (the rules of `geops subscribe`/`publish`),
matches them with one strategy, and writes one JSON line per matched publication in input
order; with ``--events``, the geofence events of moving objects instead (``geops.events``),
one JSON line per event. Rejected features are printed to stderr and skipped (exit code 3);
progress and a summary go to stderr.
"""

from __future__ import annotations

import argparse
import errno
import os
import sys
import time
from collections.abc import Callable
from typing import Any

from cli.common import non_negative_duration, positive_duration, positive_int
from cli.errors import CommandError
from config.exitcodes import EXIT_OK, EXIT_REJECTED, EXIT_USAGE
from geops.errors import GeoJSONError
from geops.geojson import Rejected
from geops.offline import ROAM_LATENESS_MS, events_files, match_files
from geops.partitioning import PARTITIONERS
from geops.strategies import STRATEGIES


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "match", help="match publications against subscriptions offline (no Kafka, no Spark)",
        description="Match every publication of a GeoJSON file against the subscriptions of "
                    "another with one of the four strategies, through the same route, "
                    "per-partition match and merge steps as the streaming app.",
        epilog='Writes OUT.jsonl: one line {"publication_id": ID, "subscription_ids": [...]} '
               "per matched publication, in input order, ids ascending. With --events: one "
               'line {"object_id": "...", "subscription_id": ID, "kind": "enter|exit|inside|'
               'outside|cross", "publication_id": ID, "event_time": MS} per geofence event, '
               "publication after publication in file order (an expiry: publication_id null, "
               'event_time last seen + TTL, and "reason": "expired"); a roaming fence\'s '
               '(properties.roam) kind is "nearby|faraway" and its line adds "other_object_id" '
               'and "distance_m"; --strategy, '
               "--partitions and --partitioner are not used then. Exit code 3 when input "
               "features were rejected, 2 on usage errors.")
    p.add_argument("--subscriptions", required=True, metavar="SUBS.geojson",
                   help="subscriptions (properties.id, properties.relation)")
    p.add_argument("--publications", required=True, metavar="PUBS.geojson",
                   help="publications (properties.id)")
    p.add_argument("--strategy", choices=STRATEGIES, default="sPIS",
                   help="matching strategy (default sPIS)")
    p.add_argument("--partitions", type=positive_int, default=16, metavar="P",
                   help="static partitions (default 16)")
    p.add_argument("--partitioner", choices=PARTITIONERS, default="kdbtree",
                   help="spatial partitioner (default kdbtree; RIhPS hashes ids instead)")
    p.add_argument("--out", required=True, metavar="OUT.jsonl", help="output file")
    p.add_argument("--events", action="store_true",
                   help="write the geofence events of moving objects instead of matches: "
                        "subscriptions with properties.detect (and properties.distance_m), "
                        "publications with an object id and properties.event_time")
    p.add_argument("--object-id-field", metavar="NAME",
                   help="with --events: the publications' property holding the object id "
                        "(default object_id)")
    p.add_argument("--object-ttl", type=positive_duration, metavar="DURATION",
                   help="with --events: an object unseen for longer is forgotten, with an "
                        "exit (reason expired) from every fence it was in (default 10m)")
    p.add_argument("--roam-lateness", type=non_negative_duration, metavar="DURATION",
                   help="with --events: roaming fences hold a position until the file's "
                        "latest event time is this far past it, and leave out (count) one "
                        "that comes later (default 10s)")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    problem = _output_problem(args.out)
    if problem:  # before reading and matching, which may take long
        raise CommandError(f"{args.out}: {problem}", EXIT_USAGE)
    t0 = time.monotonic()

    def log(message: str) -> None:
        print(f"geops match: [{time.monotonic() - t0:6.1f}s] {message}", file=sys.stderr,
              flush=True)

    if args.events:
        return _run_events(args, log)
    if (args.object_id_field is not None or args.object_ttl is not None
            or args.roam_lateness is not None):
        raise CommandError("--object-id-field, --object-ttl and --roam-lateness need --events",
                           EXIT_USAGE)
    report, rejected = _computed(args, lambda: match_files(
        args.subscriptions, args.publications, args.out, strategy=args.strategy,
        partitions=args.partitions, partitioner=args.partitioner, log=log))
    print(f"geops match: {report.matched:,} of {report.publications:,} publications matched "
          f"({report.pairs:,} pairs) against {report.subscriptions:,} subscriptions with "
          f"{args.strategy} in {report.num_partitions} partitions: {report.items:,} items, "
          f"{report.candidates:,} candidates, build {report.build_seconds:.2f} s, match "
          f"{report.match_seconds:.2f} s; {rejected} features rejected; wrote {args.out}",
          file=sys.stderr)
    return EXIT_REJECTED if rejected else EXIT_OK


def _computed(args: argparse.Namespace, compute: Callable[[], Any]) -> tuple[Any, int]:
    """``compute()``'s report, with unreadable input as a usage error and the rejected
    features printed; the report and how many were rejected."""
    try:
        report = compute()
    except GeoJSONError as exc:
        raise CommandError(str(exc), EXIT_USAGE) from None
    except OSError as exc:
        raise CommandError(f"{exc.filename}: {exc.strerror}", EXIT_USAGE) from None
    _print_rejected(args.subscriptions, report.rejected_subscriptions)
    _print_rejected(args.publications, report.rejected_publications)
    return report, len(report.rejected_subscriptions) + len(report.rejected_publications)


def _run_events(args: argparse.Namespace, log: Callable[[str], None]) -> int:
    report, rejected = _computed(args, lambda: events_files(
        args.subscriptions, args.publications, args.out,
        object_id_field=args.object_id_field or "object_id",
        ttl_ms=round((args.object_ttl or 600.0) * 1000),
        roam_lateness_ms=(ROAM_LATENESS_MS if args.roam_lateness is None
                          else round(args.roam_lateness * 1000)), log=log))
    roaming = (f"{report.roaming_events:,} of {report.roaming_fences:,} roaming fences, "
               f"{report.late:,} positions too late for them; " if report.roaming_fences
               else "")
    print(f"geops match: {report.events:,} events ({report.expired:,} expiries) of "
          f"{report.positions:,} positions among {report.publications:,} publications against "
          f"{report.fences:,} detecting fences of {report.subscriptions:,} subscriptions in "
          f"{report.seconds:.2f} s; {roaming}{report.dropped:,} positions older than their "
          f"object's last dropped; {rejected} features rejected; wrote {args.out}",
          file=sys.stderr)
    return EXIT_REJECTED if rejected else EXIT_OK


def _output_problem(path: str) -> str | None:
    """Why ``path`` cannot be written as the output file, or None when it can (probably)."""
    if os.path.isdir(path):
        return os.strerror(errno.EISDIR)
    parent = os.path.dirname(path) or "."
    if not os.path.exists(parent):
        return f"{os.strerror(errno.ENOENT)} (no directory {parent})"
    if not os.path.isdir(parent):
        return f"{os.strerror(errno.ENOTDIR)} ({parent} is a file)"
    return None


def _print_rejected(path: str, rejected: list[Rejected]) -> None:
    for r in rejected:
        print(f"{path}: rejected {r}", file=sys.stderr)
