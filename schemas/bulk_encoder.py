"""Encoding many Subscription or Publication records at once (``geops subscribe`` of a million).

Produces exactly the bytes ``codec().encode(name, record)`` would, about 20 times faster: both
schemas are ``id`` (long), ``geometry`` (bytes), then one long-like field (the relation's enum
index, or ``event_time``), so a record is the single-object header, the varint of the id, the
varint of the geometry's length, the geometry and the last varint. The varints of every record
are computed with NumPy in one pass (``schemas.match_encoder``); each record is then joined from
its prefix, geometry and suffix. A test compares it with the codec on random records, so a
change to either schema that this encoder does not follow fails loudly.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import shapely

from schemas.codec import codec
from schemas.match_encoder import _place, _varints
from schemas.records import SubscriptionColumns

LAYOUT = [("id", "long"), ("geometry", "bytes")]
LAST_FIELD = {"Subscription": ("relation", "enum"), "Publication": ("event_time", "long")}


def _check_layout(name: str) -> None:
    fields = codec().current[name].source["fields"]
    kinds = [(f["name"], f["type"] if isinstance(f["type"], str) else f["type"]["type"])
             for f in fields]
    if kinds != [*LAYOUT, LAST_FIELD[name]]:
        raise RuntimeError(f"schemas/{name}.avsc changed ({kinds}); update "
                           f"schemas/bulk_encoder.py")


def encode(name: str, ids: np.ndarray, geometries: Sequence[bytes], last: np.ndarray
           ) -> list[bytes]:
    """Single-object records of schema ``name`` (Subscription: ``last`` holds the relation
    codes, the index of each in the Avro enum; Publication: the event times)."""
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
    return [b"".join((pre[bounds[k]:bounds[k + 1]], geom,
                      tail[tail_bounds[k]:tail_bounds[k + 1]]))
            for k, geom in enumerate(geometries)]


def encode_subscriptions(subs: SubscriptionColumns) -> list[bytes]:
    """``records.subscription_records(subs)`` encoded, all at once."""
    return encode("Subscription", subs.ids, shapely.to_wkb(subs.geoms), subs.relations)
