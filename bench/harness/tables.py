"""Numbers and tables as every benchmark's report prints them: Markdown for the results pages,
plain text for the terminal.

One place for the format, so that the results pages of `geops bench paper`, `live`, `churn`,
`delivery`, `scale` and the studies print a number or a missing value the same way.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from typing import Any

MISSING = "-"  # a value the run did not measure, in the live, churn and delivery reports


def number(value: float | None, spec: str = ",.0f", unit: str = "") -> str:
    """``value`` formatted by ``spec`` (and followed by ``unit``), or ``MISSING`` when there is
    none."""
    return MISSING if value is None else format(value, spec) + unit


def percent(value: float | None) -> str:
    """A signed change, ``+12.3%``, or ``MISSING``."""
    return number(value, "+.1%")


def ratio(value: float | None) -> str:
    """A ratio to two places, or ``MISSING``."""
    return number(value, ".2f")


def cell(value: Any, digits: int = 2) -> str:
    """Any value as a cell of the paper's results tables: an en dash for none or NaN, a float
    to ``digits`` places with thousands separators, anything else as ``str`` gives it."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    return str(value)


def row(cells: Iterable[Any]) -> str:
    """One Markdown table row of already formatted cells."""
    return "| " + " | ".join(str(c) for c in cells) + " |"


def rule(align: str) -> str:
    """The line under a Markdown header: per column ``l`` (left) or ``r`` (right aligned)."""
    return "|" + "".join("---:|" if a == "r" else "---|" for a in align)


def markdown(header: Sequence[str], rows: Iterable[Sequence[Any]],
             align: str | None = None) -> list[str]:
    """A Markdown table's lines: header, rule (left aligned unless ``align`` says), rows."""
    return [row(header), rule(align or "l" * len(header)), *(row(r) for r in rows)]


def of_values(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> list[str]:
    """A Markdown table of raw values, each formatted by ``cell`` (a ``|`` in it escaped), and
    the blank line that ends it: the tables of `geops bench paper`'s results page."""
    return [*markdown(header, ([cell(c).replace("|", "\\|") for c in r] for r in rows)), ""]


def text_table(columns: Sequence[tuple[str, str]], rows: Iterable[Sequence[Any]],
               sep: str = " ") -> list[str]:
    """A plain-text table's lines for a terminal: per column its title and the format spec of
    its values (e.g. ``("ms", "9.1f")``); a title takes its column's width, aligned like the
    values (text left, numbers right, unless the spec says)."""
    titles = [format(title, _title_spec(spec)) for title, spec in columns]
    return [sep.join(titles), *(sep.join(format(value, spec) for value, (_, spec)
                                         in zip(r, columns, strict=True)) for r in rows)]


def _title_spec(spec: str) -> str:
    """The alignment and width of a value's format spec, for its column's title."""
    align, width = re.match(r"([<>^]?)(\d*)", spec).groups()
    return (align or ("<" if spec.endswith("s") else ">")) + width
