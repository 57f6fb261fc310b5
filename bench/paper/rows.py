"""The results directory's CSV tables as rows: reading (plain or gzipped), writing, picking the
plan's runs, ordering pipelines and modes, and the per-point summaries that the figures and
the report both show.

A table ``name.csv`` may be stored compressed as ``name.csv.gz`` (the large per-batch and
per-partition tables in ``docs/results`` are), and one too large for a single file of the
tree (over 2 MB compressed) in parts ``name.part-1.csv.gz``, ``name.part-2.csv.gz``, ..., each
with the header. Reading ``name.csv`` reads ``name.csv.gz``, then the parts in order, then
``name.csv``: the harness appends the rows of new runs to a plain ``name.csv``, so a resumed
directory holds its older rows compressed and the newer ones beside them. Never keep a
decompressed copy next to its ``.gz``: its rows would be read twice.
"""

from __future__ import annotations

import csv
import gzip
import math
import shutil
from collections import defaultdict
from collections.abc import Collection, Iterable, Iterator, Sequence
from pathlib import Path
from typing import IO, Any

from bench.paper.plan import DYNAMIC_LB_STAL, PIPELINES, RUN_MODES

Row = dict[str, str]


def stored(path: Path) -> list[Path]:
    """The files that hold the table ``path`` names: ``<path>.gz``, its parts, then ``path``;
    those that exist."""
    path = Path(path)
    parts = sorted(path.parent.glob(f"{path.stem}.part-*{path.suffix}.gz"),
                   key=lambda p: int(p.name.split(".part-")[1].split(".")[0]))
    return [p for p in (path.with_name(path.name + ".gz"), *parts, path) if p.exists()]


def gzip_beside(path: Path) -> Path:
    """``path`` gzipped beside itself, the plain file removed (how ``docs/results`` stores a
    large table; reading ``path`` reads the ``.gz``)."""
    packed = path.with_name(path.name + ".gz")
    with open(path, "rb") as src, gzip.open(packed, "wb") as dst:
        shutil.copyfileobj(src, dst)
    path.unlink()
    return packed


def _open(path: Path) -> IO[str]:
    if path.name.endswith(".gz"):
        return gzip.open(path, "rt", newline="")
    return open(path, newline="")


def iter_rows(path: Path, run_ids: Collection[str] | None = None) -> Iterator[Row]:
    """Every row of the table ``path`` (see the module's note on ``.csv.gz``) as a dict of
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


def write_csv(path: Path, rows: Sequence[dict[str, Any]]) -> None:
    """Write ``rows`` (dicts with the same keys) with a header; an empty file for no rows."""
    with open(path, "w", newline="") as fh:
        if rows:
            writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)


def number(text: str | None) -> float | None:
    """A CSV cell as a float; None for an empty or missing cell."""
    return None if text is None or text == "" else float(text)


def is_plan_run(row: Row) -> bool:
    """True for a run of the main plan (its id ends with the repeat; labelled runs do not)."""
    return row["run_id"].endswith(f"-r{row['repeat']}")


def plan_runs(rows: Iterable[Row]) -> list[Row]:
    return [r for r in rows if is_plan_run(r)]


def mode_order(modes: Iterable[str]) -> list[str]:
    """The modes present, in the paper's order (unknown ones last, by name)."""
    known = list(RUN_MODES)
    return sorted(set(modes), key=lambda m: (known.index(m) if m in known else len(known), m))


def pipeline_order(pipelines: Iterable[str]) -> list[str]:
    known = list(PIPELINES)
    return sorted(set(pipelines),
                  key=lambda p: (known.index(p) if p in known else len(known), p))


def summary(values: Sequence[float]) -> dict[str, float]:
    """n, mean, min and max of some values (NaN when there are none)."""
    if not values:
        return {"n": 0, "mean": math.nan, "min": math.nan, "max": math.nan}
    return {"n": len(values), "mean": math.fsum(values) / len(values), "min": min(values),
            "max": max(values)}


def point_table(runs: Iterable[Row], columns: Sequence[str]) -> list[dict[str, Any]]:
    """Per (pipeline, mode, skew): n and mean/min/max of each column over the repeats."""
    groups: dict[tuple[str, str, float], list[Row]] = defaultdict(list)
    for r in runs:
        groups[(r["pipeline"], r["mode"], float(r["skew"]))].append(r)
    pipes = pipeline_order(p for p, _, _ in groups)
    modes = mode_order(m for _, m, _ in groups)
    out = []
    for key in sorted(groups, key=lambda k: (pipes.index(k[0]), modes.index(k[1]), k[2])):
        row: dict[str, Any] = {"pipeline": key[0], "mode": key[1], "skew": key[2],
                               "n": len(groups[key])}
        for column in columns:
            values = [v for v in (number(r.get(column)) for r in groups[key]) if v is not None]
            s = summary(values)
            row.update({f"{column}_mean": s["mean"], f"{column}_min": s["min"],
                        f"{column}_max": s["max"]})
        out.append(row)
    return out


def fig8_rows(moves: Iterable[Row]) -> list[dict[str, Any]]:
    """Per static size: redistribution time and bytes moved (mean/min/max over moves).

    Uses the moves of sPS, Dynamic LB STAL, skew 0.7; the forced-move runs (labelled run ids)
    when there are any, else every such move.
    """
    rows = [m for m in moves if m["pipeline"] == "sPS" and m["mode"] == DYNAMIC_LB_STAL
            and math.isclose(float(m["skew"]), 0.7) and int(m["partitions_moved"]) > 0]
    forced = [m for m in rows if not is_plan_run(m)]
    rows = forced or rows
    groups: dict[int, list[Row]] = defaultdict(list)
    for m in rows:
        groups[int(m["subscriptions"])].append(m)
    out = []
    for subs in sorted(groups):
        time_s = summary([float(m["duration_ms"]) / 1000 for m in groups[subs]])
        mb = summary([float(m["bytes"]) / 1e6 for m in groups[subs]])
        moved = summary([float(m["partitions_moved"]) for m in groups[subs]])
        out.append({"subscriptions": subs, "moves": time_s["n"], "duration_s_mean": time_s["mean"],
                    "duration_s_min": time_s["min"], "duration_s_max": time_s["max"],
                    "mb_moved_mean": mb["mean"], "partitions_moved_mean": moved["mean"],
                    "source": "forced moves" if forced else "distributor moves"})
    return out
