"""Encoding a whole batch of GeofenceEvent records at once (the events query's output path).

Produces exactly the bytes ``codec().encode("GeofenceEvent", record)`` would, with every
variable-length integer of every record computed with NumPy in one pass
(``schemas.match_encoder``): through the codec, encoding was most of what an event cost (an
object inside a dozen fences that ask for ``inside`` gives a dozen events a
position). The records come out packed, one buffer and each record's end, so that the events
query's operator hands Spark one value a bucket instead of a row an event. A test compares it
with the codec on random batches, so a change to ``GeofenceEvent.avsc`` that this encoder does
not follow fails loudly.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from schemas.bulk_encoder import _long
from schemas.codec import codec
from schemas.match_encoder import _place, _varints

# the DetectKind enum's symbols, in order
KINDS = ("ENTER", "EXIT", "INSIDE", "OUTSIDE", "CROSS", "NEARBY", "FARAWAY")
# Up to this many records are encoded one by one by the codec (``_each``): the vectorised
# pass has a fixed cost a call (some forty NumPy calls) that the codec's cost a record passes
# only at a few dozen records, and a real-time task's poll of one position gives a handful.
FEW = 16


@dataclass
class Packed:
    """Records (or keys) one after another in ``data``; record i ends at ``ends[i]``."""

    data: bytes
    ends: np.ndarray

    def split(self) -> list[bytes]:
        """Each record's bytes."""
        ends = self.ends.tolist()
        return [self.data[a:b] for a, b in zip([0, *ends], ends, strict=False)]  # 0: a start

    @classmethod
    def of(cls, data: bytes, ends: bytes) -> Packed:
        """From ``data`` and ``ends`` as bytes (``ends_bytes``)."""
        return cls(data, np.frombuffer(ends, np.int64))

    def ends_bytes(self) -> bytes:
        """The ends as bytes (Spark's binary column)."""
        return self.ends.astype(np.int64).tobytes()


def _strings(values: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """UTF-8 bytes of ``values`` concatenated, and each one's length."""
    encoded = [v.encode() for v in values]
    lengths = np.fromiter((len(e) for e in encoded), np.int64, len(encoded))
    return np.frombuffer(b"".join(encoded), np.uint8), lengths


def pack_strings(values: Sequence[str]) -> Packed:
    """The UTF-8 bytes of ``values``, packed (the events' keys: their object ids)."""
    data, lengths = _strings(values)
    return Packed(data.tobytes(), np.cumsum(lengths, dtype=np.int64))


def encode_events(object_ids: Packed, subscription_ids: np.ndarray,
                  kinds: np.ndarray, reasons: Sequence[str | None],
                  has_publication: np.ndarray, publication_ids: np.ndarray,
                  event_times: np.ndarray, match_times: np.ndarray, batch_ids: np.ndarray,
                  others: Sequence[str | None] | None = None,
                  distances: Sequence[float | None] | None = None) -> Packed:
    """Single-object GeofenceEvent records, one per event, packed; ``object_ids`` as UTF-8
    (``pack_strings``: the events' keys too, so they are encoded once); ``kinds`` are indexes
    of ``KINDS``; a reason may be None, and a publication id is null where
    ``has_publication`` is false; ``others`` and ``distances`` (a roaming fence's other object
    and distance, None: null; all null when not given)."""
    n = len(object_ids.ends)
    if n == 0:
        return Packed(b"", np.empty(0, np.int64))
    if n <= FEW:
        return _each(object_ids, subscription_ids, kinds, reasons, has_publication,
                     publication_ids, event_times, match_times, batch_ids, others, distances)
    head = np.frombuffer(codec().header("GeofenceEvent"), np.uint8)
    has_reason = np.fromiter((r is not None for r in reasons), bool, n)
    has_pub = np.asarray(has_publication, bool)
    obj_bytes = np.frombuffer(object_ids.data, np.uint8)
    obj_len = np.diff(object_ids.ends, prepend=0)
    reason_bytes, reason_len = _strings([r for r in reasons if r is not None])
    # varints: object id length, subscription id, kind, reason length, publication id, times
    olen_b, olen_at = _varints(obj_len)
    sub_b, sub_at = _varints(np.asarray(subscription_ids, np.int64))
    kind_b, kind_at = _varints(np.asarray(kinds, np.int64))
    rlen_b, rlen_at = _varints(reason_len)
    pub_b, pub_at = _varints(np.asarray(publication_ids, np.int64)[has_pub])
    evt_b, evt_at = _varints(np.asarray(event_times, np.int64))
    mt_b, mt_at = _varints(np.asarray(match_times, np.int64))
    bid_b, bid_at = _varints(np.asarray(batch_ids, np.int64))
    olen_len, sub_len, kind_len = np.diff(olen_at), np.diff(sub_at), np.diff(kind_at)
    evt_len, mt_len, bid_len = np.diff(evt_at), np.diff(mt_at), np.diff(bid_at)
    rlen_len = np.zeros(n, np.int64)
    rlen_len[has_reason] = np.diff(rlen_at)
    rtext_len = np.zeros(n, np.int64)
    rtext_len[has_reason] = reason_len
    pub_len = np.zeros(n, np.int64)
    pub_len[has_pub] = np.diff(pub_at)
    # record layout: header | len object | object | subscription | kind | branch [| len | reason]
    # | branch [| publication] | event_time | match_time | batch_id | branch [| len | other]
    # | branch [| distance]
    tail_bytes, tail_len = _roam_tails(n, others, distances)
    size = (len(head) + olen_len + obj_len + sub_len + kind_len + 1 + rlen_len + rtext_len
            + 1 + pub_len + evt_len + mt_len + bid_len + tail_len)
    start = np.zeros(n + 1, np.int64)
    np.cumsum(size, out=start[1:])
    out = np.zeros(start[-1], np.uint8)
    at = start[:-1]
    out[at[:, None] + np.arange(len(head))] = head
    at = at + len(head)
    for data, lengths in ((olen_b, olen_len), (obj_bytes, obj_len), (sub_b, sub_len),
                          (kind_b, kind_len)):
        _place(out, at, data, lengths)
        at = at + lengths
    out[at] = np.where(has_reason, 2, 0)  # the union's branch: 1 (string) or 0 (null)
    at = at + 1
    _place(out, at[has_reason], rlen_b, rlen_len[has_reason])
    at = at + rlen_len
    _place(out, at[has_reason], reason_bytes, reason_len)
    at = at + rtext_len
    out[at] = np.where(has_pub, 2, 0)
    at = at + 1
    _place(out, at[has_pub], pub_b, pub_len[has_pub])
    at = at + pub_len
    for data, lengths in ((evt_b, evt_len), (mt_b, mt_len), (bid_b, bid_len),
                          (tail_bytes, tail_len)):
        _place(out, at, data, lengths)
        at = at + lengths
    return Packed(out.tobytes(), start[1:])


def _roam_tails(n: int, others: Sequence[str | None] | None,
                distances: Sequence[float | None] | None) -> tuple[np.ndarray, np.ndarray]:
    """The encoded ``other_object_id`` and ``distance_m`` of each record (two nulls where
    there are none), concatenated, and each record's length."""
    if others is None and distances is None:
        return np.zeros(2 * n, np.uint8), np.full(n, 2, np.int64)
    others = [None] * n if others is None else others
    distances = [None] * n if distances is None else distances
    parts = []
    for other, d in zip(others, distances, strict=True):
        text = b"\x00" if other is None else (
            b"\x02" + _long(len(other.encode())) + other.encode())
        parts.append(text + (b"\x00" if d is None else b"\x02" + struct.pack("<d", d)))
    return (np.frombuffer(b"".join(parts), np.uint8),
            np.fromiter(map(len, parts), np.int64, n))


def _each(object_ids: Packed, subscription_ids: np.ndarray, kinds: np.ndarray,
          reasons: Sequence[str | None], has_publication: np.ndarray,
          publication_ids: np.ndarray, event_times: np.ndarray, match_times: np.ndarray,
          batch_ids: np.ndarray, others: Sequence[str | None] | None,
          distances: Sequence[float | None] | None) -> Packed:
    """``encode_events`` record by record through the codec: the same bytes, cheaper for a
    handful of records (``FEW``)."""
    c = codec()
    objects = [o.decode() for o in object_ids.split()]
    n = len(objects)
    others = [None] * n if others is None else others
    distances = [None] * n if distances is None else distances
    records = [c.encode("GeofenceEvent", {
        "object_id": o, "subscription_id": s, "kind": KINDS[k], "reason": r,
        "publication_id": p if has else None, "event_time": e, "match_time": m,
        "batch_id": b, "other_object_id": other, "distance_m": d})
        for o, s, k, r, has, p, e, m, b, other, d in zip(
            objects, np.asarray(subscription_ids).tolist(), np.asarray(kinds).tolist(),
            reasons, np.asarray(has_publication, bool).tolist(),
            np.asarray(publication_ids).tolist(), np.asarray(event_times).tolist(),
            np.asarray(match_times).tolist(), np.asarray(batch_ids).tolist(), others,
            distances, strict=True)]
    ends = np.cumsum([len(r) for r in records], dtype=np.int64)
    return Packed(b"".join(records), ends)
