"""Avro records written and read without the codec, for speed at the benchmarks' rates: a
Publication from its pre-encoded parts, the event time of a Match record. The codec stays the
reference (tests/bench/test_live.py compares them)."""

from __future__ import annotations


def zigzag_varint(n: int) -> bytes:
    """Avro's encoding of a long."""
    z = (n << 1) ^ (n >> 63)
    out = bytearray()
    while z & ~0x7F:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


def encoded_geometry(wkb: bytes) -> bytes:
    """Avro bytes field: length then data."""
    return zigzag_varint(len(wkb)) + wkb


def publication_bytes(header: bytes, pid: int, geometry_field: bytes, event_ms: int,
                      object_field: bytes = b"\x00") -> bytes:
    """A single-object-encoded Publication, as ``codec().encode("Publication", ...)`` makes
    it, from the schema header and the pre-encoded geometry field; ``object_field`` the
    pre-encoded ``object_id`` (``encoded_object``; default null: the union's first branch)."""
    return header + zigzag_varint(pid) + geometry_field + zigzag_varint(event_ms) + object_field


def encoded_object(object_id: str) -> bytes:
    """Avro ``["null", "string"]`` field holding ``object_id``: branch 1, length, UTF-8."""
    data = object_id.encode()
    return b"\x02" + zigzag_varint(len(data)) + data


def match_event_time(value: bytes, header_len: int = 10) -> int:
    """The event_time of a single-object-encoded Match record without decoding all of it:
    publication_id (long), subscription_ids (array of long blocks), event_time (long)."""
    pos = header_len

    def read_long() -> int:
        nonlocal pos
        shift = z = 0
        while True:
            b = value[pos]
            pos += 1
            z |= (b & 0x7F) << shift
            if not b & 0x80:
                break
            shift += 7
        return (z >> 1) ^ -(z & 1)

    read_long()  # publication_id
    while True:
        count = read_long()
        if count == 0:
            break
        if count < 0:  # a block with its byte size: skip it
            size = read_long()
            pos += size
            continue
        for _ in range(count):
            read_long()
    return read_long()
