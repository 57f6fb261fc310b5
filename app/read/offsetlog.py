"""A micro-batch's Kafka offsets as Spark recorded them in the query's checkpoint.

Spark writes a batch's end offsets to ``<checkpoint>/offsets/<batch id>`` before it runs the
batch (a write-ahead log: line 1 ``v1``, line 2 batch metadata, then one line per source with
the offsets the source returned; Spark's Kafka connector writes ``{"<topic>": {"<partition>":
next offset}}``). A batch starts where the previous batch ended, or, for the query's first
batch, at the offsets the connector chose when the query started (``sources/0/0``). The same
batch id always gets the same offsets, also when it is replayed after a crash.
"""

from __future__ import annotations

import json
from pathlib import Path

from app.errors import OffsetLogError


def _parse(path: Path, text: str) -> dict[str, int]:
    try:
        offsets = json.loads(text)
    except json.JSONDecodeError as exc:
        raise OffsetLogError(f"{path}: source offsets are not JSON: {exc}") from None
    if not isinstance(offsets, dict) or not all(isinstance(v, dict) for v in offsets.values()):
        raise OffsetLogError(f"{path}: source offsets are not a topic -> partition map")
    if len(offsets) > 1:
        raise OffsetLogError(f"{path}: offsets of {len(offsets)} topics; the app reads one")
    return {str(p): int(o) for part in offsets.values() for p, o in part.items()}


def _offsets(path: Path) -> dict[str, int]:
    try:
        lines = path.read_text().splitlines()
    except FileNotFoundError:
        raise OffsetLogError(f"no offset log entry {path}") from None
    if len(lines) < 3 or not lines[0].startswith("v"):
        raise OffsetLogError(f"{path}: unexpected offset log format")
    return _parse(path, lines[2])


def batch_end_offsets(checkpoint: str, batch_id: int) -> dict[str, int]:
    """Where batch ``batch_id`` ends: ``{"<partition>": next offset}``.

    Every record before these offsets has been read once the batch completes, so the topic's
    end offsets minus these are the records the app has not processed yet (its consumer lag).
    """
    return _offsets(Path(checkpoint) / "offsets" / str(batch_id))


def batch_start_offsets(checkpoint: str, batch_id: int) -> dict[str, int]:
    """Where batch ``batch_id`` starts: the previous batch's end, or the query's initial offsets
    (``{}`` when Spark has not recorded them)."""
    if batch_id > 0:
        return batch_end_offsets(checkpoint, batch_id - 1)
    path = Path(checkpoint) / "sources" / "0" / "0"
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return {}
    # The connector writes a version byte or line before the JSON; the JSON is the last line.
    text = raw.decode("utf-8", "replace").strip().splitlines()
    return _parse(path, text[-1].lstrip("\x00")) if text else {}


def lost_ranges(start: dict[str, int], end: dict[str, int]) -> list[tuple[int, int, int]]:
    """(partition, end, start) of each partition whose planned end is below its start: the log
    came back shorter (deleted and created again, truncated) and the connector skipped it."""
    return sorted((int(p), e, start[p]) for p, e in end.items() if p in start and e < start[p])


def last_committed(checkpoint: str) -> int | None:
    """The newest batch id Spark committed in the checkpoint (``commits/<id>``), if any."""
    try:
        ids = [int(f.name) for f in (Path(checkpoint) / "commits").iterdir() if f.name.isdigit()]
    except FileNotFoundError:
        return None
    return max(ids, default=None)
