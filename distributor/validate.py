"""Shape checks for the metrics records the distributor reads (decoded Avro, as dicts).

Only the fields the distributor uses are checked, against the types the schemas declare: Avro
``int`` and ``long`` are Python ints (never bool) within 32 and 64 bits, so whatever the engine
passes on (an epoch into its status and commands) encodes again. A failed check returns a reason
instead of raising, so one bad record never stops the service.
"""

from __future__ import annotations

from typing import Any

# Avro type -> (Python type, largest magnitude as a power of two, or None)
_AVRO = {"string": (str, None), "int": (int, 31), "long": (int, 63)}

# (field, Avro type, smallest allowed value or None); every field listed here is required.
_LOAD_FIELDS = (
    ("app_id", "string", None),
    ("batch_id", "long", 0),
    ("epoch", "long", 0),
    ("partition", "int", None),
    ("worker", "int", None),
    ("items", "long", 0),
    ("processing_ns", "long", 0),
    ("time", "long", None),
)
_LOAD_OPTIONAL = (("static_bytes", "long", 0),)
_MOVE_FIELDS = (
    ("app_id", "string", None),
    ("epoch", "long", 0),
    ("bytes", "long", 0),
)
_BATCH_FIELDS = (
    ("app_id", "string", None),
    ("batch_id", "long", 0),
    ("epoch", "long", 0),
    ("workers", "int", 1),
    ("partitions", "int", 1),
)


def _field_problem(record: dict, name: str, avro: str, low: int | None) -> str | None:
    value = record[name]
    kind, bits = _AVRO[avro]
    if isinstance(value, bool) or not isinstance(value, kind):
        return f"field {name!r} is {type(value).__name__} {value!r:.40}, expected {avro}"
    if bits is not None and not -(2**bits) <= value < 2**bits:
        return f"field {name!r} is {value}, out of the range of an Avro {avro}"
    if low is not None and value < low:
        return f"field {name!r} is {value}, expected >= {low}"
    return None


def _problem(record: Any, required: tuple, optional: tuple = ()) -> str | None:
    if not isinstance(record, dict):
        return f"expected a record (dict), got {type(record).__name__}"
    missing = [name for name, _, _ in required if name not in record]
    if missing:
        return f"missing field(s) {', '.join(missing)}"
    for name, avro, low in required:
        problem = _field_problem(record, name, avro, low)
        if problem:
            return problem
    for name, avro, low in optional:
        if name in record:
            problem = _field_problem(record, name, avro, low)
            if problem:
                return problem
    return None


def load_problem(record: Any) -> str | None:
    """Why a PartitionLoad record is malformed, or None when its fields are usable."""
    return _problem(record, _LOAD_FIELDS, _LOAD_OPTIONAL)


def batch_problem(summary: Any) -> str | None:
    """Why a BatchSummary record is malformed, or None when its fields are usable."""
    return _problem(summary, _BATCH_FIELDS)


def move_problem(report: Any) -> str | None:
    """Why a MoveReport record is malformed, or None when its fields are usable."""
    problem = _problem(report, _MOVE_FIELDS)
    if problem:
        return problem
    moved = report.get("partitions_moved")
    if not isinstance(moved, list) or any(isinstance(p, bool) or not isinstance(p, int)
                                          for p in moved):
        return f"field 'partitions_moved' is {moved!r:.40}, expected a list of int"
    duration = report.get("duration_ms")
    if isinstance(duration, bool) or not isinstance(duration, int | float) or not (
            0 <= duration < float("inf")):
        return f"field 'duration_ms' is {duration!r:.40}, expected a finite double >= 0"
    return None
