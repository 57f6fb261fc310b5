"""Avro single-object encoding for every geops record, so any reader can tell the schema.

Wire format (Avro spec, "Single object encoding"): ``C3 01`` + the 8-byte little-endian
CRC-64-AVRO fingerprint of the writer schema's Parsing Canonical Form + the Avro binary body.
The codec knows every released version of every schema (``schemas/history``), so a record
written by an older producer is read with the current schema through Avro schema resolution.
Timestamps are handled as integer milliseconds in Python; the ``.avsc`` files carry
``timestamp-millis`` for other readers (logical types do not change the fingerprint).
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from importlib.resources.abc import Traversable
from typing import Any

import fastavro
from fastavro.schema import fingerprint, to_parsing_canonical_form

from schemas.errors import DecodeError

# Read through importlib.resources, so the schemas load from a zip too (``geops app`` ships the
# packages to a cluster's executors as one): a Path in a source tree, else a Traversable.
SCHEMA_DIR: Traversable = resources.files(__package__)
HISTORY_DIR = SCHEMA_DIR / "history"
MAGIC = b"\xc3\x01"
HEADER_LEN = len(MAGIC) + 8
_BUFFER = re.compile(r" from <_io\.BytesIO object at 0x[0-9a-f]+>")


def strip_logical(node: Any) -> Any:
    """The schema without logicalType annotations, so timestamps stay plain ints in Python."""
    if isinstance(node, dict):
        out = {k: strip_logical(v) for k, v in node.items() if k != "logicalType"}
        return out["type"] if set(out) == {"type"} and isinstance(out["type"], str) else out
    if isinstance(node, list):
        return [strip_logical(v) for v in node]
    return node


@dataclass(frozen=True)
class SchemaVersion:
    """One version of one schema as the codec uses it."""

    name: str
    version: int
    source: dict[str, Any]
    parsed: Any
    fingerprint: bytes


def _load(name: str, version: int, source: dict[str, Any]) -> SchemaVersion:
    parsed = fastavro.parse_schema(strip_logical(source), _write_hint=False)
    canonical = to_parsing_canonical_form(fastavro.parse_schema(source, _write_hint=False))
    fp = bytes.fromhex(fingerprint(canonical, "CRC-64-AVRO"))  # fastavro gives it little-endian
    return SchemaVersion(name, version, source, parsed, fp)


def canonical_form(source: dict[str, Any]) -> str:
    """Parsing Canonical Form of a schema (what the fingerprint is computed over)."""
    return to_parsing_canonical_form(fastavro.parse_schema(source, _write_hint=False))


def schema_names() -> list[str]:
    """Names of the current schemas (one ``.avsc`` file each in ``schemas/``)."""
    return sorted(p.name.removesuffix(".avsc") for p in SCHEMA_DIR.iterdir()
                  if p.name.endswith(".avsc"))


def read_source(path: Traversable) -> dict[str, Any]:
    return json.loads(path.read_text())


def history(name: str) -> list[SchemaVersion]:
    """Every released version of a schema, oldest first (``history/<Name>.v<N>.avsc``)."""
    def version(path: Traversable) -> int:
        return int(path.name.removesuffix(".avsc").rsplit(".v", 1)[1])

    files = sorted((p for p in HISTORY_DIR.iterdir()
                    if p.name.startswith(f"{name}.v") and p.name.endswith(".avsc")), key=version)
    return [_load(name, version(p), read_source(p)) for p in files]


class Codec:
    """Encodes current-version records and decodes any known version to the current one."""

    def __init__(self) -> None:
        self.current: dict[str, SchemaVersion] = {}
        self.by_fingerprint: dict[bytes, SchemaVersion] = {}
        for name in schema_names():
            self.current[name] = _load(name, 0, read_source(SCHEMA_DIR / f"{name}.avsc"))
            for old in history(name):
                self.by_fingerprint[old.fingerprint] = old
            self.by_fingerprint[self.current[name].fingerprint] = self.current[name]

    def fingerprint(self, name: str) -> bytes:
        return self._schema(name).fingerprint

    def header(self, name: str) -> bytes:
        return MAGIC + self.fingerprint(name)

    def _schema(self, name: str) -> SchemaVersion:
        try:
            return self.current[name]
        except KeyError:
            raise KeyError(f"no schema named {name!r}; known: {', '.join(self.current)}") from None

    def encode(self, name: str, record: dict[str, Any]) -> bytes:
        """Single-object encoding of ``record`` with the current schema ``name``."""
        schema = self._schema(name)
        buf = io.BytesIO()
        buf.write(MAGIC)
        buf.write(schema.fingerprint)
        fastavro.schemaless_writer(buf, schema.parsed, record)
        return buf.getvalue()

    def encode_many(self, name: str, records: list[dict[str, Any]]) -> Iterator[bytes]:
        schema = self._schema(name)
        head = MAGIC + schema.fingerprint
        for record in records:
            buf = io.BytesIO()
            buf.write(head)
            fastavro.schemaless_writer(buf, schema.parsed, record)
            yield buf.getvalue()

    def identify(self, data: bytes | None) -> SchemaVersion:
        """The writer schema of a record, or DecodeError naming what is wrong."""
        if data is None:
            raise DecodeError("empty record (null value)")
        if len(data) < HEADER_LEN or data[:2] != MAGIC:
            raise DecodeError("not Avro single-object encoded (missing C3 01 marker)")
        writer = self.by_fingerprint.get(bytes(data[2:HEADER_LEN]))
        if writer is None:
            raise DecodeError(f"unknown schema fingerprint {bytes(data[2:HEADER_LEN]).hex()}")
        return writer

    def decode(self, data: bytes | None) -> tuple[str, dict[str, Any]]:
        """(schema name, record in the current schema) of a single-object record."""
        writer = self.identify(data)
        reader = self.current[writer.name]
        buf = io.BytesIO(data)
        buf.seek(HEADER_LEN)
        try:
            if writer is reader:
                record = fastavro.schemaless_reader(buf, writer.parsed, None)
            else:
                record = fastavro.schemaless_reader(buf, writer.parsed, reader.parsed)
        except Exception as exc:  # fastavro raises many types on truncated/corrupt bodies
            # some of its messages name the buffer object ("from <_io.BytesIO object at
            # 0x...>"): an address says nothing about the record and differs per read
            said = _BUFFER.sub("", str(exc))
            raise DecodeError(f"corrupt {writer.name} body: {type(exc).__name__}: {said}"
                              ) from None
        if buf.tell() != len(data):
            raise DecodeError(f"{len(data) - buf.tell()} trailing bytes after {writer.name} body")
        return writer.name, record

    def decode_as(self, name: str, data: bytes | None) -> dict[str, Any]:
        """Decode and insist on one schema (any version of it)."""
        got, record = self.decode(data)
        if got != name:
            raise DecodeError(f"expected a {name} record, got {got}")
        return record


@lru_cache(maxsize=1)
def codec() -> Codec:
    """The process-wide codec (schemas are read once)."""
    return Codec()
