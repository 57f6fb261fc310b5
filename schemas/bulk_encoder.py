"""Encoding many Subscription or Publication records at once (``geops subscribe`` of a million).

Produces exactly the bytes ``codec().encode(name, record)`` would, about 20 times faster: both
schemas are ``id`` (long), ``geometry`` (bytes), one long-like field (the relation's enum
index, or ``event_time``), then optional fields (a Publication's ``object_id``; a
Subscription's ``detect`` and ``distance_m``), so a record is the single-object header, the
varint of the id, the varint of the geometry's length, the geometry, the third varint and the
optional fields' bytes (``object_tails``, ``fence_tails``; their defaults when not given). The
varints of every record are computed with NumPy in one pass (``schemas.match_encoder``); each
record is then joined from its prefix, geometry and suffix. A test compares it with the codec
on random records, so a change to either schema that this encoder does not follow fails loudly.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

import numpy as np
import shapely

from schemas.codec import codec
from schemas.match_encoder import _place, _varints
from schemas.records import SubscriptionColumns

LAYOUT = [("id", "long"), ("geometry", "bytes")]
LAST_FIELD = {"Subscription": ("relation", "enum"), "Publication": ("event_time", "long")}
TAIL = {"Subscription": [("detect", "array"), ("distance_m", ["null", "double"]),
                         ("roam", ["null", "record"])],
        "Publication": [("object_id", ["null", "string"])]}
# the optional fields at their defaults: null object; empty detect array, null distance, no
# roam
DEFAULT_TAIL = {"Subscription": b"\x00\x00\x00", "Publication": b"\x00"}


def _check_layout(name: str) -> None:
    fields = codec().current[name].source["fields"]
    kinds = [(f["name"], [b if isinstance(b, str) else b["type"] for b in f["type"]]
              if isinstance(f["type"], list) else f["type"] if isinstance(f["type"], str)
              else f["type"]["type"]) for f in fields]
    if kinds != [*LAYOUT, LAST_FIELD[name], *TAIL[name]]:
        raise RuntimeError(f"schemas/{name}.avsc changed ({kinds}); update "
                           f"schemas/bulk_encoder.py")


def _long(value: int) -> bytes:
    """One Avro ``long`` (zig-zag varint)."""
    z = (value << 1) ^ (value >> 63)
    out = bytearray()
    while z > 0x7F:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


def object_tails(object_ids: Sequence[str | None]) -> list[bytes]:
    """The encoded ``object_id`` of each Publication (None: null)."""
    return [b"\x00" if o is None else b"\x02" + _long(len(u)) + u
            for o in object_ids for u in [None if o is None else o.encode()]]


def fence_tails(detect: np.ndarray, distance_m: np.ndarray,
                roams: Sequence[tuple[float, str] | None] | None = None) -> list[bytes]:
    """The encoded ``detect``, ``distance_m`` and ``roam`` of each Subscription: ``detect`` a
    bit mask (bit i: symbol i of the enum, written in symbol order), ``distance_m`` NaN for
    null, ``roams`` (distance, glob) or None for null (all None when not given)."""
    memo: dict[tuple[int, float | None], bytes] = {}
    out = []
    roams = [None] * len(detect) if roams is None else roams
    for mask, d, roam in zip(np.asarray(detect).tolist(),
                             np.asarray(distance_m, float).tolist(), roams, strict=True):
        key = (mask, None if d != d else d)
        if key not in memo:
            items = [i for i in range(8) if mask >> i & 1]
            array = (_long(len(items)) + b"".join(_long(i) for i in items) + b"\x00"
                     if items else b"\x00")
            memo[key] = array + (b"\x00" if key[1] is None else b"\x02" + struct.pack("<d", d))
        if roam is None:
            out.append(memo[key] + b"\x00")
        else:
            glob = roam[1].encode()
            out.append(memo[key] + b"\x02" + struct.pack("<d", roam[0]) + _long(len(glob))
                       + glob)
    return out


def encode(name: str, ids: np.ndarray, geometries: Sequence[bytes], last: np.ndarray,
           tails: Sequence[bytes] | None = None) -> list[bytes]:
    """Single-object records of schema ``name`` (Subscription: ``last`` holds the relation
    codes, the index of each in the Avro enum; Publication: the event times); ``tails`` the
    encoded optional fields of each record (``object_tails``, ``fence_tails``), by default
    their defaults."""
    _check_layout(name)
    n = len(ids)
    if n == 0:
        return []
    head = np.frombuffer(codec().header(name), np.uint8)
    lengths = np.fromiter(map(len, geometries), np.int64, n)
    id_bytes, id_at = _varints(np.asarray(ids, np.int64))
    len_bytes, len_at = _varints(lengths)
    id_len, len_len = np.diff(id_at), np.diff(len_at)
    size = len(head) + id_len + len_len
    start = np.zeros(n + 1, np.int64)
    np.cumsum(size, out=start[1:])
    prefix = np.empty(start[-1], np.uint8)
    prefix[start[:-1, None] + np.arange(len(head))] = head
    _place(prefix, start[:-1] + len(head), id_bytes, id_len)
    _place(prefix, start[:-1] + len(head) + id_len, len_bytes, len_len)
    tail_bytes, tail_at = _varints(np.asarray(last, np.int64))
    pre, tail = prefix.tobytes(), tail_bytes.tobytes()
    bounds, tail_bounds = start.tolist(), tail_at.tolist()
    if tails is None:
        default = DEFAULT_TAIL[name]
        return [b"".join((pre[bounds[k]:bounds[k + 1]], geom,
                          tail[tail_bounds[k]:tail_bounds[k + 1]], default))
                for k, geom in enumerate(geometries)]
    return [b"".join((pre[bounds[k]:bounds[k + 1]], geom,
                      tail[tail_bounds[k]:tail_bounds[k + 1]], more))
            for k, (geom, more) in enumerate(zip(geometries, tails, strict=True))]


def encode_subscriptions(subs: SubscriptionColumns, detect: np.ndarray | None = None,
                         distance_m: np.ndarray | None = None,
                         roams: Sequence[tuple[float, str] | None] | None = None
                         ) -> list[bytes]:
    """``records.subscription_records(subs)`` encoded, all at once; ``detect`` (bit masks),
    ``distance_m`` (NaN: none) and ``roams`` ((distance, glob) or None) per subscription when
    given."""
    tails = None
    if detect is not None or distance_m is not None or roams is not None:
        n = len(subs.ids)
        tails = fence_tails(np.zeros(n, np.uint8) if detect is None else detect,
                            np.full(n, np.nan) if distance_m is None else distance_m, roams)
    return encode("Subscription", subs.ids, shapely.to_wkb(subs.geoms), subs.relations, tails)
