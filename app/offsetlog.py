"""The Kafka offset range of a micro-batch, read from the query's checkpoint.

Spark writes a batch's end offsets to ``<checkpoint>/offsets/<batch id>`` before it runs the
batch (a write-ahead log: line 1 ``v1``, line 2 batch metadata, then one line per source with
the offset JSON the source returned). The batch starts where the previous batch ended, or at the
initial offsets the source pinned for a new query.

Why the app reads this instead of the batch DataFrame: the app's tasks read their Kafka ranges
themselves. Executing the Python data source costs Spark about 150-250 ms per input task on top
of the read (measured, see docs/architecture.md), while reading the same range in an RDD task
costs ~20 ms. The offsets and their replay after a crash are still Spark's: the same batch id
always gets the same range.
"""

from __future__ import annotations

import json
from pathlib import Path

from app.source import KafkaRange, load_initial_offsets, ranges


class OffsetLogError(RuntimeError):
    """The checkpoint does not hold the offsets of a batch in the expected form."""


def _offsets(path: Path) -> dict[str, int]:
    try:
        lines = path.read_text().splitlines()
    except FileNotFoundError:
        raise OffsetLogError(f"no offset log entry {path}") from None
    if len(lines) < 3 or not lines[0].startswith("v"):
        raise OffsetLogError(f"{path}: unexpected offset log format")
    try:
        offsets = json.loads(lines[2])
    except json.JSONDecodeError as exc:
        raise OffsetLogError(f"{path}: source offsets are not JSON: {exc}") from None
    if not isinstance(offsets, dict):
        raise OffsetLogError(f"{path}: source offsets are not a partition map")
    return {str(k): int(v) for k, v in offsets.items()}


def initial_offsets_path(checkpoint: str) -> str:
    """Where the source pins the initial offsets of a query with this checkpoint."""
    return str(Path(checkpoint) / "geops-initial-offsets.json")


def batch_end_offsets(checkpoint: str, batch_id: int) -> dict[str, int]:
    """Where batch ``batch_id`` ends: ``{"<partition>": next offset}``, the source's own form.

    Every record before these offsets has been read once the batch completes, so the topic's
    end offsets minus these are the records the app has not processed yet (its consumer lag).
    """
    return _offsets(Path(checkpoint) / "offsets" / str(batch_id))


def batch_ranges(checkpoint: str, topic: str, batch_id: int) -> list[KafkaRange]:
    """The Kafka ranges of batch ``batch_id`` (one per partition that has records)."""
    log = Path(checkpoint) / "offsets"
    end = batch_end_offsets(checkpoint, batch_id)
    if batch_id > 0:
        start = _offsets(log / str(batch_id - 1))
    else:
        start = load_initial_offsets(initial_offsets_path(checkpoint)) or {}
    return ranges(topic, start, end)
