"""The bytes of one static partition: what moves between workers when a partition moves.

Layout (little-endian): magic ``GEOPSP1\\0``, count n (uint64), the partition's cell
(4 float64: xmin, ymin, xmax, ymax; ±inf for a hash partition), n subscription ids (int64),
n relation codes (int8), then the subscriptions' geometries as the WKB of one
GeometryCollection, so encoding and decoding are single vectorised GEOS calls.
"""

from __future__ import annotations

import struct

import numpy as np
import shapely

from geops.model import Subscriptions

MAGIC = b"GEOPSP1\0"
_HEADER = struct.Struct("<8sQ4d")
WHOLE_PLANE = np.array([-np.inf, -np.inf, np.inf, np.inf])


def encode(subs: Subscriptions, cell: np.ndarray = WHOLE_PLANE) -> bytes:
    """Serialise a partition: its cell and its subscriptions (ids, relations, geometries)."""
    wkb = shapely.to_wkb(shapely.geometrycollections(subs.geoms))
    return b"".join([_HEADER.pack(MAGIC, len(subs), *np.asarray(cell, float).tolist()),
                     subs.ids.astype("<i8").tobytes(),
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
    relations = np.frombuffer(payload, np.int8, n, at).copy()
    at += n
    geoms = shapely.get_parts(shapely.from_wkb(payload[at:]))
    if len(geoms) != n:
        raise ValueError(f"partition payload holds {len(geoms)} geometries, expected {n}")
    return Subscriptions(ids, geoms, relations), np.array(cell)


def merge(pieces: list[bytes], cell: np.ndarray = WHOLE_PLANE) -> bytes:
    """One payload from pieces of one partition (disjoint ids), its subscriptions sorted by id,
    so pieces built apart give the bytes ``encode`` gives the whole partition in id order."""
    if len(pieces) == 1:
        subs, _ = decode(pieces[0])
        return encode(subs, cell)
    parts = [decode(piece)[0] for piece in pieces]
    ids = np.concatenate([s.ids for s in parts])
    order = np.argsort(ids, kind="stable")
    return encode(Subscriptions(ids[order], np.concatenate([s.geoms for s in parts])[order],
                                np.concatenate([s.relations for s in parts])[order]), cell)
