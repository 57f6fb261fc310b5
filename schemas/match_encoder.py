"""Encoding a whole batch of Match records at once (the app's hottest output path).

Produces exactly the bytes ``codec().encode("Match", record)`` would (single-object header +
Avro binary body), but computes the variable-length zig-zag integers of every field of every
record with NumPy in one pass; a test compares it with the codec on random batches, so a
change to ``Match.avsc`` that this encoder does not follow fails loudly.
"""

from __future__ import annotations

import numpy as np

from schemas.codec import codec

_MAX_VARINT = 10  # bytes of a 64-bit zig-zag varint
FEW = 8  # records encoded one by one by the codec (``_each``)


def _varints(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Avro ``long`` encodings of ``values``: (concatenated bytes, start offset of each)."""
    v = np.asarray(values, dtype=np.int64)
    z = ((v << 1) ^ (v >> 63)).view(np.uint64)
    # as many 7-bit groups as the largest value needs, not always ten: times take six bytes,
    # ids and kinds one to three
    top = int(z.max()) if len(z) else 0
    width = max(1, min(_MAX_VARINT, -(-top.bit_length() // 7)))
    shifts = (7 * np.arange(width, dtype=np.uint64))
    groups = (z[:, None] >> shifts[None, :]) & np.uint64(0x7F)
    length = np.ones(len(z), np.int64)
    for k in range(1, width):
        length += (z >> np.uint64(7 * k)) > 0
    cols = np.arange(width)[None, :]
    more = cols < (length[:, None] - 1)
    data = (groups | (more.astype(np.uint64) << np.uint64(7))).astype(np.uint8)
    used = cols < length[:, None]
    offsets = np.zeros(len(z) + 1, np.int64)
    np.cumsum(length, out=offsets[1:])
    return data[used], offsets


def _place(out: np.ndarray, dest_start: np.ndarray, data: np.ndarray, lengths: np.ndarray
           ) -> None:
    """Copy consecutive runs of ``data`` (run i has ``lengths[i]`` bytes) to ``dest_start[i]``."""
    if not len(data):
        return
    src_start = np.zeros(len(lengths), np.int64)
    np.cumsum(lengths[:-1], out=src_start[1:])
    dest = np.repeat(dest_start - src_start, lengths) + np.arange(len(data))
    out[dest] = data


def encode_matches(publication_ids: np.ndarray, offsets: np.ndarray, subscription_ids: np.ndarray,
                   event_times: np.ndarray, match_time: int, batch_id: int,
                   app_id: str) -> list[bytes]:
    """Single-object Match records; record i matched ``subscription_ids[offsets[i]:offsets[i+1]]``
    (ascending), for publication ``publication_ids[i]`` with event time ``event_times[i]``."""
    n = len(publication_ids)
    if n == 0:
        return []
    offsets = np.asarray(offsets, np.int64)
    if n <= FEW:
        return _each(publication_ids, offsets, subscription_ids, event_times, match_time,
                     batch_id, app_id)
    counts = np.diff(offsets)
    head = np.frombuffer(codec().header("Match"), np.uint8)
    name = app_id.encode()
    # match_time, batch_id and app_id are the same for every record of the batch
    tail = np.concatenate([_varints(np.array([match_time, batch_id, len(name)]))[0],
                           np.frombuffer(name, np.uint8)])
    id_bytes, id_at = _varints(publication_ids)
    cnt_bytes, cnt_at = _varints(counts[counts > 0])  # an empty array is only its terminator
    sub_bytes, sub_at = _varints(subscription_ids)
    evt_bytes, evt_at = _varints(event_times)
    id_len, evt_len = np.diff(id_at), np.diff(evt_at)
    cnt_len = np.zeros(n, np.int64)
    cnt_len[counts > 0] = np.diff(cnt_at)
    sub_len = sub_at[offsets[1:]] - sub_at[offsets[:-1]]
    # record layout: header | id | [count | ids] | 0 | event_time | tail
    size = len(head) + id_len + cnt_len + sub_len + 1 + evt_len + len(tail)
    start = np.zeros(n + 1, np.int64)
    np.cumsum(size, out=start[1:])
    out = np.zeros(start[-1], np.uint8)  # the array terminators stay 0
    at = start[:-1]
    out[at[:, None] + np.arange(len(head))] = head
    at = at + len(head)
    _place(out, at, id_bytes, id_len)
    at = at + id_len
    _place(out, at[counts > 0], cnt_bytes, cnt_len[counts > 0])
    at = at + cnt_len
    _place(out, at, sub_bytes, sub_len)
    at = at + sub_len + 1
    _place(out, at, evt_bytes, evt_len)
    at = at + evt_len
    out[at[:, None] + np.arange(len(tail))] = tail
    buf = out.tobytes()
    return [buf[a:b] for a, b in zip(start[:-1].tolist(), start[1:].tolist(), strict=True)]


def _each(publication_ids: np.ndarray, offsets: np.ndarray, subscription_ids: np.ndarray,
          event_times: np.ndarray, match_time: int, batch_id: int, app_id: str) -> list[bytes]:
    """The records one by one through the codec: for a handful the vectorised pass costs more
    than it saves (its setup is a fixed cost a call, the codec's a cost a record)."""
    c, bounds = codec(), offsets.tolist()
    ids = np.asarray(subscription_ids, np.int64).tolist()
    return [c.encode("Match", {"publication_id": p, "subscription_ids": ids[a:b],
                               "event_time": t, "match_time": match_time,
                               "batch_id": batch_id, "app_id": app_id})
            for p, t, a, b in zip(np.asarray(publication_ids).tolist(),
                                  np.asarray(event_times).tolist(), bounds[:-1], bounds[1:],
                                  strict=True)]
