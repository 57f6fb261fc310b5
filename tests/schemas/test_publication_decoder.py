"""The bulk Publication and Subscription decoders give, record for record, what the codec
gives."""

from __future__ import annotations

import numpy as np
from hypothesis import example, given, settings
from hypothesis import strategies as st

from geops.model import Relation
from schemas import DecodeError, codec
from schemas.codec import HEADER_LEN, MAGIC
from schemas.publication_decoder import decode_publications, decode_subscriptions

INT64 = st.integers(-(2**63), 2**63 - 1)
PUBLICATION = st.fixed_dictionaries({"id": INT64, "geometry": st.binary(max_size=300),
                                     "event_time": INT64})


def _expected(values: list[bytes | None]) -> tuple[list[dict], list[tuple[int, str]]]:
    """The codec's answer, one record at a time: decoded records and (index, reason)."""
    records, errors = [], []
    for i, v in enumerate(values):
        try:
            records.append(codec().decode_as("Publication", v))
        except DecodeError as exc:
            errors.append((i, str(exc)))
    return records, errors


def _check(values: list[bytes | None]) -> None:
    got = decode_publications(values)
    records, errors = _expected(values)
    assert got.errors == errors
    assert got.ok.tolist() == [i not in dict(errors) for i in range(len(values))]
    assert got.ids.dtype == np.int64 and got.event_times.dtype == np.int64
    assert [{"id": i, "geometry": g, "event_time": t} for i, g, t in
            zip(got.ids.tolist(), got.geometries.tolist(), got.event_times.tolist(),
                strict=True)] == records


@settings(max_examples=200, deadline=None)
@given(st.lists(PUBLICATION, max_size=40))
def test_valid_records_decode_as_the_codec_does(records):
    _check([codec().encode("Publication", r) for r in records])


def _damaged(name: str, items) -> list[bytes]:
    """Records of schema ``name``, each kept, cut, extended or with one byte replaced."""
    values = []
    for record, damage, where, byte in items:
        data = bytearray(codec().encode(name, record))
        at = where % len(data)
        if damage == "cut":
            data = data[:at]
        elif damage == "extend":
            data += bytes([byte])
        elif damage == "flip":
            data[at] = byte
        values.append(bytes(data))
    return values


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(PUBLICATION, st.sampled_from(["keep", "cut", "extend", "flip"]),
                          st.integers(0, 10_000), st.integers(0, 255)), max_size=30))
# found in a full test run: a flipped byte made the geometry's length ~2**63 (end wrapped)
@example([({"id": 64, "geometry": b"", "event_time": 9_223_372_036_854_775_785}, "flip", 103,
           128)])
def test_damaged_records_fail_as_the_codec_says(items):
    """Truncated, extended or bit-flipped records: the same records decode, the rest fail
    with the codec's own reasons, and the good ones around them are not disturbed."""
    values = _damaged("Publication", items)
    _check(values)


def test_every_truncation_of_a_record_and_the_non_records() -> None:
    whole = codec().encode("Publication", {"id": -(2**63), "geometry": b"\x01" * 200,
                                           "event_time": 2**63 - 1})
    subscription = codec().encode("Subscription", {"id": 7, "geometry": b"\x01",
                                                   "relation": "WITHIN"})
    values = [whole[:n] for n in range(len(whole) + 1)] + [
        None, b"", MAGIC + bytes(8) + b"\x02\x00\x02", subscription, whole, whole + b"\x00",
        whole[:HEADER_LEN] + b"\xff" * 10 + b"\x01" + whole[HEADER_LEN + 11:]]
    # ids in 10+ byte varints (over 64 bits): the codec wraps them; so must this decoder
    values += [whole[:HEADER_LEN] + body + whole[HEADER_LEN + 10:] for body in (
        b"\xff" * 9 + b"\x02", b"\xfe" * 9 + b"\x01", b"\xff" * 10 + b"\x01",
        b"\xff" * 11 + b"\x00")]
    # an 11-byte id and nothing after it: a reader that lost track of the varint's end
    # could take the same bytes for the geometry's length and the time, and "succeed"
    values.append(whole[:HEADER_LEN] + b"\x82" + b"\x80" * 9 + b"\x00")
    _check(values)
    got = decode_publications(values)
    reasons = dict(got.errors)
    assert "expected a Publication record, got Subscription" in reasons[len(values) - 9]
    assert "trailing bytes" in reasons[len(values) - 7]
    assert got.ok[len(values) - 8] and got.ok[len(whole)] and got.ok[-5:-1].all()


def test_an_empty_batch() -> None:
    got = decode_publications([])
    assert len(got.ok) == len(got.ids) == len(got.geometries) == 0 and got.errors == []


def test_valid_records_never_go_through_the_codec(monkeypatch) -> None:
    """The fast path takes every current-schema record (else this decoder only adds cost)."""
    values = [codec().encode("Publication", {"id": i - 500, "geometry": bytes(i % 50),
                                             "event_time": 1_700_000_000_000 + i})
              for i in range(1000)]

    def refuse(*_):
        raise AssertionError("fell back to the codec")

    monkeypatch.setattr(type(codec()), "decode_as", refuse)
    got = decode_publications(values)
    assert got.ok.all() and got.ids.tolist() == list(range(-500, 500))


SUBSCRIPTION = st.fixed_dictionaries({"id": INT64, "geometry": st.binary(max_size=300),
                                      "relation": st.sampled_from([r.name for r in Relation])})


def _check_subscriptions(values: list[bytes | None]) -> None:
    got = decode_subscriptions(values)
    records, errors = [], []
    for i, v in enumerate(values):
        try:
            records.append(codec().decode_as("Subscription", v))
        except DecodeError as exc:
            errors.append((i, str(exc)))
    assert got.errors == errors
    assert got.ok.tolist() == [i not in dict(errors) for i in range(len(values))]
    assert got.ids.dtype == np.int64 and got.relations.dtype == np.int8
    assert [{"id": i, "geometry": g, "relation": Relation(r).name} for i, g, r in
            zip(got.ids.tolist(), got.geometries.tolist(), got.relations.tolist(),
                strict=True)] == records


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(SUBSCRIPTION, st.sampled_from(["keep", "cut", "extend", "flip"]),
                          st.integers(0, 10_000), st.integers(0, 255)), max_size=30))
def test_subscriptions_decode_and_fail_as_the_codec_says(items):
    """Subscriptions as the start-up scan reads them: valid, truncated, extended or bit-flipped
    (a flipped relation byte may name no symbol: the codec says so)."""
    values = _damaged("Subscription", items)
    other = codec().encode("Publication", {"id": 1, "geometry": b"\x01", "event_time": 5})
    _check_subscriptions([*values, None, b"", other])


def test_every_relation_and_a_symbol_out_of_range() -> None:
    good = [codec().encode("Subscription", {"id": 3, "geometry": b"\x01\x02", "relation": r.name})
            for r in Relation]
    bad = good[0][:-1] + bytes([2 * len(Relation)])   # index 10 (zig-zag 20): no such symbol
    negative = good[0][:-1] + b"\x01"                 # index -1: whatever the codec makes of it
    _check_subscriptions([*good, bad, negative])
    got = decode_subscriptions([*good, bad])
    assert got.relations.tolist() == [int(r) for r in Relation]
    assert [i for i, _ in got.errors] == [len(good)]
