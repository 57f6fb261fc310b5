"""`geops publish` and `geops subscribe`: GeoJSON features to Avro records on Kafka.

Each valid feature becomes one record keyed by its id (decimal UTF-8). Invalid features are
reported on stderr by index with the reason and not produced; the exit code is 3 when any were
rejected, so scripts can tell. An Avro container file of the schema's records (as ``geops
generate`` writes) is read instead when the file is one, by its first bytes.

Subscriptions are read, checked and encoded in bulk (``geops.geojson_geoms``,
``schemas.bulk_encoder``): a million load in well under a minute (``geops bench load``).
"""

from __future__ import annotations

import argparse
import math
import sys

import config
from cli.common import CommandError, reachable, settings
from cli.progress import Progress
from config.exitcodes import EXIT_REJECTED
from geops.avro_input import is_avro, read_publications_avro, read_subscriptions_avro
from geops.geojson import (
    GeoJSONError,
    Rejected,
    read_ids,
    read_publications,
    read_subscriptions,
)
from kafkaio.clients import KafkaUnavailable
from kafkaio.retry import KafkaOutage
from kafkaio.sender import Sender, produce_encoded, produce_records
from schemas.bulk_encoder import encode_subscriptions
from schemas.records import (
    MISSING_TIME,
    publication_records,
    subscription_records,  # noqa: F401 (bench/live/deployment.py's import)
)

INPUT_HELP = ("GeoJSON FeatureCollection, or an Avro container file of the schema's records "
              "(as geops generate writes: quicker to read)")


def register(sub: argparse._SubParsersAction) -> None:
    pub = sub.add_parser(
        "publish", help="produce publications from a GeoJSON file",
        description="Produce each feature of a GeoJSON FeatureCollection as an Avro "
                    "Publication keyed by properties.id. properties.event_time (epoch ms) is "
                    "used when present, otherwise the time of sending.")
    pub.add_argument("--file", required=True, metavar="F", help=INPUT_HELP)
    pub.add_argument("--topic", metavar="T", help="topic (default: the publications topic)")
    pub.add_argument("--rate", type=_rate, metavar="N", help="at most N records per second")
    pub.add_argument("--event-time", choices=("file", "now"), default="file",
                     help="file: properties.event_time when present, else the time of sending "
                          "(default); now: always the time of sending (replaying old data)")
    config.add_arguments(pub, ["kafka", "state", "topics"])
    pub.set_defaults(func=_publish)

    subs = sub.add_parser(
        "subscribe", help="produce subscriptions from a GeoJSON file",
        description="Produce each feature of a GeoJSON FeatureCollection as an Avro "
                    "Subscription keyed by properties.id, with properties.relation "
                    "(case-insensitive) as its relation.")
    subs.add_argument("--file", required=True, metavar="F", help=INPUT_HELP)
    subs.add_argument("--topic", metavar="T", help="topic (default: the subscriptions topic)")
    subs.add_argument("--rate", type=_rate, metavar="N", help="at most N records per second")
    config.add_arguments(subs, ["kafka", "state", "topics"])
    subs.set_defaults(func=_subscribe)

    unsub = sub.add_parser(
        "unsubscribe", help="remove subscriptions by id (tombstones on the compacted topic)",
        description="Write a tombstone (a record with the id as key and no value) for each "
                    "subscription id: a running app stops matching it from its next batch, "
                    "and compaction removes it from the topic.")
    unsub.add_argument("--id", type=_subscription_id, action="append", default=[],
                       metavar="N", help="a subscription id (repeat for several)")
    unsub.add_argument("--file", metavar="F",
                       help="a GeoJSON FeatureCollection: the properties.id of every feature")
    unsub.add_argument("--topic", metavar="T", help="topic (default: the subscriptions topic)")
    config.add_arguments(unsub, ["kafka", "state", "topics"])
    unsub.set_defaults(func=_unsubscribe)


def _rate(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"must be a finite number above zero, got {text!r}")
    return value


def _read_error(path: str, exc: OSError) -> CommandError:
    """A file that exists but cannot be read as GeoJSON (a directory, no permission, ...)."""
    return CommandError(f"{path}: cannot read: {exc.strerror or exc}", 2)


def _report(rejected: list[Rejected], path: str) -> None:
    for r in rejected:
        print(f"{path}: rejected {r}", file=sys.stderr)


def _produce(args: argparse.Namespace, cfg: config.Config, logical: str, name: str,
             records: list[dict] | tuple[list[bytes], list[bytes]],
             rejected: list[Rejected]) -> int:
    """Report the rejected features, produce the rest, print the count; the exit code.

    ``records`` are dicts of schema ``name``, or (keys, values) already encoded."""
    _report(rejected, args.file)
    reachable(cfg)
    topic = args.topic or cfg.topic(logical)
    count = len(records[1]) if isinstance(records, tuple) else len(records)
    progress = Progress(count, logical)
    try:
        if isinstance(records, tuple):
            produce_encoded(cfg.kafka_client(), topic, *records, args.rate, progress.update,
                            outage_limit=cfg["kafka.outage_limit"])
        else:
            produce_records(cfg.kafka_client(), topic, name, records, args.rate,
                            progress.update, outage_limit=cfg["kafka.outage_limit"])
    except KafkaOutage as exc:
        raise CommandError(str(exc), exc.exit_code) from None
    except KafkaUnavailable as exc:
        raise CommandError(str(exc)) from None
    finally:
        progress.close()
    print(f"produced {count} {logical} to {topic}; rejected {len(rejected)}")
    return EXIT_REJECTED if rejected else 0


def _publish(args: argparse.Namespace) -> int:
    cfg = settings(args)
    try:
        if is_avro(args.file):
            pubs, _, rejected = read_publications_avro(args.file)
        else:
            pubs, _, rejected = read_publications(args.file, default_event_time=MISSING_TIME)
    except GeoJSONError as exc:
        raise CommandError(str(exc), 2) from None
    except OSError as exc:
        raise _read_error(args.file, exc) from None
    if args.event_time == "now":
        pubs.event_time[:] = MISSING_TIME
    return _produce(args, cfg, "publications", "Publication", list(publication_records(pubs)),
                    rejected)


def _subscription_id(text: str) -> int:
    """argparse type: a subscription id (a 64-bit integer)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer id, got {text!r}") from None
    if not -(2**63) <= value < 2**63:
        raise argparse.ArgumentTypeError(f"id {text} does not fit in 64 bits")
    return value


def _unsubscribe(args: argparse.Namespace) -> int:
    cfg = settings(args)
    ids = list(args.id)
    rejected: list[Rejected] = []
    if args.file:
        try:
            from_file, rejected = read_ids(args.file)
        except GeoJSONError as exc:
            raise CommandError(str(exc), 2) from None
        except OSError as exc:
            raise _read_error(args.file, exc) from None
        ids.extend(from_file)
        _report(rejected, args.file)
    if not ids:
        raise CommandError("nothing to unsubscribe: give --id N (repeatable) or --file F", 2)
    reachable(cfg)
    topic = args.topic or cfg.topic("subscriptions")
    sender = Sender(cfg.kafka_client(), outage_limit=cfg["kafka.outage_limit"])
    try:
        for sid in dict.fromkeys(ids):
            sender.send(topic, None, key=str(sid).encode())
        sender.close()
    except KafkaOutage as exc:
        raise CommandError(str(exc), exc.exit_code) from None
    except KafkaUnavailable as exc:
        raise CommandError(str(exc)) from None
    print(f"unsubscribed {len(dict.fromkeys(ids))} subscriptions (tombstones on {topic}); "
          f"rejected {len(rejected)}")
    return EXIT_REJECTED if rejected else 0


def _subscribe(args: argparse.Namespace) -> int:
    cfg = settings(args)
    try:
        subs, _, rejected = (read_subscriptions_avro if is_avro(args.file)
                             else read_subscriptions)(args.file)
    except GeoJSONError as exc:
        raise CommandError(str(exc), 2) from None
    except OSError as exc:
        raise _read_error(args.file, exc) from None
    keys = [str(sid).encode() for sid in subs.ids.tolist()]
    return _produce(args, cfg, "subscriptions", "Subscription",
                    (keys, encode_subscriptions(subs)), rejected)
