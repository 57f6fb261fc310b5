"""`geops subscribe` / `geops publish` put detect kinds, distances and object ids into the
version 2 records (the Kafka producing itself replaced: no broker), refuse bad ones by
feature, and key a moving object's positions by the object id."""

from __future__ import annotations

import json

import pytest
import shapely

import cli.produce
from cli.main import main
from cli.render import to_json, to_text
from kafkaio.sender import record_key
from schemas import codec


@pytest.fixture
def produced(monkeypatch, tmp_path):
    """What would have been produced: (topic, key, decoded record) of every record."""
    sent: list[tuple[str, bytes, dict]] = []
    monkeypatch.setenv("GEOPS_BOOTSTRAP_SERVERS", "127.0.0.1:9")
    monkeypatch.setenv("GEOPS_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setattr(cli.produce, "reachable", lambda cfg: None)

    def encoded(_conf, topic, keys, values, *_args, **_kw):
        sent.extend((topic, k, codec().decode(v)[1]) for k, v in zip(keys, values, strict=True))

    def records(_conf, topic, name, recs, *_args, **_kw):
        sent.extend((topic, record_key(r), codec().decode(codec().encode(name, r))[1])
                    for r in recs)

    monkeypatch.setattr(cli.produce, "produce_encoded", encoded)
    monkeypatch.setattr(cli.produce, "produce_records", records)
    return sent


def _file(path, features: list[tuple[dict, dict]]) -> str:
    path.write_text(json.dumps({"type": "FeatureCollection", "features": [
        {"type": "Feature", "properties": p, "geometry": g} for p, g in features]}))
    return str(path)


POINT = {"type": "Point", "coordinates": [13.4, 52.5]}


def test_subscribe_writes_detect_kinds_and_distances(produced, tmp_path, capsys):
    path = _file(tmp_path / "s.geojson", [
        ({"id": 1, "relation": "within"}, POINT),
        ({"id": 2, "relation": "within", "detect": "Enter,exit", "distance_m": 250}, POINT),
        ({"id": 3, "relation": "within", "detect": ["outside", "Cross"]}, POINT),
        ({"id": 4, "relation": "within", "detect": "enter", "distance_m": 1e3},
         {"type": "Point", "coordinates": [179.999, 0]}),          # across the antimeridian
        ({"id": 5, "relation": "within", "detect": "nearby"}, POINT),
    ])
    assert main(["subscribe", "--file", path]) == 3
    got = {k.decode(): (r["detect"], r["distance_m"]) for _, k, r in produced}
    assert got == {"1": ([], None), "2": (["ENTER", "EXIT"], 250.0),
                   "3": (["OUTSIDE", "CROSS"], None)}
    err = capsys.readouterr().err
    assert "rejected feature 3: subscription 4: its distance fence would cross the antimeridian" \
        in err
    assert "rejected feature 4: properties.detect nearby and faraway need properties.roam" in err


def test_subscribe_flags_are_defaults_for_the_features_without(produced, tmp_path):
    path = _file(tmp_path / "s.geojson", [
        ({"id": 1, "relation": "within"}, POINT),
        ({"id": 2, "relation": "within", "detect": "inside", "distance_m": 10}, POINT)])
    assert main(["subscribe", "--file", path, "--detect", "enter,EXIT,cross",
                 "--distance-m", "500"]) == 0
    assert [(r["detect"], r["distance_m"]) for _, _, r in produced] == [
        (["ENTER", "EXIT", "CROSS"], 500.0), (["INSIDE"], 10.0)]


@pytest.mark.parametrize("flag,value", [("--detect", "enter,sideways"), ("--detect", ","),
                                        ("--distance-m", "-3"), ("--distance-m", "nan")])
def test_subscribe_refuses_bad_flags(produced, tmp_path, capsys, flag, value):
    path = _file(tmp_path / "s.geojson", [({"id": 1, "relation": "within"}, POINT)])
    with pytest.raises(SystemExit):
        main(["subscribe", "--file", path, flag, value])
    err = capsys.readouterr().err
    assert flag in err and value in err and not produced
    if flag == "--detect":  # the kinds there are, named
        assert "enter, exit, inside, outside, cross" in err


def test_publish_writes_object_ids_and_keys_positions_by_object(produced, tmp_path, capsys):
    path = _file(tmp_path / "p.geojson", [
        ({"id": 10, "event_time": 5, "object_id": "car-1"}, POINT),
        ({"id": 11, "event_time": 6}, POINT),
        ({"id": 12, "event_time": 7, "object_id": 17}, POINT),
        ({"id": 13, "event_time": 8, "object_id": {"no": 1}}, POINT),
        ({"id": 14, "vehicle": "v"}, POINT)])
    assert main(["publish", "--file", path]) == 3
    assert [(k, r["object_id"]) for _, k, r in produced] == [
        (b"car-1", "car-1"), (b"11", None), (b"17", "17"), (b"14", None)]
    assert "rejected feature 3: properties.object_id must be a non-empty string or an integer" \
        in capsys.readouterr().err
    produced.clear()
    assert main(["publish", "--file", path, "--object-id-field", "vehicle"]) == 0
    assert [(k, r["object_id"]) for _, k, r in produced] == [
        (b"10", None), (b"11", None), (b"12", None), (b"13", None), (b"v", "v")]


def test_tail_shows_the_new_fields():
    point = shapely.to_wkb(shapely.Point(1, 2))
    assert to_text("Subscription", {"id": 1, "geometry": point, "relation": "WITHIN",
                                    "detect": ["ENTER"], "distance_m": 50.0}) == \
        "subscription 1 WITHIN detect ENTER within 50 m of POINT (1 2)"
    assert to_text("Subscription", {"id": 1, "geometry": point, "relation": "WITHIN",
                                    "detect": [], "distance_m": None}) == \
        "subscription 1 WITHIN POINT (1 2)"
    assert to_text("Publication", {"id": 3, "geometry": point, "event_time": 0,
                                   "object_id": "car"}) == \
        "publication 3 object car at 1970-01-01T00:00:00.000Z POINT (1 2)"
    assert to_text("GeofenceEvent", {"object_id": "car", "subscription_id": 4, "kind": "EXIT",
                                     "reason": "expired", "publication_id": None,
                                     "event_time": 1000, "match_time": 1001, "batch_id": 2}) == \
        ("event EXIT object car subscription 4 at 1970-01-01T00:00:01.000Z (expired), batch 2")
    # jsonl: the line geops match --events writes
    assert to_json("GeofenceEvent", {"object_id": "car", "subscription_id": 4, "kind": "ENTER",
                                     "reason": None, "publication_id": 9, "event_time": 1000,
                                     "match_time": 1001, "batch_id": 2}) == \
        {"object_id": "car", "subscription_id": 4, "kind": "enter", "publication_id": 9,
         "event_time": 1000}
    pair = {"object_id": "car", "subscription_id": 4, "kind": "NEARBY", "reason": None,
            "publication_id": 9, "event_time": 1000, "match_time": 1001, "batch_id": 2,
            "other_object_id": "van", "distance_m": 1234.5}
    assert to_text("GeofenceEvent", pair) == ("event NEARBY object car subscription 4 at "
                                              "1970-01-01T00:00:01.000Z (publication 9, other "
                                              "van 1,234.5 m away), batch 2")
    assert to_json("GeofenceEvent", pair) == {
        "object_id": "car", "subscription_id": 4, "kind": "nearby", "publication_id": 9,
        "event_time": 1000, "other_object_id": "van", "distance_m": 1234.5}


def test_subscribe_writes_roaming_fences(produced, tmp_path, capsys):
    path = _file(tmp_path / "s.geojson", [
        ({"id": 1, "relation": "within", "roam": {"distance_m": 500, "match": "courier-*"}},
         POINT),
        ({"id": 2, "relation": "within", "detect": "enter,faraway",
          "roam": {"distance_m": 20.5, "match": "van-[0-9]"}}, POINT),
        ({"id": 3, "relation": "within", "roam": {"distance_m": 500, "match": "c-[0"}}, POINT),
        ({"id": 4, "relation": "within"}, POINT)])
    assert main(["subscribe", "--file", path]) == 3
    got = {k.decode(): (r["detect"], r["roam"]) for _, k, r in produced}
    assert got == {"1": (["NEARBY", "FARAWAY"], {"distance_m": 500.0, "match": "courier-*"}),
                   "2": (["ENTER", "FARAWAY"], {"distance_m": 20.5, "match": "van-[0-9]"}),
                   "4": ([], None)}
    assert "rejected feature 2: properties.roam match 'c-[0' has an unclosed '['" in (
        capsys.readouterr().err)
