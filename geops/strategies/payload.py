"""The bytes of one static partition: what moves between workers when a partition moves.

Layout (little-endian): magic ``GEOPSP2\\0``, count n (uint64), the partition's cell
(4 float64: xmin, ymin, xmax, ymax; ±inf for a hash partition), n subscription ids (int64),
n geometry numbers (uint32), n relation codes (int8), then the partition's distinct geometries
(by WKB, in order of first use) as the WKB of one GeometryCollection, so decoding is a single
vectorised GEOS call. Subscription k has distinct geometry ``number[k]``. Encoding writes each
geometry's WKB once and joins the distinct ones under a collection header, the bytes GEOS
writes for that collection (it would write every geometry a second time).

Subscriptions often share a geometry (many subscribers of one postcode area: at a million
subscriptions of the generated workload each distinct polygon is used ~70 times), and each
geometry is stored once: the payload is smaller (it is what moves), and the decoded
subscriptions share one GEOS geometry per distinct one, so a worker holds it, and the indexes
GEOS builds into a prepared geometry on its first predicate, once.
"""

from __future__ import annotations

import struct

import numpy as np
import shapely

from geops.model import Subscriptions

MAGIC = b"GEOPSP2\0"
_HEADER = struct.Struct("<8sQ4d")
_COLLECTION = struct.Struct("<BII")  # little-endian WKB: byte order 1, type 7, part count
WHOLE_PLANE = np.array([-np.inf, -np.inf, np.inf, np.inf])


def encode(subs: Subscriptions, cell: np.ndarray = WHOLE_PLANE) -> bytes:
    """Serialise a partition: its cell and its subscriptions (ids, relations, geometries)."""
    first: dict[bytes, int] = {}
    number = np.fromiter((first.setdefault(wkb, len(first))
                          for wkb in shapely.to_wkb(subs.geoms, byte_order=1).tolist()),
                         "<u4", len(subs))
    wkb = collection_wkb(list(first))
    if wkb is None:
        distinct = subs.geoms[np.unique(number, return_index=True)[1]]
        wkb = shapely.to_wkb(shapely.geometrycollections(distinct), byte_order=1)
    return b"".join([_HEADER.pack(MAGIC, len(subs), *np.asarray(cell, float).tolist()),
                     subs.ids.astype("<i8").tobytes(), number.tobytes(),
                     subs.relations.astype(np.int8).tobytes(), wkb])


def collection_wkb(parts: list[bytes]) -> bytes | None:
    """The little-endian WKB of the GeometryCollection of 2-D geometries given by their
    little-endian WKB; None if one has Z or M (GEOS flags those in the collection's type)."""
    for part in parts:
        kind = int.from_bytes(part[1:5], "little")
        if part[0] != 1 or kind & 0xE0000000 or kind > 999:
            return None
    return _COLLECTION.pack(1, 7, len(parts)) + b"".join(parts)


def decode(payload: bytes) -> tuple[Subscriptions, np.ndarray]:
    """(subscriptions, cell): the inverse of ``encode``; ValueError on foreign bytes."""
    if len(payload) < _HEADER.size:
        raise ValueError("not a geops partition payload (too short)")
    magic, n, *cell = _HEADER.unpack_from(payload)
    if magic != MAGIC:
        raise ValueError("not a geops partition payload (bad magic)")
    at = _HEADER.size
    ids = np.frombuffer(payload, "<i8", n, at).astype(np.int64)
    at += 8 * n
    number = np.frombuffer(payload, "<u4", n, at).astype(np.intp)
    at += 4 * n
    relations = np.frombuffer(payload, np.int8, n, at).copy()
    at += n
    distinct = shapely.get_parts(shapely.from_wkb(payload[at:]))
    if len(distinct) > n or number.max(initial=-1) >= len(distinct):
        raise ValueError(f"partition payload's {n} subscriptions do not fit its "
                         f"{len(distinct)} geometries")
    return Subscriptions(ids, distinct[number], relations), np.array(cell)


def merge(pieces: list[bytes], cell: np.ndarray = WHOLE_PLANE) -> bytes:
    """One payload from pieces of one partition (disjoint ids), its subscriptions sorted by id,
    so pieces built apart give the bytes ``encode`` gives the whole partition in id order."""
    if len(pieces) == 1:
        subs, _ = decode(pieces[0])
        return encode(subs, cell)
    subs = Subscriptions.concat([decode(piece)[0] for piece in pieces])
    return encode(subs.take(np.argsort(subs.ids, kind="stable")), cell)
