"""Decoding Kafka messages into geops records: what a consumer delivers as it comes, or a whole
topic as of now, for tools, benchmarks and tests."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from confluent_kafka import Message

from kafkaio.offsets import read_to_end
from schemas import codec
from schemas.errors import DecodeError


def decoded_messages(msgs: Iterable[Message]) -> Iterator[tuple[Message, str, dict[str, Any]]]:
    """(message, schema name, record) of every decodable record among ``msgs``, e.g. one
    ``consume`` call's; error events, tombstones and bad bytes are skipped, as a reader that only
    wants the records does."""
    dec = codec()
    for msg in msgs:
        if msg.error() is not None or msg.value() is None:
            continue
        try:
            name, record = dec.decode(msg.value())
        except DecodeError:
            continue
        yield msg, name, record


def decoded_records(msgs: Iterable[Message]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(schema name, record) of every decodable record among ``msgs`` (``decoded_messages``)."""
    for _, name, record in decoded_messages(msgs):
        yield name, record


def by_schema(client_conf: Mapping[str, str], topic: str) -> dict[str, list[dict[str, Any]]]:
    """The decodable records of a topic as of now, grouped by schema name, in offset order per
    partition."""
    out: dict[str, list[dict[str, Any]]] = {}
    for name, record in decoded_records(read_to_end(client_conf, topic)):
        out.setdefault(name, []).append(record)
    return out
