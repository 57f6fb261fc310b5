"""CSV tables on disk as rows: reading them (plain, gzipped or stored in parts), writing and
appending them, and their cells as numbers.

A table ``name.csv`` may be stored compressed as ``name.csv.gz`` or ``name.csv.xz`` (the
benchmarks write ``.gz``; the tables kept in ``docs/results`` are recompressed with
``xz -9e``, which makes them about a third smaller), and one too large for a single file of
the tree (over 2 MB compressed) in parts ``name.part-1.csv.xz``, ``name.part-2.csv.xz``, ...
(or ``.gz``), each with the header. Reading ``name.csv`` reads ``name.csv.gz``, then
``name.csv.xz``, then the parts in order, then ``name.csv``: the benchmarks append the rows of
new runs to a plain ``name.csv``, so a resumed directory holds its older rows compressed and
the newer ones beside them. Never keep a decompressed copy next to its compressed one: its
rows would be read twice.

A path whose name ends in ``.gz`` is written and read gzipped (with no time in the header, so
the same rows give the same bytes), one ending in ``.xz`` xz-compressed (a minute of every
publication's latency stays well under the 2 MB a file of the tree may hold).
"""

from __future__ import annotations

import csv
import gzip
import io
import lzma
import shutil
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

Row = dict[str, str]


PACKED = (".gz", ".xz")


def stored(path: Path) -> list[Path]:
    """The files that hold the table ``path`` names: ``<path>.gz``, ``<path>.xz``, its parts,
    then ``path``; those that exist."""
    path = Path(path)
    parts = sorted((p for ext in PACKED
                    for p in path.parent.glob(f"{path.stem}.part-*{path.suffix}{ext}")),
                   key=lambda p: int(p.name.split(".part-")[1].split(".")[0]))
    packed = [path.with_name(path.name + ext) for ext in PACKED]
    return [p for p in (*packed, *parts, path) if p.exists()]


def gzip_beside(path: Path) -> Path:
    """``path`` gzipped beside itself, the plain file removed (how ``docs/results`` stores a
    large table; reading ``path`` reads the ``.gz``)."""
    packed = path.with_name(path.name + ".gz")
    with open(path, "rb") as src, gzip.GzipFile(packed, "wb", mtime=0) as dst:
        shutil.copyfileobj(src, dst)
    path.unlink()
    return packed


def _open(path: Path, mode: str = "r") -> IO[str]:
    """``path`` as text in ``mode`` (r, w or a), compressed as its name says."""
    if path.name.endswith(".gz"):
        packed = gzip.GzipFile(path, mode + "b", mtime=0)
        return io.TextIOWrapper(packed, encoding="utf-8", newline="")
    if path.name.endswith(".xz"):
        return lzma.open(path, mode + "t", newline="", preset=None if mode == "r" else 9)
    return open(path, mode, newline="")


def iter_rows(path: Path, run_ids: Collection[str] | None = None) -> Iterator[Row]:
    """Every row of the table ``path`` (see the module's note on compressed tables) as a dict of
    strings, streamed; only the rows of ``run_ids`` when given (tested before a row becomes a
    dict, which matters for the 40 MB tables). Nothing when no file holds the table."""
    for part in stored(path):
        with _open(part) as fh:
            reader = csv.reader(fh)
            header = next(reader, None)
            if header is None:
                continue
            col = None if run_ids is None else header.index("run_id")
            for values in reader:
                if values and (col is None or values[col] in run_ids):
                    yield dict(zip(header, values, strict=True))


def read_rows(path: Path) -> list[Row]:
    """Every row of a CSV table as a dict of strings; [] when no file holds it."""
    return list(iter_rows(path))


def columns(rows: Iterable[Mapping[str, Any]]) -> list[str]:
    """Every key of ``rows``, in the order they first appear."""
    return list(dict.fromkeys(key for row in rows for key in row))


def write_csv(path: Path, rows: Iterable[Mapping[str, Any]],
              fields: Sequence[str] | None = None) -> None:
    """Write ``rows`` (streamed: a generator of a million rows is never a list) with the header
    ``fields`` (default: the first row's keys; a value a row lacks is left empty); an empty
    file for no rows and no ``fields``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = iter(rows)
    first = next(rows, None) if fields is None else None
    fields = list(first) if first is not None else fields
    with _open(path, "w") as fh:
        if fields is not None:
            writer = csv.DictWriter(fh, fieldnames=fields)
            writer.writeheader()
            writer.writerows([first] if first is not None else [])
            writer.writerows(rows)


def append_csv(path: Path, rows: Sequence[Mapping[str, Any]]) -> None:
    """Append ``rows`` to the table in the one file ``path``, its header written once; when a
    row brings a column the header lacks, the file is written again with the wider header."""
    if not rows:
        return
    if not path.exists():
        write_csv(path, rows, columns(rows))
        return
    with _open(path) as fh:
        header = next(csv.reader(fh), [])
    if set(columns(rows)) <= set(header):
        with _open(path, "a") as fh:
            csv.DictWriter(fh, fieldnames=header).writerows(rows)
        return
    with _open(path) as fh:
        old = list(csv.DictReader(fh))
    write_csv(path, [*old, *rows], columns([dict.fromkeys(header), *rows]))


def write_rounded(path: Path, rows: Sequence[Mapping[str, Any]]) -> None:
    """Rows of measurements: every column any row has, each float to six significant digits
    (``csv_value``); a header ``empty`` when there are no rows."""
    write_csv(path, [{k: csv_value(v) for k, v in r.items()} for r in rows],
              columns(rows) or ["empty"])


def csv_value(value: Any) -> Any:
    """A float to six significant digits for a CSV file (the rest unchanged)."""
    return f"{value:.6g}" if isinstance(value, float) else value


def csv_number(text: str | None) -> float | None:
    """A CSV cell as a float; None for an empty or missing cell."""
    return None if text is None or text == "" else float(text)
