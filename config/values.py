"""Single setting values: parsers that turn what a user typed into a typed value, and checks that
reject values out of range, each with a message that shows the offending value."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

# The longest duration any setting takes: longer ones are surely typos, and they would overflow
# the millisecond longs of Spark's trigger and the timeouts of threading waits.
MAX_DURATION_S = 366 * 24 * 3600.0


def parse_duration(text: str | float | int) -> float:
    """Seconds from '500ms', '10s', '2m', '1h' or a bare number of seconds (at most a year)."""
    if isinstance(text, bool):
        raise ValueError(f"expected a duration such as 500ms or 10s, got {text!r}")
    if isinstance(text, int | float):
        if not text >= 0:
            raise ValueError(f"a duration cannot be negative: {text!r}")
        seconds = float(text)
    else:
        m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*", str(text))
        if not m:
            raise ValueError(f"expected a duration such as 500ms or 10s, got {text!r}")
        scale = {"ms": 0.001, "s": 1.0, None: 1.0, "m": 60.0, "h": 3600.0}[m.group(2)]
        seconds = float(m.group(1)) * scale
    if seconds > MAX_DURATION_S:
        raise ValueError(f"a duration must be at most 366 days ({MAX_DURATION_S:.0f} s), got "
                         f"{text!r}")
    return seconds


def parse_int(text: Any) -> int:
    """An integer, from an int or its decimal text (not a bool, which TOML keeps apart)."""
    if isinstance(text, bool):
        raise ValueError(f"expected an integer, got {text!r}")
    if isinstance(text, int):
        return text
    try:
        return int(str(text).strip())
    except ValueError:
        raise ValueError(f"expected an integer, got {text!r}") from None


def parse_float(text: Any) -> float:
    """A finite number: NaN and infinities would defeat every later comparison."""
    if isinstance(text, bool):
        raise ValueError(f"expected a number, got {text!r}")
    try:
        value = float(text)
    except (TypeError, ValueError):
        raise ValueError(f"expected a number, got {text!r}") from None
    if value != value or value in (float("inf"), float("-inf")):
        raise ValueError(f"expected a finite number, got {text!r}")
    return value


def parse_str(text: Any) -> str:
    """A string as given: a TOML number or table where text belongs is an error."""
    if not isinstance(text, str):
        raise ValueError(f"expected a string, got {text!r}")
    return text


def parse_memory(text: Any) -> str:
    """A JVM memory size such as 4g, 512m or 0: digits and a unit k, m, g or t."""
    m = re.fullmatch(r"\s*(\d+)\s*([kmgt])?b?\s*", str(text), re.IGNORECASE)
    if isinstance(text, bool) or not m or (m.group(2) is None and int(m.group(1)) != 0):
        raise ValueError(f"expected a memory size such as 4g or 512m, got {text!r}")
    return f"{int(m.group(1))}{(m.group(2) or '').lower()}"


def parse_bytes(text: Any) -> int:
    """A size in bytes written as a memory size (4m, 512k, 0)."""
    size = parse_memory(text)
    unit = size[-1] if size[-1].isalpha() else ""
    return int(size.rstrip("kmgt")) << {"": 0, "k": 10, "m": 20, "g": 30, "t": 40}[unit]


def parse_optional_memory(text: Any) -> str:
    """A JVM memory size, or empty for Spark's own default."""
    return "" if isinstance(text, str) and not text.strip() else parse_memory(text)


def positive(value: Any) -> None:
    """Reject zero and negative values."""
    if not value > 0:
        raise ValueError(f"must be positive, got {value}")


def at_least(low: float) -> Callable[[Any], None]:
    """A check rejecting values below ``low``."""
    def check(value: Any) -> None:
        if value < low:
            raise ValueError(f"must be at least {low}, got {value}")

    return check


def between(low: int, high: int) -> Callable[[Any], None]:
    """A check rejecting values outside ``low``..``high``, naming the bound that was crossed."""
    def check(value: Any) -> None:
        if value < low:
            raise ValueError(f"must be at least {low}, got {value}")
        if value > high:
            raise ValueError(f"must be at most {high}, got {value}")

    return check


def seconds_between(low: float, high: float) -> Callable[[Any], None]:
    """A check rejecting durations outside ``low``..``high`` seconds."""
    def check(value: Any) -> None:
        if not low <= value <= high:
            raise ValueError(f"must be between {low:g} s and {high:g} s, got {value:g} s")

    return check


def nonempty(value: Any) -> None:
    """Reject empty and blank text."""
    if not str(value).strip():
        raise ValueError("must not be empty")


def positive_memory(value: str) -> None:
    """Reject a memory size of zero (an empty one means the default and passes)."""
    if value and int(re.match(r"\d+", value).group()) == 0:
        raise ValueError(f"must be above zero, got {value}")


def kafka_topic_name(name: Any) -> None:
    """Kafka's rule for topic names: 1..249 of ASCII letters, digits, '.', '_' and '-'."""
    if not re.fullmatch(r"[A-Za-z0-9._-]{1,249}", name) or name in (".", ".."):
        raise ValueError(f"a Kafka topic name is 1 to 249 of the characters a-z, A-Z, 0-9, "
                         f"'.', '_' and '-' (not '.' or '..'), got {name!r}")
