"""Shape checks for the metrics records the distributor reads (decoded Avro, as dicts).

Only the fields the distributor uses are checked, against the types the schemas declare
(``long``/``int`` -> Python int, never bool). A failed check returns a reason instead of
raising, so one bad record never stops the service.
"""

from __future__ import annotations

from typing import Any

# (field, type, smallest allowed value or None); every field listed here is required.
_LOAD_FIELDS = (
    ("app_id", str, None),
    ("batch_id", int, 0),
    ("epoch", int, 0),
    ("partition", int, None),
    ("worker", int, None),
    ("items", int, 0),
    ("processing_ns", int, 0),
    ("time", int, None),
)
_LOAD_OPTIONAL = (("static_bytes", int, 0),)
_BATCH_FIELDS = (
    ("app_id", str, None),
    ("batch_id", int, 0),
    ("epoch", int, 0),
    ("workers", int, 1),
    ("partitions", int, 1),
)


def _field_problem(record: dict, name: str, kind: type, low: int | None) -> str | None:
    value = record[name]
    if isinstance(value, bool) or not isinstance(value, kind):
        return f"field {name!r} is {type(value).__name__} {value!r:.40}, expected {kind.__name__}"
    if low is not None and value < low:
        return f"field {name!r} is {value}, expected >= {low}"
    return None


def _problem(record: Any, required: tuple, optional: tuple = ()) -> str | None:
    if not isinstance(record, dict):
        return f"expected a record (dict), got {type(record).__name__}"
    missing = [name for name, _, _ in required if name not in record]
    if missing:
        return f"missing field(s) {', '.join(missing)}"
    for name, kind, low in required:
        problem = _field_problem(record, name, kind, low)
        if problem:
            return problem
    for name, kind, low in optional:
        if name in record:
            problem = _field_problem(record, name, kind, low)
            if problem:
                return problem
    return None


def load_problem(record: Any) -> str | None:
    """Why a PartitionLoad record is malformed, or None when its fields are usable."""
    return _problem(record, _LOAD_FIELDS, _LOAD_OPTIONAL)


def batch_problem(summary: Any) -> str | None:
    """Why a BatchSummary record is malformed, or None when its fields are usable."""
    return _problem(summary, _BATCH_FIELDS)
