"""Backward compatibility of schema versions, checked by real Avro schema resolution.

A new version is backward compatible with an old one when a reader using the new schema can
read every record written with the old one. We check that by writing records that exercise every
branch of the old schema (each union branch, each enum symbol, empty and non-empty arrays) and
resolving them with fastavro against the new schema.
"""

from __future__ import annotations

import io
from typing import Any

import fastavro

from schemas.codec import strip_logical


def _samples(schema: Any, named: dict[str, Any]) -> list[Any]:
    """Values covering every branch of a (logical-type-free) schema."""
    if isinstance(schema, str):
        if schema in named:
            return _samples(named[schema], named)
        return {
            "null": [None], "boolean": [True, False], "int": [0, -7], "long": [0, 2**40],
            "float": [1.5], "double": [2.25], "bytes": [b"", b"\x01\x02"], "string": ["", "x"],
        }[schema]
    if isinstance(schema, list):
        return [v for branch in schema for v in _samples(branch, named)]
    kind = schema["type"]
    if kind in ("record", "enum", "fixed"):
        named[schema["name"]] = schema
        ns = schema.get("namespace")
        if ns:
            named[f"{ns}.{schema['name']}"] = schema
    if kind == "enum":
        return list(schema["symbols"])
    if kind == "fixed":
        return [b"\x00" * schema["size"]]
    if kind == "array":
        items = _samples(schema["items"], named)
        return [[], items]
    if kind == "map":
        return [{}] + [{"k": v} for v in _samples(schema["values"], named)]
    if kind == "record":
        per_field = [(f["name"], _samples(f["type"], named)) for f in schema["fields"]]
        width = max((len(v) for _, v in per_field), default=1)
        return [{name: vals[i % len(vals)] for name, vals in per_field} for i in range(width)]
    return _samples(kind, named)


def backward_problem(old: dict[str, Any], new: dict[str, Any]) -> str | None:
    """Why a reader with ``new`` cannot read records written with ``old``, or None."""
    old_plain, new_plain = strip_logical(old), strip_logical(new)
    writer = fastavro.parse_schema(old_plain, _write_hint=False)
    reader = fastavro.parse_schema(new_plain, _write_hint=False)
    for record in _samples(old_plain, {}):
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, writer, record)
        buf.seek(0)
        try:
            fastavro.schemaless_reader(buf, writer, reader)
        except Exception as exc:  # SchemaResolutionError and friends
            return f"{type(exc).__name__}: {exc}"
    return None
