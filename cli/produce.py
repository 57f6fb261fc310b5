"""`geops publish` and `geops subscribe`: GeoJSON features to Avro records on Kafka.

Each valid feature becomes one record keyed by its id (decimal UTF-8), or a moving object's
position by its object id (``kafkaio.sender.record_key``). Invalid features are reported on
stderr by index with the reason and not produced; the exit code is 3 when any were rejected,
so scripts can tell. An Avro container file of the schema's records (as ``geops generate``
writes) is read instead when the file is one, by its first bytes.

A publication with an object id (``--object-id-field``) is a position of a moving object and
carries it in ``Publication.object_id``; it is keyed by the object id, so that one object's
positions stay in one topic partition, in the order they were published. A subscription's
``detect`` kinds and ``distance_m`` (properties, or ``--detect`` / ``--distance-m`` for the
features without them) go into its record; a distance that makes no fence
(``geops.fences.fence_problems``) is rejected like an invalid feature.

Subscriptions are read, checked and encoded in bulk (``geops.geojson_geoms``,
``schemas.bulk_encoder``): a million load in well under a minute (``geops bench load``).
"""

from __future__ import annotations

import argparse
import math
import sys

import numpy as np

import config
from cli.common import reachable, settings
from cli.errors import CommandError
from cli.progress import Progress
from config.exitcodes import EXIT_REJECTED
from geops.avro_input import is_avro, read_fences_avro, read_positions_avro
from geops.errors import GeoJSONError
from geops.fences import fence_problems
from geops.geojson import Rejected, read_fences, read_ids, read_positions
from geops.model import DetectKind, Subscriptions
from kafkaio.sender import Sender, produce_encoded, produce_records
from schemas.bulk_encoder import encode_subscriptions
from schemas.records import MISSING_TIME, publication_records

INPUT_HELP = ("GeoJSON FeatureCollection, or an Avro container file of the schema's records "
              "(as geops generate writes: quicker to read)")


def register(sub: argparse._SubParsersAction) -> None:
    pub = sub.add_parser(
        "publish", help="produce publications from a GeoJSON file",
        description="Produce each feature of a GeoJSON FeatureCollection as an Avro "
                    "Publication keyed by properties.id, or by its object id when it is a "
                    "moving object's position (so that object's positions stay in order). "
                    "properties.event_time (epoch ms) is used when present, otherwise the time "
                    "of sending.")
    pub.add_argument("--file", required=True, metavar="F", help=INPUT_HELP)
    pub.add_argument("--topic", metavar="T", help="topic (default: the publications topic)")
    pub.add_argument("--rate", type=_rate, metavar="N", help="at most N records per second")
    pub.add_argument("--event-time", choices=("file", "now"), default="file",
                     help="file: properties.event_time when present, else the time of sending "
                          "(default); now: always the time of sending (replaying old data)")
    pub.add_argument("--object-id-field", default="object_id", metavar="NAME",
                     help="the property holding a moving object's id (a non-empty string or "
                          "an integer; default object_id): a publication that has one is a "
                          "position of that object (an Avro file carries object_id itself)")
    config.add_arguments(pub, ["kafka", "state", "topics"])
    pub.set_defaults(func=_publish)

    subs = sub.add_parser(
        "subscribe", help="produce subscriptions from a GeoJSON file",
        description="Produce each feature of a GeoJSON FeatureCollection as an Avro "
                    "Subscription keyed by properties.id, with properties.relation "
                    "(case-insensitive) as its relation, and properties.detect, "
                    "properties.distance_m (a fence for geofence events) and properties.roam "
                    "(a roaming fence: {\"distance_m\": metres, \"match\": glob of object "
                    "ids}) when present.")
    subs.add_argument("--file", required=True, metavar="F", help=INPUT_HELP)
    subs.add_argument("--detect", type=_detect_kinds, metavar="KINDS",
                      help=f"detect kinds (comma-separated: {DetectKind.choices()}) for the "
                           "features without properties.detect")
    subs.add_argument("--distance-m", type=_distance_m, metavar="M",
                      help="a fence of M metres around the geometry (on the ellipsoid) for the "
                           "features without properties.distance_m; needs detect kinds")
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


def _detect_kinds(text: str) -> int:
    """argparse type: detect kinds, comma-separated (a bit mask of ``DetectKind``)."""
    try:
        mask = DetectKind.parse(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{exc}; got {text!r}") from None
    if not mask:
        raise argparse.ArgumentTypeError(f"expected at least one of {DetectKind.choices()}, "
                                         f"got {text!r}")
    return mask


def _distance_m(text: str) -> float:
    """argparse type: a distance in metres, finite and above zero."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"expected a finite number of metres above zero, got "
                                         f"{text!r}")
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
                            outage_limit=cfg.view.kafka.outage_limit)
        else:
            produce_records(cfg.kafka_client(), topic, name, records, args.rate,
                            progress.update, outage_limit=cfg.view.kafka.outage_limit)
    finally:  # a KafkaUnavailable goes on to the command's one line and exit code
        progress.close()
    print(f"produced {count} {logical} to {topic}; rejected {len(rejected)}")
    return EXIT_REJECTED if rejected else 0


def _publish(args: argparse.Namespace) -> int:
    cfg = settings(args)
    try:
        if is_avro(args.file):
            pubs, objects, _, rejected = read_positions_avro(args.file)
        else:
            pubs, objects, _, rejected = read_positions(args.file, args.object_id_field,
                                                        default_event_time=MISSING_TIME)
    except GeoJSONError as exc:
        raise CommandError(str(exc), 2) from None
    except OSError as exc:
        raise _read_error(args.file, exc) from None
    if args.event_time == "now":
        pubs.event_time[:] = MISSING_TIME
    return _produce(args, cfg, "publications", "Publication",
                    list(publication_records(pubs, objects)), rejected)


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
    sender = Sender(cfg.kafka_client(), outage_limit=cfg.view.kafka.outage_limit)
    for sid in dict.fromkeys(ids):
        sender.send(topic, None, key=str(sid).encode())
    sender.close()
    print(f"unsubscribed {len(dict.fromkeys(ids))} subscriptions (tombstones on {topic}); "
          f"rejected {len(rejected)}")
    return EXIT_REJECTED if rejected else 0


def _subscribe(args: argparse.Namespace) -> int:
    cfg = settings(args)
    defaults = {name: value for name, value in (("detect", args.detect),
                                                 ("distance_m", args.distance_m))
                if value is not None}
    try:
        if is_avro(args.file):
            subs, detect, distance, rows, rejected, roams = read_fences_avro(args.file,
                                                                             defaults)
        else:
            if "detect" in defaults:
                defaults["detect"] = DetectKind.names(defaults["detect"])
            subs, detect, distance, rows, rejected, roams = read_fences(args.file,
                                                                        defaults=defaults)
    except GeoJSONError as exc:
        raise CommandError(str(exc), 2) from None
    except OSError as exc:
        raise _read_error(args.file, exc) from None
    kept, refused = refuse_bad_fences(subs, detect, distance, rows,
                                      "record" if is_avro(args.file) else "feature")
    subs, detect, distance = subs.take(kept), detect[kept], distance[kept]
    keys = [str(sid).encode() for sid in subs.ids.tolist()]
    return _produce(args, cfg, "subscriptions", "Subscription",
                    (keys, encode_subscriptions(subs, detect, distance,
                                                [roams[k] for k in kept.tolist()])),
                    sorted(rejected + refused, key=lambda r: r.index))


def refuse_bad_fences(subs: Subscriptions, detect: np.ndarray, distance: np.ndarray,
                      rows: list[int], what: str = "feature") -> tuple[np.ndarray, list[Rejected]]:
    """The rows to keep: the subscriptions whose distance makes no fence (without detect kinds,
    near a pole, across the antimeridian, too large: ``geops.fences.fence_problems``) are
    left out, each rejected by its feature index (``rows``) with the reason naming it."""
    everything = np.arange(len(subs))
    if np.isnan(distance).all():
        return everything, []
    problems = fence_problems(subs.ids, subs.geoms, detect, distance)
    bad = [i for i, problem in enumerate(problems) if problem]
    refused = [Rejected(rows[i], problems[i], what) for i in bad]
    return np.setdiff1d(everything, bad), refused
