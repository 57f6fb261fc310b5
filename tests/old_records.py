"""Records as an older released version of their schema wrote them (``schemas/history``), for
tests that a current reader still takes them."""

from __future__ import annotations

import io
from typing import Any

import fastavro

from schemas.codec import MAGIC, history


def written_by(name: str, version: int, record: dict[str, Any]) -> bytes:
    """``record`` single-object encoded with version ``version`` of schema ``name``."""
    old = next(v for v in history(name) if v.version == version)
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, old.parsed, record)
    return MAGIC + old.fingerprint + buf.getvalue()
