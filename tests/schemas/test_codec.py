"""The single-object codec, the schema history and backward compatibility."""

from __future__ import annotations

import copy
import io

import fastavro
import pytest

from geops.model import DetectKind, Relation
from schemas import codec
from schemas.codec import (
    HEADER_LEN,
    MAGIC,
    SCHEMA_DIR,
    canonical_form,
    history,
    read_source,
    schema_names,
    strip_logical,
)
from schemas.compat import _samples, backward_problem
from schemas.errors import DecodeError

EXPECTED = {"Publication", "Subscription", "Match", "PartitionLoad", "BatchSummary",
            "MoveReport", "RebalanceCommand", "DistributorStatus", "DeadLetter",
            "PartitionLayout", "GeofenceEvent", "ObjectPositions"}


def crc64_avro(data: bytes) -> int:
    """The fingerprint algorithm exactly as printed in the Avro specification."""
    empty = 0xC15D213AA4D7A795
    table = []
    for i in range(256):
        fp = i
        for _ in range(8):
            fp = (fp >> 1) ^ (empty & -(fp & 1))
        table.append(fp)
    fp = empty
    for byte in data:
        fp = (fp >> 8) ^ table[(fp ^ byte) & 0xFF]
    return fp


def test_all_schemas_present():
    assert set(schema_names()) == EXPECTED


def test_spec_reference_vector():
    # From the Avro spec's test data: fingerprint64 of the schema "null".
    assert crc64_avro(b'"null"') == 7195948357588979594


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_header_is_marker_plus_little_endian_crc64(name):
    c = codec()
    source = read_source(SCHEMA_DIR / f"{name}.avsc")
    expected = crc64_avro(canonical_form(source).encode()).to_bytes(8, "little")
    assert c.header(name) == MAGIC + expected


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_round_trip_every_branch(name):
    c = codec()
    plain = strip_logical(read_source(SCHEMA_DIR / f"{name}.avsc"))
    for record in _samples(plain, {}):
        data = c.encode(name, record)
        assert data[:2] == b"\xc3\x01"
        got_name, got = c.decode(data)
        assert got_name == name
        assert got == record


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_current_schema_is_the_latest_released_version(name):
    """Editing a schema without adding history/<Name>.v<N+1>.avsc fails here."""
    versions = history(name)
    assert versions, f"schemas/history has no version of {name}"
    current = read_source(SCHEMA_DIR / f"{name}.avsc")
    assert canonical_form(versions[-1].source) == canonical_form(current)
    assert versions[-1].source == current, "docs/defaults differ from the latest released version"


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_every_old_version_is_readable_with_the_current_schema(name):
    current = read_source(SCHEMA_DIR / f"{name}.avsc")
    for old in history(name):
        assert backward_problem(old.source, current) is None, f"{name} v{old.version}"
        # and through the codec, which resolves by fingerprint
        plain = strip_logical(old.source)
        for record in _samples(plain, {}):
            buf = io.BytesIO()
            buf.write(MAGIC + old.fingerprint)
            fastavro.schemaless_writer(buf, old.parsed, record)
            assert codec().decode(buf.getvalue())[0] == name


def test_compatibility_check_rejects_a_breaking_change():
    old = read_source(SCHEMA_DIR / "Match.avsc")
    new = copy.deepcopy(old)
    new["fields"].append({"name": "priority", "type": "int"})  # no default: old records fail
    assert backward_problem(old, new) is not None
    new["fields"][-1]["default"] = 0
    assert backward_problem(old, new) is None


def test_old_writer_record_resolves_to_current_reader_with_defaults():
    """A record written before a field existed is read with that field's default."""
    c = codec()
    old = read_source(SCHEMA_DIR / "Match.avsc")
    old = copy.deepcopy(old)
    old["fields"] = [f for f in old["fields"] if f["name"] != "app_id"]
    parsed = fastavro.parse_schema(strip_logical(old), _write_hint=False)
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, parsed, {"publication_id": 1, "subscription_ids": [2],
                                             "event_time": 3, "match_time": 4, "batch_id": 5})
    reader = c.current["Match"].parsed
    buf.seek(0)
    assert fastavro.schemaless_reader(buf, parsed, reader)["app_id"] == ""


def test_relation_enum_matches_model():
    symbols = next(f["type"]["symbols"] for f in
                   read_source(SCHEMA_DIR / "Subscription.avsc")["fields"]
                   if f["name"] == "relation")
    assert symbols == [r.name for r in Relation]


def test_detect_kind_enums_match_model():
    """The fences' detect kinds and the events' kinds are one enum, numbered as the model's
    bits."""
    sub = {f["name"]: f for f in read_source(SCHEMA_DIR / "Subscription.avsc")["fields"]}
    event = {f["name"]: f for f in read_source(SCHEMA_DIR / "GeofenceEvent.avsc")["fields"]}
    assert sub["detect"]["type"]["items"] == event["kind"]["type"]
    assert [1 << i for i, _ in enumerate(event["kind"]["type"]["symbols"])] == [
        int(DetectKind[s]) for s in event["kind"]["type"]["symbols"]]


def test_version_1_records_read_with_the_new_fields_at_their_defaults():
    """A Publication of an older producer has no object; a Subscription no detect kinds and
    no distance: a plain match, as before."""
    for name, record, defaults in [
            ("Publication", {"id": 1, "geometry": b"\x01", "event_time": 2},
             {"object_id": None}),
            ("Subscription", {"id": 3, "geometry": b"\x01", "relation": "WITHIN"},
             {"detect": [], "distance_m": None, "roam": None})]:
        v1 = history(name)[0]
        buf = io.BytesIO()
        buf.write(MAGIC + v1.fingerprint)
        fastavro.schemaless_writer(buf, v1.parsed, record)
        assert codec().decode(buf.getvalue()) == (name, {**record, **defaults})


@pytest.mark.parametrize("data,reason", [
    (None, "null"),
    (b"", "marker"),
    (b"\x00\x01" + bytes(8) + b"\x00", "marker"),
    (MAGIC + bytes(8) + b"\x00", "unknown schema fingerprint"),
])
def test_decode_errors_say_why(data, reason):
    with pytest.raises(DecodeError, match=reason):
        codec().decode(data)


def test_truncated_and_trailing_bodies_are_errors():
    c = codec()
    good = c.encode("Publication", {"id": 7, "geometry": b"\x01" * 20, "event_time": 1})
    with pytest.raises(DecodeError, match="corrupt Publication"):
        c.decode(good[:HEADER_LEN + 3])
    with pytest.raises(DecodeError, match="trailing"):
        c.decode(good + b"\x00")


def test_decode_as_checks_the_schema():
    c = codec()
    data = c.encode("Publication", {"id": 7, "geometry": b"", "event_time": 1})
    assert c.decode_as("Publication", data)["id"] == 7
    with pytest.raises(DecodeError, match="expected a Match"):
        c.decode_as("Match", data)
