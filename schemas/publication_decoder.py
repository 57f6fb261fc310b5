"""Decoding a whole batch of Publication records at once (the stream side's hottest input path),
and of Subscription records (the start-up scan of a million of them, ``app.subscription_scan``).

Gives, record for record, what ``codec().decode_as("Publication", value)`` gives, but reads the
zig-zag varints of every record written with the current schema in one NumPy pass instead of
one fastavro call per record (~3.5 µs each, half of a read task's per-record work); the same
for Subscriptions, whose relation (an Avro enum) comes as its index (``geops.model.Relation``
numbers them in the enum's order). Records it cannot take that way (an older schema version,
a truncated or corrupt body, trailing bytes, an unknown symbol, not a geops record at all) go
through the codec one by one, so they decode, or fail with the codec's own message, exactly as
before. Tests compare both on random and damaged batches, so a change to ``Publication.avsc``
or ``Subscription.avsc`` that this decoder does not follow fails loudly.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from schemas.codec import HEADER_LEN, DecodeError, codec

_MAX_VARINT = 10                  # bytes of a 64-bit zig-zag varint


@dataclass(frozen=True)
class DecodedPublications:
    """The decoded fields of the records that decoded, and why the others did not."""

    ok: np.ndarray                 # bool per input record
    ids: np.ndarray                # int64, one per ok record, in input order
    geometries: np.ndarray         # object array of WKB bytes, one per ok record
    event_times: np.ndarray        # int64 milliseconds, one per ok record
    errors: list[tuple[int, str]]  # (input index, reason) of every record that did not


def _varints(buf: np.ndarray, pos: np.ndarray, end: np.ndarray, ok: np.ndarray
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Avro ``long`` at ``pos`` of each record: (value, position after it, still ok).

    A record is no longer ok when its varint runs past ``end`` or is not a 64-bit varint; the
    caller sends those to the codec, which says what is wrong.
    """
    raw = np.zeros(len(pos), np.uint64)
    length = np.zeros(len(pos), np.int64)
    done = ~ok
    for k in range(_MAX_VARINT):
        reading = ~done
        if not reading.any():
            break
        at = pos + k
        inside = reading & (at < end)
        byte = buf[np.where(inside, at, 0)].astype(np.uint64)
        # the tenth byte holds only the 64th bit
        valid = inside & (byte <= 1) if k == _MAX_VARINT - 1 else inside
        raw |= np.where(valid, (byte & np.uint64(0x7F)) << np.uint64(7 * k), np.uint64(0))
        last = valid & (byte < 0x80)
        length[last] = k + 1
        failed = reading & ~valid
        ok = ok & ~failed
        done = done | failed | last
    value = (raw >> np.uint64(1)).view(np.int64) ^ -(raw & np.uint64(1)).view(np.int64)
    return value, pos + length, ok


@dataclass(frozen=True)
class DecodedSubscriptions:
    """The decoded fields of the records that decoded, and why the others did not."""

    ok: np.ndarray                 # bool per input record
    ids: np.ndarray                # int64, one per ok record, in input order
    geometries: np.ndarray         # object array of WKB bytes, one per ok record
    relations: np.ndarray          # int8 (``Relation``), one per ok record
    errors: list[tuple[int, str]]  # (input index, reason) of every record that did not


def _decode(name: str, values: Sequence[bytes | None], symbols: list[str] | None
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, list[tuple[int, str]]]:
    """(ok, ids, geometries, third field, errors) of records ``id: long, geometry: bytes`` and
    a third field: a ``long``, or an enum of ``symbols`` (as its index)."""
    n = len(values)
    sizes = np.fromiter((-1 if v is None else len(v) for v in values), np.int64, n)
    joined = b"".join(v for v in values if v is not None)
    buf = np.frombuffer(joined, np.uint8)
    start = np.zeros(n, np.int64)
    start[1:] = np.cumsum(np.maximum(sizes, 0))[:-1]
    end = start + sizes
    # the smallest body: a one-byte id, an empty geometry's one-byte length, a one-byte third
    ok = sizes >= HEADER_LEN + 3
    header = np.frombuffer(codec().header(name), np.uint8)
    cand = np.flatnonzero(ok)
    if len(cand):
        seen = buf[start[cand, None] + np.arange(HEADER_LEN)[None, :]]
        ok[cand[~(seen == header[None, :]).all(axis=1)]] = False
    ids, pos, ok = _varints(buf, start + HEADER_LEN, end, ok)
    wkb_len, wkb_start, ok = _varints(buf, pos, end, ok)
    # compared with the bytes left, not added to the start first: a damaged length near 2**63
    # would wrap the sum around to a negative position
    ok &= (wkb_len >= 0) & (wkb_len <= end - wkb_start)
    wkb_end = wkb_start + np.where(ok, wkb_len, 0)
    third, pos, ok = _varints(buf, wkb_end, end, ok)
    ok &= pos == end                   # trailing bytes: the codec names them
    if symbols is not None:
        ok &= (third >= 0) & (third < len(symbols))  # an unknown symbol: the codec names it

    geometries = np.empty(n, dtype=object)
    fast = np.flatnonzero(ok)
    geometries[fast] = [joined[a:b] for a, b in
                        zip(wkb_start[fast].tolist(), wkb_end[fast].tolist(), strict=True)]
    errors: list[tuple[int, str]] = []
    c = codec()
    last = "event_time" if symbols is None else "relation"
    for i in np.flatnonzero(~ok).tolist():
        try:
            rec = c.decode_as(name, values[i])
        except DecodeError as exc:
            errors.append((i, str(exc)))
            continue
        ok[i] = True
        ids[i], geometries[i] = rec["id"], rec["geometry"]
        third[i] = rec[last] if symbols is None else symbols.index(rec[last])
    return ok, ids[ok], geometries[ok], third[ok], errors


def decode_publications(values: Sequence[bytes | None]) -> DecodedPublications:
    """Decode Kafka record values as Publications (see the module docstring)."""
    ok, ids, geometries, times, errors = _decode("Publication", values, None)
    return DecodedPublications(ok, ids, geometries, times, errors)


def decode_subscriptions(values: Sequence[bytes | None]) -> DecodedSubscriptions:
    """Decode Kafka record values as Subscriptions (see the module docstring); a tombstone
    (None) is an error here, as it is for the codec: the caller takes tombstones apart."""
    fields = {f["name"]: f for f in codec().current["Subscription"].source["fields"]}
    ok, ids, geometries, relations, errors = _decode("Subscription", values,
                                                     fields["relation"]["type"]["symbols"])
    return DecodedSubscriptions(ok, ids, geometries, relations.astype(np.int8), errors)
