"""`geops tail`: print the records of a topic, decoding any geops schema by its fingerprint."""

from __future__ import annotations

import argparse
import json
import sys
import time

from confluent_kafka import OFFSET_BEGINNING, KafkaError, TopicPartition

import config
from cli.common import positive_duration, positive_int, reachable, settings, topic_name
from cli.errors import CommandError
from cli.render import to_json, to_text
from kafkaio.clients import consumer, denied
from kafkaio.errors import KafkaUnavailable
from kafkaio.offsets import EndOffsets
from schemas import codec
from schemas.errors import DecodeError


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "tail", help="print the records of a topic, one per line",
        description="Decode every record of a topic (any geops schema, identified by its "
                    "fingerprint) and print one line per record. A logical topic name such as "
                    "'control' or 'dead-letter' means the configured topic. Undecodable records "
                    "are printed as lines starting with '!!'.")
    parser.add_argument("--topic", required=True, metavar="T", help="topic or logical name")
    parser.add_argument("--from-beginning", action="store_true",
                        help="start at the oldest record (default: only new records)")
    parser.add_argument("--until-idle", type=positive_duration, metavar="DURATION",
                        help="stop after this long without a new record, e.g. 5s or 500ms "
                             "(a bare number is seconds)")
    parser.add_argument("--max", type=positive_int, metavar="N", help="stop after N records")
    parser.add_argument("--subscription", type=int, metavar="ID",
                        help="only the Match records that notify this subscription (one "
                             "subscriber's view of the matches topic)")
    parser.add_argument("--format", choices=("text", "jsonl"), default="text",
                        help="text (one readable line) or jsonl (one JSON object, the schema's "
                             "field names, geometries as WKT; a geofence event as `geops match "
                             "--events` writes it)")
    config.add_arguments(parser, ["kafka", "state", "topics"])
    parser.set_defaults(func=_tail)


def _tail(args: argparse.Namespace) -> int:
    cfg = settings(args)
    reachable(cfg)
    topic = topic_name(cfg, args.topic)
    try:
        probe = EndOffsets(cfg.kafka_client())
        parts = probe.partitions(topic)
        start = ({p: OFFSET_BEGINNING for p in parts} if args.from_beginning else probe(topic))
        probe.close()
    except KafkaUnavailable as exc:
        raise CommandError(str(exc)) from None
    c = consumer(cfg.kafka_client())
    c.assign([TopicPartition(topic, p, start[p]) for p in parts])
    c_ = codec()
    printed = 0
    last = time.monotonic()
    out = sys.stdout
    try:
        while args.max is None or printed < args.max:
            msgs = c.consume(500, timeout=0.2)
            if not msgs:
                if args.until_idle is not None and time.monotonic() - last >= args.until_idle:
                    break
                continue
            last = time.monotonic()
            for msg in msgs:
                if msg.error() is not None:
                    refused = denied(msg.error(), cfg.kafka_client(), "READ", f"topic '{topic}'")
                    if refused:
                        raise CommandError(refused)
                    if msg.error().code() != KafkaError._PARTITION_EOF:
                        print(f"!! {topic}: {msg.error().str()}", file=sys.stderr)
                    continue
                if args.subscription is not None and not _notifies(c_, msg, args.subscription):
                    continue
                out.write(_line(c_, msg, args.format) + "\n")
                printed += 1
                if args.max is not None and printed >= args.max:
                    break
            out.flush()
    except BrokenPipeError:  # e.g. `geops tail ... | head`
        return 0
    finally:
        c.close()
    return 0


def _notifies(c, msg, subscription: int) -> bool:
    """Whether ``msg`` is a Match record that lists ``subscription``."""
    if msg.value() is None:
        return False
    try:
        name, record = c.decode(msg.value())
    except DecodeError:
        return False
    return name == "Match" and subscription in record["subscription_ids"]


def _line(c, msg, fmt: str) -> str:
    where = f"{msg.topic()}[{msg.partition()}]@{msg.offset()}"
    value = msg.value()
    if value is None:
        key = msg.key().decode(errors="replace") if msg.key() else ""
        if fmt == "jsonl":
            return json.dumps({"_tombstone": True, "key": key, "_where": where})
        return f"tombstone key={key}"
    try:
        name, record = c.decode(value)
    except DecodeError as exc:
        head = bytes(value[:16]).hex(" ")
        if fmt == "jsonl":
            return json.dumps({"_error": str(exc), "_where": where, "_bytes": len(value)})
        return f"!! undecodable record {where}: {exc} ({len(value)} bytes: {head}…)"
    if fmt == "jsonl":
        return json.dumps(to_json(name, record))
    return to_text(name, record)
