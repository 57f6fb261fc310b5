"""Reading Avro object container files of Subscription or Publication records: the columnar
alternative to GeoJSON for bulk loads (``geops generate`` writes ``DIR/subscriptions.avro`` and
``DIR/publications.avro`` beside the GeoJSON files).

The records carry the schemas' own types (id a long, geometry WKB, relation an enum symbol),
so only the geometry can be wrong: it must be readable WKB and pass the same checks as a GeoJSON
feature's (present, non-empty, finite, valid). A record that fails is rejected with its index
and reason, the others are kept, as for GeoJSON.
"""

from __future__ import annotations

import os
from typing import Any

import fastavro
import numpy as np
import shapely

from geops.geojson import GeoJSONError, Rejected
from geops.model import Publications, Relation, Subscriptions, geometry_problems
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


def read_subscriptions_avro(
    path: str | os.PathLike[str],
) -> tuple[Subscriptions, list[int], list[Rejected]]:
    """Subscriptions of an Avro container file, the record index of each, and the rejected."""
    records = _records(path, "Subscription")
    geoms, keep, rejected = _geometries([r["geometry"] for r in records])
    codes = {r.name: int(r) for r in Relation}
    kept = [records[i] for i in keep]
    subs = Subscriptions(np.fromiter((r["id"] for r in kept), np.int64, len(kept)),
                         geoms[keep], [codes[r["relation"]] for r in kept])
    return subs, keep, rejected


def read_publications_avro(
    path: str | os.PathLike[str],
) -> tuple[Publications, list[int], list[Rejected]]:
    """Publications of an Avro container file, the record index of each, and the rejected."""
    records = _records(path, "Publication")
    geoms, keep, rejected = _geometries([r["geometry"] for r in records])
    kept = [records[i] for i in keep]
    pubs = Publications(np.fromiter((r["id"] for r in kept), np.int64, len(kept)),
                        geoms[keep], [r["event_time"] for r in kept])
    return pubs, keep, rejected
