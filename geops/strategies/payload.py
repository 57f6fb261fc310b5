"""The bytes of one static partition: what moves between workers when a partition moves.

Layout (little-endian): magic ``GEOPSP2\\0``, count n (uint64), the partition's cell
(4 float64: xmin, ymin, xmax, ymax; ±inf for a hash partition), n subscription ids (int64),
n geometry numbers (uint32), n relation codes (int8), then the partition's distinct geometries
(by WKB, in order of first use) as the WKB of one GeometryCollection, so encoding and decoding
are single vectorised GEOS calls. Subscription k has distinct geometry ``number[k]``.

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
WHOLE_PLANE = np.array([-np.inf, -np.inf, np.inf, np.inf])


def encode(subs: Subscriptions, cell: np.ndarray = WHOLE_PLANE) -> bytes:
    """Serialise a partition: its cell and its subscriptions (ids, relations, geometries)."""
    first: dict[bytes, int] = {}
    number = np.fromiter((first.setdefault(wkb, len(first))
                          for wkb in shapely.to_wkb(subs.geoms).tolist()), "<u4", len(subs))
    distinct = subs.geoms[np.unique(number, return_index=True)[1]]
    wkb = shapely.to_wkb(shapely.geometrycollections(distinct))
    return b"".join([_HEADER.pack(MAGIC, len(subs), *np.asarray(cell, float).tolist()),
                     subs.ids.astype("<i8").tobytes(), number.tobytes(),
                     subs.relations.astype(np.int8).tobytes(), wkb])


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
