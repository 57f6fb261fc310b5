"""GeoJSON geometry objects (parsed JSON) to shapely geometries, in bulk.

Reading each geometry through GEOS's GeoJSON reader (``shapely.from_geojson`` of the object
dumped back to text) writes and parses text again and crosses into GEOS once per feature. Here
the geometries of one type are flattened with the coordinates of all of them into one float
array and built in one call (``shapely.from_ragged_array``): no text, one GEOS call a chunk.
Only well-formed geometries take that path: a type among ``RAGGED``, every level a non-empty
list, every position 2 or 3 numbers (the same count in a chunk, no booleans, strings or nulls),
rings closed with 4 or more positions, lines of 2 or more. Anything else, and every geometry of
a chunk that fails, is read one by one through GEOS's reader, so a bad geometry gets GEOS's own
reason.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from itertools import chain
from typing import Any

import numpy as np
import shapely
from shapely import GeometryType

# type -> (shapely type, list levels above the positions, minimum positions per innermost list)
RAGGED: dict[str, tuple[GeometryType, int, int]] = {
    "Point": (GeometryType.POINT, 0, 1),
    "LineString": (GeometryType.LINESTRING, 1, 2),
    "MultiPoint": (GeometryType.MULTIPOINT, 1, 1),
    "Polygon": (GeometryType.POLYGON, 2, 4),
    "MultiLineString": (GeometryType.MULTILINESTRING, 2, 2),
    "MultiPolygon": (GeometryType.MULTIPOLYGON, 3, 4),
}
SMALLEST_CHUNK = 64  # a failing chunk is halved down to this, then read one by one
_NUMBERS = {float, int}


def geometry_one(gj: Any) -> Any:
    """One GeoJSON geometry object through GEOS; ValueError naming what is wrong."""
    try:
        return shapely.from_geojson(json.dumps(gj))
    except Exception as exc:  # GEOS reports malformed GeoJSON with several types
        raise ValueError(f"unreadable geometry: {exc}") from None


def geometries(objects: Sequence[Any], bulk: bool = True
               ) -> tuple[list[Any], dict[int, str], np.ndarray]:
    """Shapely geometries of GeoJSON geometry objects (None where unreadable), the reason of
    each unreadable one by position, and which were built in bulk (their coordinates are known
    to be finite). ``bulk=False`` reads every one through GEOS."""
    out: list[Any] = [None] * len(objects)
    errors: dict[int, str] = {}
    finite = np.zeros(len(objects), bool)
    groups: dict[str, list[int]] = {}
    for i, gj in enumerate(objects):
        kind = gj.get("type") if bulk and type(gj) is dict else None
        if kind in RAGGED and type(gj.get("coordinates")) is list:
            groups.setdefault(kind, []).append(i)
        else:
            _one_by_one(objects, [i], out, errors)
    for kind, members in groups.items():
        _build(objects, kind, members, out, errors, finite)
    return out, errors, finite


def _one_by_one(objects: Sequence[Any], members: list[int], out: list[Any],
                errors: dict[int, str]) -> None:
    for i in members:
        try:
            out[i] = geometry_one(objects[i])
        except ValueError as exc:
            errors[i] = str(exc)


def _build(objects: Sequence[Any], kind: str, members: list[int], out: list[Any],
           errors: dict[int, str], finite: np.ndarray) -> None:
    built = _ragged(kind, [objects[i]["coordinates"] for i in members])
    if built is not None:
        for i, geom in zip(members, built, strict=True):
            out[i] = geom
        finite[members] = True
    elif len(members) <= SMALLEST_CHUNK:
        _one_by_one(objects, members, out, errors)
    else:
        half = len(members) // 2
        _build(objects, kind, members[:half], out, errors, finite)
        _build(objects, kind, members[half:], out, errors, finite)


def _ragged(kind: str, coords: list[Any]) -> np.ndarray | None:
    """The geometries of ``coords`` (all of type ``kind``) in one call, or None when any of
    them is not well-formed (the caller then reads them some other way)."""
    geometry_type, levels, least = RAGGED[kind]
    offsets = []
    parts = coords
    for _ in range(levels):
        if set(map(type, parts)) != {list}:
            return None
        counts = np.fromiter(map(len, parts), np.int64, len(parts))
        if not len(counts) or counts.min() < 1:
            return None
        offset = np.zeros(len(parts) + 1, np.int64)
        np.cumsum(counts, out=offset[1:])
        offsets.append(offset)
        parts = list(chain.from_iterable(parts))
    positions = parts
    try:  # a number has no length; anything else of length 2 or 3 has values checked below
        sizes = set(map(len, positions))
    except TypeError:
        return None
    if len(sizes) != 1 or not sizes <= {2, 3}:
        return None
    dims = sizes.pop()
    values = list(chain.from_iterable(positions))
    if not set(map(type, values)) <= _NUMBERS:  # no bool, str or None
        return None
    try:
        xy = np.array(values, dtype=np.float64).reshape(-1, dims)
    except OverflowError:
        return None
    if not np.isfinite(xy).all():  # NaN or infinity (Python's json reads them)
        return None
    if levels:
        starts, ends = offsets[-1][:-1], offsets[-1][1:]
        if (ends - starts).min() < least:
            return None
        if least == 4 and not (xy[starts] == xy[ends - 1]).all():
            return None  # a ring that is not closed
    try:
        if geometry_type == GeometryType.POINT:
            return shapely.points(xy)
        return shapely.from_ragged_array(geometry_type, xy, tuple(offsets[::-1]))
    except Exception:  # anything GEOS refuses is read one by one, with its reason
        return None
