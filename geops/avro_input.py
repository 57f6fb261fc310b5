"""Reading Avro object container files of Subscription or Publication records: the columnar
alternative to GeoJSON for bulk loads (``geops generate`` writes ``DIR/subscriptions.avro`` and
``DIR/publications.avro`` beside the GeoJSON files).

The records carry the schemas' own types (id a long, geometry WKB, relation and detect kinds
enum symbols), so what can be wrong is the geometry, which must be readable WKB and pass the
same checks as a GeoJSON feature's (present, non-empty, finite, valid), a subscription's
distance (a finite number above zero, with detect kinds) and a publication's object id (not
empty). A record that fails is rejected with its index and reason, the others are kept, as for
GeoJSON.
"""

from __future__ import annotations

import math
import os
from typing import Any

import fastavro
import numpy as np
import shapely

from geops.errors import GeoJSONError
from geops.geojson import Rejected
from geops.model import (
    ROAMING_KINDS,
    DetectKind,
    Publications,
    Relation,
    Subscriptions,
    geometry_problems,
)
from geops.roam_spec import parse_roam, roam_detect, roam_problem
from schemas.codec import codec

MAGIC = b"Obj\x01"  # the first bytes of every Avro object container file


def is_avro(path: str | os.PathLike[str]) -> bool:
    """Whether the file is an Avro object container file (by its first bytes)."""
    try:
        with open(path, "rb") as fh:
            return fh.read(len(MAGIC)) == MAGIC
    except OSError:
        return False  # reported by the GeoJSON reader, which names the problem


def _records(path: str | os.PathLike[str], name: str) -> list[dict[str, Any]]:
    try:
        with open(path, "rb") as fh:
            return list(fastavro.reader(fh, reader_schema=codec().current[name].parsed))
    except FileNotFoundError:
        raise GeoJSONError(f"{path}: file not found") from None
    except (ValueError, TypeError, EOFError, KeyError, fastavro.read.SchemaResolutionError) as exc:
        raise GeoJSONError(f"{path}: not an Avro file of {name} records: {exc}") from None


def _geometries(wkbs: list[bytes]) -> tuple[np.ndarray, list[int], list[Rejected]]:
    """Geometries of WKB, the positions kept, and the rejected records with their reasons."""
    geoms = shapely.from_wkb(np.array(wkbs, dtype=object), on_invalid="ignore")
    rejected = []
    for i in np.flatnonzero(shapely.is_missing(geoms)).tolist():
        try:
            shapely.from_wkb(wkbs[i])
            reason = "missing geometry"
        except Exception as exc:  # GEOS names what is wrong with the bytes
            reason = f"unreadable geometry: {exc}"
        rejected.append(Rejected(i, reason, "record"))
    problems = geometry_problems(geoms)
    keep = [i for i, problem in enumerate(problems) if problem is None]
    unreadable = {r.index for r in rejected}
    rejected += [Rejected(i, p, "record") for i, p in enumerate(problems)
                 if p is not None and i not in unreadable]
    rejected.sort(key=lambda r: r.index)
    return geoms, keep, rejected


def _record_problems(records: list[dict[str, Any]], name: str) -> dict[int, str]:
    """The problems of the fields other than the geometry, by record index."""
    out = {}
    for i, r in enumerate(records):
        if name == "Subscription" and r.get("roam") is not None and roam_problem(r["roam"]):
            out[i] = f"roam {roam_problem(r['roam'])}"
        elif name == "Subscription" and r.get("roam") is None and (
                DetectKind.parse(r.get("detect") or []) & ROAMING_KINDS):
            out[i] = "detect NEARBY and FARAWAY need a roam"
        elif name == "Subscription" and r.get("distance_m") is not None:
            d = r["distance_m"]
            if not (math.isfinite(d) and d > 0):
                out[i] = f"distance_m must be a finite number of metres above zero, got {d!r}"
            elif not DetectKind.fixed(DetectKind.parse(r.get("detect") or [])):
                out[i] = (f"distance_m ({d!r}) needs detect kinds: a distance makes a fence for "
                          f"geofence events, plain matching uses the geometry itself")
        elif name == "Publication" and r.get("object_id") == "":
            out[i] = "object_id must be a non-empty string, got ''"
    return out


def _kept(path: str | os.PathLike[str], name: str, defaults: dict[str, Any] | None = None
          ) -> tuple[list[dict[str, Any]], np.ndarray, list[int], list[Rejected]]:
    """The usable records of a file, their geometries, their indices and the rejected;
    ``defaults`` fill the fields a record leaves empty (no detect kinds, no distance)."""
    records = _records(path, name)
    for field, value in (defaults or {}).items():
        for r in records:
            if not r.get(field):
                r[field] = value
    geoms, keep, rejected = _geometries([r["geometry"] for r in records])
    problems = _record_problems(records, name)
    if problems:
        usable = set(keep)
        rejected = sorted(rejected + [Rejected(i, p, "record") for i, p in problems.items()
                                      if i in usable], key=lambda r: r.index)
        keep = [i for i in keep if i not in problems]
    return [records[i] for i in keep], geoms[keep], keep, rejected


def read_subscriptions_avro(
    path: str | os.PathLike[str],
) -> tuple[Subscriptions, list[int], list[Rejected]]:
    """Subscriptions of an Avro container file, the record index of each, and the rejected."""
    subs, _, _, keep, rejected = read_fence_subscriptions_avro(path)
    return subs, keep, rejected


def read_fence_subscriptions_avro(
    path: str | os.PathLike[str], defaults: dict[str, Any] | None = None
) -> tuple[Subscriptions, np.ndarray, np.ndarray, list[int], list[Rejected]]:
    """As ``read_subscriptions_avro``, with the ``detect`` bit masks and ``distance_m`` (NaN:
    none) of each subscription (as ``geops.geojson.read_fence_subscriptions``); ``defaults``
    (``detect``: a bit mask, ``distance_m``) for the records without them."""
    return read_fences_avro(path, defaults)[:5]


def read_fences_avro(
    path: str | os.PathLike[str], defaults: dict[str, Any] | None = None
) -> tuple[Subscriptions, np.ndarray, np.ndarray, list[int], list[Rejected],
           list[tuple[float, str] | None]]:
    """``read_fence_subscriptions_avro`` and the roam (distance, glob; None: none) of each,
    the detect kinds with those a roam adds (``geops.roam_spec.roam_detect``)."""
    if defaults and "detect" in defaults:
        defaults = {**defaults, "detect": DetectKind.names(defaults["detect"])}
    kept, geoms, keep, rejected = _kept(path, "Subscription", defaults)
    codes = {r.name: int(r) for r in Relation}
    subs = Subscriptions(np.fromiter((r["id"] for r in kept), np.int64, len(kept)),
                         geoms, [codes[r["relation"]] for r in kept])
    roams = [None if r.get("roam") is None else parse_roam(r["roam"]) for r in kept]
    detect = np.fromiter((roam_detect(DetectKind.parse(r.get("detect") or []), roam)
                          for r, roam in zip(kept, roams, strict=True)), np.uint8, len(kept))
    distance = np.fromiter((math.nan if r.get("distance_m") is None else r["distance_m"]
                            for r in kept), np.float64, len(kept))
    return subs, detect, distance, keep, rejected, roams


def read_publications_avro(
    path: str | os.PathLike[str],
) -> tuple[Publications, list[int], list[Rejected]]:
    """Publications of an Avro container file, the record index of each, and the rejected."""
    pubs, _, keep, rejected = read_positions_avro(path)
    return pubs, keep, rejected


def read_positions_avro(
    path: str | os.PathLike[str],
) -> tuple[Publications, np.ndarray, list[int], list[Rejected]]:
    """As ``read_publications_avro``, with the object id of each (None where absent)."""
    kept, geoms, keep, rejected = _kept(path, "Publication")
    pubs = Publications(np.fromiter((r["id"] for r in kept), np.int64, len(kept)),
                        geoms, [r["event_time"] for r in kept])
    objects = np.empty(len(kept), object)
    objects[:] = [r.get("object_id") for r in kept]
    return pubs, objects, keep, rejected
