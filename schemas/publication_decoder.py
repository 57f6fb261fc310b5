"""Decoding a whole batch of Publication records at once (the stream side's hottest input path),
and of Subscription records (the start-up scan of a million of them, ``app.subscriptions.scan``).

Gives, record for record, what ``codec().decode_as("Publication", value)`` gives, but reads the
zig-zag varints of every record in one NumPy pass instead of one fastavro call per record
(the largest part of a read task's per-record work); the same for Subscriptions, whose
relation (an Avro enum) comes as its index (``geops.model.Relation`` numbers them in the enum's
order). Both released versions of each schema take the fast path, mixed in one batch too: the
writer schema is told by the fingerprint in each record's header (``_LAYOUTS`` names the field
layouts this decoder reads; a version of another layout goes through the codec). Records it
cannot take that way (an unknown layout, a truncated or corrupt body, trailing bytes, an
unknown symbol, a detect array written in several blocks, not a geops record at all) go
through the codec one by one, so they decode, or fail with the codec's own message, exactly as
before. Tests compare both on random and damaged batches, so a change to ``Publication.avsc``
or ``Subscription.avsc`` that this decoder does not follow fails loudly.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np

from schemas.codec import HEADER_LEN, MAGIC, codec, history, strip_logical
from schemas.errors import DecodeError

_MAX_VARINT = 10                  # bytes of a 64-bit zig-zag varint
_MAX_KINDS = 8                    # detect items read in the fast path (more: the codec)
FEW = 8                           # records decoded one by one by the codec (``_each``)

# The field layouts the fast path reads, by schema: after ``id`` (long) and ``geometry``
# (bytes), a long-like field (``event_time``, or the ``relation`` enum), then the tail.
_PLAIN, _OBJECT, _FENCE, _ROAM = 0, 1, 2, 3
_LAYOUTS: dict[str, dict[tuple[Any, ...], int]] = {
    "Publication": {
        (("id", "long"), ("geometry", "bytes"), ("event_time", "long")): _PLAIN,
        (("id", "long"), ("geometry", "bytes"), ("event_time", "long"),
         ("object_id", ("null", "string"))): _OBJECT,
    },
    "Subscription": {
        (("id", "long"), ("geometry", "bytes"), ("relation", "enum")): _PLAIN,
        (("id", "long"), ("geometry", "bytes"), ("relation", "enum"),
         ("detect", ("array", "enum")), ("distance_m", ("null", "double"))): _FENCE,
        # and a roam, read in the fast path when null (a roaming fence: the codec)
        (("id", "long"), ("geometry", "bytes"), ("relation", "enum"),
         ("detect", ("array", "enum")), ("distance_m", ("null", "double")),
         ("roam", ("null", "record"))): _ROAM,
    },
}


def _shape(t: Any) -> Any:
    """The part of a (logical-type-free) field type the fast path depends on."""
    if isinstance(t, list):
        return tuple(_shape(b) for b in t)
    if isinstance(t, dict):
        if t["type"] == "array":
            return ("array", _shape(t["items"]))
        return t["type"]
    return t


@cache
def _headers(name: str) -> tuple[tuple[bytes, int, tuple[str, ...]], ...]:
    """(single-object header, layout, enum symbols per enum field) of every released version
    of ``name`` whose layout the fast path reads."""
    out = []
    for version in history(name):
        fields = strip_logical(version.source)["fields"]
        layout = _LAYOUTS[name].get(tuple((f["name"], _shape(f["type"])) for f in fields))
        if layout is None:
            continue
        symbols = tuple(tuple(f["type"]["symbols"]) if isinstance(f["type"], dict)
                        and f["type"]["type"] == "enum" else
                        tuple(f["type"]["items"]["symbols"]) if isinstance(f["type"], dict)
                        and f["type"]["type"] == "array" else () for f in fields)
        out.append((MAGIC + version.fingerprint, layout, symbols))
    return tuple(out)


def _kind_symbols(versions: tuple[tuple[bytes, int, tuple[str, ...]], ...]) -> tuple[str, ...]:
    """The detect kinds' symbols of the newest fence version: a version only adds symbols
    (the history's compatibility test), so symbol i is bit i in every version."""
    return next((s[3] for _, k, s in reversed(versions) if k in (_FENCE, _ROAM)), ())


@dataclass(frozen=True)
class DecodedPublications:
    """The decoded fields of the records that decoded, and why the others did not."""

    ok: np.ndarray                 # bool per input record
    ids: np.ndarray                # int64, one per ok record, in input order
    geometries: np.ndarray         # object array of WKB bytes, one per ok record
    event_times: np.ndarray        # int64 milliseconds, one per ok record
    errors: list[tuple[int, str]]  # (input index, reason) of every record that did not
    object_ids: np.ndarray         # object: str, or None (no object; every version 1 record)


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


def _object_tail(buf: np.ndarray, pos: np.ndarray, end: np.ndarray, sel: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``object_id: ["null", "string"]`` at ``pos`` of the records ``sel``: (position after
    it, still ok, start and length of the string; length -1 for null)."""
    branch, pos, ok = _varints(buf, pos, end, sel)
    ok &= (branch == 0) | (branch == 1)
    has = ok & (branch == 1)
    length, start, ok_s = _varints(buf, pos, end, has)
    ok_s &= (length >= 0) & (length <= end - start)
    ok = (ok & ~has) | ok_s
    after = np.where(has, start + np.where(ok_s, length, 0), pos)
    return after, ok, start, np.where(has, length, -1)


def _fence_tail(buf: np.ndarray, pos: np.ndarray, end: np.ndarray, sel: np.ndarray,
                kinds: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``detect`` (an array of an enum of ``kinds`` symbols, in one block) and ``distance_m``
    (``["null", "double"]``) at ``pos`` of the records ``sel``: (position after them, still
    ok, detect as a bit mask (bit i: symbol i), distance, whether there is one)."""
    n = len(pos)
    count, pos, ok = _varints(buf, pos, end, sel)
    # a negative count announces a block with its byte size: legal Avro, the codec reads it
    ok &= (count >= 0) & (count <= _MAX_KINDS)
    mask = np.zeros(n, np.uint8)
    for k in range(_MAX_KINDS):
        reading = ok & (count > k)
        if not reading.any():
            break
        item, after, ok_i = _varints(buf, pos, end, reading)
        ok_i &= (item >= 0) & (item < kinds)
        mask |= np.left_shift(1, np.where(ok_i, item, 0)).astype(np.uint8) * ok_i
        pos = np.where(reading, after, pos)
        ok = (ok & ~reading) | ok_i
    blocks = ok & (count > 0)           # a block is followed by the terminating empty one
    term, after, ok_t = _varints(buf, pos, end, blocks)
    ok = (ok & ~blocks) | (ok_t & (term == 0))
    pos = np.where(blocks, after, pos)
    branch, pos, ok = _varints(buf, pos, end, ok)
    ok &= (branch == 0) | ((branch == 1) & (pos <= end - 8))
    has = ok & (branch == 1)
    distance = np.full(n, np.nan)
    at = np.flatnonzero(has)
    if len(at):
        distance[at] = buf[pos[at, None] + np.arange(8)].copy().view("<f8").ravel()
    return np.where(has, pos + 8, pos), ok, mask, distance, has


@dataclass(frozen=True)
class DecodedSubscriptions:
    """The decoded fields of the records that decoded, and why the others did not."""

    ok: np.ndarray                 # bool per input record
    ids: np.ndarray                # int64, one per ok record, in input order
    geometries: np.ndarray         # object array of WKB bytes, one per ok record
    relations: np.ndarray          # int8 (``Relation``), one per ok record
    errors: list[tuple[int, str]]  # (input index, reason) of every record that did not
    detect: np.ndarray             # uint8 bit mask (bit i: DetectKind symbol i); 0: none
    distance_m: np.ndarray         # float64; NaN where has_distance is False
    has_distance: np.ndarray       # bool: distance_m was not null (version 1: never)
    roams: np.ndarray              # object: (distance_m, glob) of a roaming fence, or None


@dataclass
class _Decoded:
    ok: np.ndarray
    ids: np.ndarray
    geometries: np.ndarray
    third: np.ndarray
    errors: list[tuple[int, str]]
    object_ids: np.ndarray
    detect: np.ndarray
    distance: np.ndarray
    has_distance: np.ndarray
    roams: np.ndarray


# long: one vectorised pass over a batch's bytes, header to tail, then the codec for the
# records it could not read; every step reads and narrows the same dozen parallel arrays
def _decode(name: str, values: Sequence[bytes | None]) -> _Decoded:
    """Records ``id: long, geometry: bytes``, a third field (a ``long``, or an enum as its
    index), and the tail of their version (see ``_LAYOUTS``); every array one per ok record."""
    n = len(values)
    if n <= FEW:
        return _each(name, values)
    sizes = np.fromiter((-1 if v is None else len(v) for v in values), np.int64, n)
    joined = b"".join(v for v in values if v is not None)
    buf = np.frombuffer(joined, np.uint8)
    start = np.zeros(n, np.int64)
    start[1:] = np.cumsum(np.maximum(sizes, 0))[:-1]
    end = start + sizes
    # the smallest body: a one-byte id, an empty geometry's one-byte length, a one-byte third
    ok = sizes >= HEADER_LEN + 3
    layout = np.full(n, -1, np.int8)
    versions = _headers(name)
    cand = np.flatnonzero(ok)
    if len(cand):
        seen = buf[start[cand, None] + np.arange(HEADER_LEN)[None, :]]
        for header, kind, _ in versions:
            same = (seen == np.frombuffer(header, np.uint8)[None, :]).all(axis=1)
            layout[cand[same]] = kind
    ok &= layout >= 0
    ids, pos, ok = _varints(buf, start + HEADER_LEN, end, ok)
    wkb_len, wkb_start, ok = _varints(buf, pos, end, ok)
    # compared with the bytes left, not added to the start first: a damaged length near 2**63
    # would wrap the sum around to a negative position
    ok &= (wkb_len >= 0) & (wkb_len <= end - wkb_start)
    wkb_end = wkb_start + np.where(ok, wkb_len, 0)
    third, pos, ok = _varints(buf, wkb_end, end, ok)
    symbols = next((s[2] for _, _, s in versions if s[2]), ())
    kind_symbols = _kind_symbols(versions)
    if symbols:
        ok &= (third >= 0) & (third < len(symbols))  # an unknown symbol: the codec names it

    object_at = object_len = None
    fields = 0 if name == "Publication" else n   # the fence columns, of subscriptions only
    detect = np.zeros(fields, np.uint8)
    distance = np.full(fields, np.nan)
    has_distance = np.zeros(fields, bool)
    objects = ok & (layout == _OBJECT)
    if objects.any():
        after, ok_o, object_at, object_len = _object_tail(buf, pos, end, objects)
        pos = np.where(objects, after, pos)
        ok = (ok & ~objects) | ok_o
    fences = ok & ((layout == _FENCE) | (layout == _ROAM))
    if fences.any():
        after, ok_f, detect, distance, has_distance = _fence_tail(buf, pos, end, fences,
                                                                  len(kind_symbols))
        pos = np.where(fences, after, pos)
        ok = (ok & ~fences) | ok_f
    roams = ok & (layout == _ROAM)
    if roams.any():  # null: read here; a roaming fence's record goes through the codec
        branch, after, ok_r = _varints(buf, pos, end, roams)
        pos = np.where(roams, after, pos)
        ok = (ok & ~roams) | (ok_r & (branch == 0))
    ok &= pos == end                   # trailing bytes: the codec names them

    geometries = np.empty(n, dtype=object)
    fast = np.flatnonzero(ok)
    geometries[fast] = [joined[a:b] for a, b in
                        zip(wkb_start[fast].tolist(), wkb_end[fast].tolist(), strict=True)]
    object_ids = np.full(n, None, dtype=object)
    if object_len is not None:
        # a loop: a tiny share of the CPU the app spends per record; gathering the ids into
        # one fixed-width array and converting it at once was slower (numpy's bytes-to-str
        # step alone costs most of what the loop does)
        strings = np.flatnonzero(ok & (object_len >= 0))
        for i, a, m in zip(strings.tolist(), object_at[strings].tolist(),
                           object_len[strings].tolist(), strict=True):
            try:
                object_ids[i] = joined[a:a + m].decode()
            except UnicodeDecodeError:  # the codec names it
                ok[i] = False
    d = _Decoded(ok, ids, geometries, third, [], object_ids, detect, distance, has_distance,
                 np.full(fields, None, dtype=object))
    return _through_codec(name, values, d, symbols, kind_symbols)


def _through_codec(name: str, values: Sequence[bytes | None], d: _Decoded,
                   symbols: tuple[str, ...], kind_symbols: tuple[str, ...]) -> _Decoded:
    """``d`` (one row per record) with the records not ``ok`` decoded by the codec, or their
    errors; then only the ok rows (the fence columns of subscriptions only)."""
    c = codec()
    last = "event_time" if name == "Publication" else "relation"
    ok = d.ok
    for i in np.flatnonzero(~ok).tolist():
        try:
            rec = c.decode_as(name, values[i])
        except DecodeError as exc:
            d.errors.append((i, str(exc)))
            continue
        ok[i] = True
        d.ids[i], d.geometries[i] = rec["id"], rec["geometry"]
        d.third[i] = rec[last] if name == "Publication" else symbols.index(rec[last])
        if name == "Publication":
            d.object_ids[i] = rec["object_id"]
        else:
            d.detect[i] = sum({1 << kind_symbols.index(k) for k in rec["detect"]})
            d.has_distance[i] = rec["distance_m"] is not None
            d.distance[i] = np.nan if rec["distance_m"] is None else rec["distance_m"]
            roam = rec["roam"]
            d.roams[i] = None if roam is None else (roam["distance_m"], roam["match"])
    fence = ((d.detect[ok], d.distance[ok], d.has_distance[ok], d.roams[ok])
             if name != "Publication" else (d.detect, d.distance, d.has_distance, d.roams))
    return _Decoded(ok, d.ids[ok], d.geometries[ok], d.third[ok], d.errors,
                    d.object_ids[ok], *fence)


def _each(name: str, values: Sequence[bytes | None]) -> _Decoded:
    """Every record through the codec: for a handful of records the vectorised pass costs
    more than it saves (its setup is a fixed cost a call, the codec's a cost a record)."""
    n = len(values)
    fields = 0 if name == "Publication" else n
    versions = _headers(name)
    symbols = next((s[2] for _, _, s in versions if s[2]), ())
    kind_symbols = _kind_symbols(versions)
    d = _Decoded(np.zeros(n, bool), np.zeros(n, np.int64), np.empty(n, dtype=object),
                 np.zeros(n, np.int64), [], np.full(n, None, dtype=object),
                 np.zeros(fields, np.uint8), np.full(fields, np.nan), np.zeros(fields, bool),
                 np.full(fields, None, dtype=object))
    return _through_codec(name, values, d, symbols, kind_symbols)


def decode_publications(values: Sequence[bytes | None]) -> DecodedPublications:
    """Decode Kafka record values as Publications (see the module docstring)."""
    d = _decode("Publication", values)
    return DecodedPublications(d.ok, d.ids, d.geometries, d.third, d.errors, d.object_ids)


def decode_subscriptions(values: Sequence[bytes | None]) -> DecodedSubscriptions:
    """Decode Kafka record values as Subscriptions (see the module docstring); a tombstone
    (None) is an error here, as it is for the codec: the caller takes tombstones apart."""
    d = _decode("Subscription", values)
    return DecodedSubscriptions(d.ok, d.ids, d.geometries, d.third.astype(np.int8), d.errors,
                                d.detect, d.distance, d.has_distance, d.roams)
