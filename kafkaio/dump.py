"""Decoding a whole topic (as of now) into records, for tools, benchmarks and tests."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from kafkaio.offsets import read_to_end
from schemas import DecodeError, codec


def decoded(client_conf: Mapping[str, str], topic: str
            ) -> Iterator[tuple[str, dict[str, Any]]]:
    """(schema name, record) for every decodable record; tombstones and bad bytes skipped."""
    c = codec()
    for msg in read_to_end(client_conf, topic):
        if msg.value() is None:
            continue
        try:
            yield c.decode(msg.value())
        except DecodeError:
            continue


def by_schema(client_conf: Mapping[str, str], topic: str) -> dict[str, list[dict[str, Any]]]:
    """The records of a topic grouped by schema name, in offset order per partition."""
    out: dict[str, list[dict[str, Any]]] = {}
    for name, record in decoded(client_conf, topic):
        out.setdefault(name, []).append(record)
    return out
