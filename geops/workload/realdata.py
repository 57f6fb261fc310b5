"""Real data for the generator: accident points from CSV, postcode layers from GeoJSON.

Either replaces its synthetic counterpart; the rest of the pipeline is unchanged. Replaced
layers are no longer known to nest with their neighbours, so each is searched on its own.
"""

from __future__ import annotations

import csv
import json
import math
import os
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import shapely

from geops.errors import DataError, GeoJSONError
from geops.geojson import Rejected
from geops.model import geometry_problems
from geops.workload.world import LAYERS, PointPool, World

# Accepted (longitude, latitude) header pairs, compared case-insensitively, first match wins.
COORDINATE_COLUMNS: tuple[tuple[str, str], ...] = (
    ("lon", "lat"), ("longitude", "latitude"), ("x", "y"))
POLYGONAL = ("Polygon", "MultiPolygon")


@dataclass(frozen=True)
class BadRow:
    """A CSV row that was skipped: its line number in the file and why."""

    line: int
    reason: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.reason}"


def _coordinate(text: str, name: str, limit: float) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{name} {text.strip()!r} is not a number") from None
    if not math.isfinite(value):
        raise ValueError(f"{name} {text.strip()!r} is not finite")
    if abs(value) > limit:
        raise ValueError(f"{name} {value} outside [-{limit:g}, {limit:g}]")
    return value


def read_points_csv(path: str | os.PathLike[str]) -> tuple[np.ndarray, list[BadRow]]:
    """(n, 2) lon/lat of the usable rows of a CSV file with a header, and the skipped rows.

    The header must name lon and lat columns (or longitude/latitude, or x/y; any case); other
    columns are ignored; blank lines are skipped silently.
    """
    try:
        with open(path, encoding="utf-8-sig", newline="") as fh:
            return _points(csv.reader(fh), path)
    except FileNotFoundError:
        raise DataError(f"{path}: file not found") from None
    except (UnicodeDecodeError, csv.Error) as exc:
        raise DataError(f"{path}: not a readable UTF-8 CSV file: {exc}") from None


def _points(rows: Any, path: str | os.PathLike[str]) -> tuple[np.ndarray, list[BadRow]]:
    header = next(rows, None)
    if header is None:
        raise DataError(f"{path}: empty file, expected a header with lon and lat columns")
    names = [h.strip().lower() for h in header]
    pair = next(((names.index(x), names.index(y)) for x, y in COORDINATE_COLUMNS
                 if x in names and y in names), None)
    if pair is None:
        raise DataError(f"{path}: the header must name lon and lat columns (or "
                        f"longitude/latitude, or x/y); found {', '.join(header) or 'none'}")
    ix, iy = pair
    xname, yname = header[ix].strip(), header[iy].strip()
    coords: list[tuple[float, float]] = []
    bad: list[BadRow] = []
    for row in rows:
        if not any(field.strip() for field in row):
            continue
        try:
            if len(row) <= max(ix, iy) or not row[ix].strip() or not row[iy].strip():
                raise ValueError(f"missing {xname} or {yname} value")
            coords.append((_coordinate(row[ix], xname, 180.0),
                           _coordinate(row[iy], yname, 90.0)))
        except ValueError as exc:
            bad.append(BadRow(rows.line_num, str(exc)))
    return np.array(coords, dtype=float).reshape(-1, 2), bad


def read_polygons_geojson(path: str | os.PathLike[str]) -> tuple[np.ndarray, list[Rejected]]:
    """The usable (Multi)Polygon geometries of a GeoJSON FeatureCollection, and the rejected
    features with their index and reason (not a feature, unreadable, not polygonal, invalid)."""
    try:
        with open(path, encoding="utf-8") as fh:
            doc = json.load(fh)
    except FileNotFoundError:
        raise GeoJSONError(f"{path}: file not found") from None
    except json.JSONDecodeError as exc:
        raise GeoJSONError(f"{path}: not valid JSON: {exc}") from None
    if not isinstance(doc, dict) or doc.get("type") != "FeatureCollection" \
            or not isinstance(doc.get("features"), list):
        raise GeoJSONError(f"{path}: expected a GeoJSON FeatureCollection with a features list")
    keep: list[int] = []
    geoms = []
    rejected: list[Rejected] = []
    for i, feat in enumerate(doc["features"]):
        gj = feat.get("geometry") if isinstance(feat, dict) else None
        if not isinstance(feat, dict) or feat.get("type") != "Feature":
            rejected.append(Rejected(i, "not a GeoJSON Feature"))
        elif gj is None:
            rejected.append(Rejected(i, "missing geometry"))
        elif not isinstance(gj, dict) or gj.get("type") not in POLYGONAL:
            kind = gj.get("type") if isinstance(gj, dict) else type(gj).__name__
            rejected.append(Rejected(i, f"expected a Polygon or MultiPolygon, got {kind}"))
        else:
            try:
                geoms.append(shapely.from_geojson(json.dumps(gj)))
                keep.append(i)
            except Exception as exc:  # GEOS reports malformed GeoJSON with several types
                rejected.append(Rejected(i, f"unreadable geometry: {exc}"))
    geoms_arr = np.empty(len(geoms), dtype=object)
    geoms_arr[:] = geoms
    problems = geometry_problems(geoms_arr)
    rejected += [Rejected(i, p) for i, p in zip(keep, problems, strict=True) if p]
    rejected.sort(key=lambda r: r.index)
    usable = np.array([p is None for p in problems], dtype=bool)
    return geoms_arr[usable], rejected


def with_real_data(world: World, points: np.ndarray | None = None,
                   layers: dict[str, np.ndarray] | None = None,
                   sources: dict[str, str] | None = None) -> World:
    """``world`` with its accident locations and/or some layers replaced by given data.

    ``sources`` names where each replacement came from (keys ``points`` and layer names; an
    unnamed one is recorded as "data"), for ``workload.json``.
    """
    layers = layers or {}
    unknown = set(layers) - set(LAYERS)
    if unknown:
        raise ValueError(f"unknown layers {sorted(unknown)}; expected {', '.join(LAYERS)}")
    for layer, geoms in layers.items():
        if len(geoms) == 0:
            raise DataError(f"no usable {layer} polygons")
    if points is not None and len(points) == 0:
        raise DataError("no usable accident points")
    replaced = [*layers, *(["points"] if points is not None else [])]
    # A replaced layer no longer nests: drop its link to its parent and its children's to it.
    parent = {child: up for child, up in world.parent.items()
              if child not in layers and LAYERS[LAYERS.index(child) - 1] not in layers}
    return replace(
        world,
        layers={**world.layers, **layers},
        population=world.population if points is None else PointPool(points),
        parent=parent,
        sources={**world.sources, **dict.fromkeys(replaced, "data"), **(sources or {})},
    )
