"""`geops match --events`: a tiny hand-made file whose events are known by hand, and the
refusal of bad detect kinds, distances, object ids and times."""

from __future__ import annotations

import json

import pytest

from cli.main import main


def _feature(props: dict, geometry: dict) -> dict:
    return {"type": "Feature", "properties": props, "geometry": geometry}


def _box(x0: float, y0: float, x1: float, y1: float) -> dict:
    return {"type": "Polygon", "coordinates": [[[x0, y0], [x1, y0], [x1, y1], [x0, y1],
                                                [x0, y0]]]}


def _point(x: float, y: float) -> dict:
    return {"type": "Point", "coordinates": [x, y]}


def _write(path, features: list[dict]) -> str:
    path.write_text(json.dumps({"type": "FeatureCollection", "features": features}))
    return str(path)


SUBSCRIPTIONS = [
    _feature({"id": 1, "relation": "intersects", "detect": ["enter", "EXIT"]}, _box(0, 0, 10, 10)),
    _feature({"id": 2, "relation": "within", "detect": "inside, Outside"}, _box(5, 5, 15, 15)),
    _feature({"id": 3, "relation": "intersects"}, _box(0, 0, 100, 100)),          # plain
    # a circle of 1 km around a point on the equator: 0.005 degrees east is 557 m away
    _feature({"id": 4, "relation": "intersects", "detect": "enter", "distance_m": 1000},
             _point(50, 0)),
]

# (publication id, object, time, x, y), in file order
PUBLICATIONS = [(10, "car", 1_000, 1, 1), (11, "car", 2_000, 7, 7), (12, "bike", 2_500, 50.005, 0),
                (13, None, 2_600, 7, 7), (14, "car", 3_000, 8, 8), (15, "car", 1_500, 1, 1),
                (17, "car", 4_000, 12, 12), (18, 42, 5_000, 2, 2), (16, "bike", 100_000, 20, 20)]

EXPECTED = [
    {"object_id": "car", "subscription_id": 1, "kind": "enter", "publication_id": 10,
     "event_time": 1_000},
    {"object_id": "car", "subscription_id": 2, "kind": "outside", "publication_id": 10,
     "event_time": 1_000},
    # 11: car stays in 1 (inside not asked) and enters 2 (enter not asked): nothing
    {"object_id": "bike", "subscription_id": 2, "kind": "outside", "publication_id": 12,
     "event_time": 2_500},
    {"object_id": "bike", "subscription_id": 4, "kind": "enter", "publication_id": 12,
     "event_time": 2_500},
    # 13 has no object: no position
    {"object_id": "car", "subscription_id": 2, "kind": "inside", "publication_id": 14,
     "event_time": 3_000},
    # 15 is older than car's last (3,000): dropped, no false exit
    {"object_id": "car", "subscription_id": 1, "kind": "exit", "publication_id": 17,
     "event_time": 4_000},
    {"object_id": "car", "subscription_id": 2, "kind": "inside", "publication_id": 17,
     "event_time": 4_000},
    {"object_id": "42", "subscription_id": 1, "kind": "enter", "publication_id": 18,
     "event_time": 5_000},
    {"object_id": "42", "subscription_id": 2, "kind": "outside", "publication_id": 18,
     "event_time": 5_000},
    # 16: bike unseen for 97.5 s > 60 s: expired (4 asks for no exit), then a first position
    {"object_id": "bike", "subscription_id": 2, "kind": "outside", "publication_id": 16,
     "event_time": 100_000},
    # the end of the file (latest time 100,000): 42 unseen since 5,000 expires from 1; car
    # was only in 2, which asks for no exit
    {"object_id": "42", "subscription_id": 1, "kind": "exit", "publication_id": None,
     "event_time": 65_000, "reason": "expired"},
]


def _publications(rows) -> list[dict]:
    return [_feature({"id": pid, "event_time": t, **({} if obj is None else {"object_id": obj})},
                     _point(x, y)) for pid, obj, t, x, y in rows]


def test_events_known_by_hand(tmp_path, capsys):
    subs = _write(tmp_path / "subs.geojson", SUBSCRIPTIONS)
    pubs = _write(tmp_path / "pubs.geojson", _publications(PUBLICATIONS))
    out = tmp_path / "events.jsonl"
    assert main(["match", "--events", "--subscriptions", subs, "--publications", pubs,
                 "--out", str(out), "--object-ttl", "1m"]) == 0
    lines = out.read_text().splitlines()
    assert [json.loads(line) for line in lines] == EXPECTED
    assert all(list(json.loads(line))[:5] == ["object_id", "subscription_id", "kind",
                                              "publication_id", "event_time"] for line in lines)
    err = capsys.readouterr().err
    assert "11 events (1 expiries) of 8 positions among 9 publications" in err
    assert "3 detecting fences of 4 subscriptions" in err and "1 positions older" in err


def test_cross_by_hand(tmp_path):
    """A track through a fence between two positions out of it crosses it; one from a
    position in it, a late one, or over a TTL gap does not."""
    subs = _write(tmp_path / "subs.geojson", [
        _feature({"id": 5, "relation": "intersects", "detect": "cross,exit"},
                 _box(9, 9, 9.5, 9.5))])
    rows = [(1, "car", 1_000, 8, 8), (2, "car", 2_000, 12, 12),      # through: cross
            (3, "car", 3_000, 9.2, 9.2), (4, "car", 4_000, 8, 8),     # in, out: exit
            (5, "car", 3_500, 12, 12), (6, "car", 5_000, 8, 12),      # late; misses
            (7, "car", 200_000, 10.4, 6.6)]  # through, but after the TTL: a first position
    pubs = _write(tmp_path / "pubs.geojson", _publications(rows))
    out = tmp_path / "events.jsonl"
    assert main(["match", "--events", "--subscriptions", subs, "--publications", pubs,
                 "--out", str(out), "--object-ttl", "1m"]) == 0
    assert [(e["kind"], e["publication_id"]) for e in map(
        json.loads, out.read_text().splitlines())] == [("cross", 2), ("exit", 4)]


def test_another_object_id_field_and_the_default_ttl(tmp_path):
    subs = _write(tmp_path / "subs.geojson", SUBSCRIPTIONS)
    pubs = [_feature({"id": 1, "event_time": 0, "vehicle": "v"}, _point(1, 1)),
            _feature({"id": 2, "event_time": 700_000, "object_id": "ignored"}, _point(1, 1))]
    out = tmp_path / "events.jsonl"
    assert main(["match", "--events", "--subscriptions", subs, "--publications",
                 _write(tmp_path / "pubs.geojson", pubs), "--out", str(out),
                 "--object-id-field", "vehicle"]) == 0
    # one position only (the other has no "vehicle"); it is the latest: nothing expires
    assert [json.loads(x)["kind"] for x in out.read_text().splitlines()] == ["enter", "outside"]


@pytest.mark.parametrize("props,reason", [
    ({"detect": "sideways"}, "properties.detect must be a list or a comma-separated string of "
                             "enter, exit, inside, outside, cross, nearby, faraway, got "
                             "'sideways'"),
    ({"detect": 7}, "properties.detect must be a list or a comma-separated string of enter, "
                    "exit, inside, outside, cross, nearby, faraway, got 7"),
    ({"detect": ["enter", None]}, "properties.detect must be"),
    ({"detect": "enter", "distance_m": -5}, "properties.distance_m must be a finite number of "
                                            "metres above zero, got -5"),
    ({"detect": "enter", "distance_m": "5"}, "properties.distance_m must be a finite number of "
                                             "metres above zero, got '5'"),
    ({"distance_m": 50}, "properties.distance_m (50) needs properties.detect"),
    ({"roam": {"distance_m": 50, "match": "c-*"}, "distance_m": 50},
     "properties.distance_m (50) needs properties.detect"),
    ({"detect": "nearby"}, "properties.detect nearby and faraway need properties.roam"),
    ({"roam": {"distance_m": -1, "match": "c-*"}}, "properties.roam distance_m must be a number "
                                                   "of metres above zero and at most 100,000, "
                                                   "got -1"),
    ({"roam": {"distance_m": 50, "match": "c-[0"}}, "properties.roam match 'c-[0' has an "
                                                    "unclosed '[' at 2"),
    ({"roam": "c-*"}, "properties.roam must be an object"),
    ({"detect": "enter", "distance_m": 5000}, "subscription 9: its distance fence would cross "
                                              "the antimeridian"),
])
def test_bad_fences_are_refused_naming_feature_property_and_value(tmp_path, capsys, props,
                                                                  reason):
    bad = _feature({"id": 9, "relation": "intersects", **props}, _point(179.99, 0))
    subs = _write(tmp_path / "subs.geojson", [*SUBSCRIPTIONS, bad])
    pubs = _write(tmp_path / "pubs.geojson", _publications(PUBLICATIONS))
    out = tmp_path / "events.jsonl"
    assert main(["match", "--events", "--subscriptions", subs, "--publications", pubs,
                 "--out", str(out), "--object-ttl", "1m"]) == 3
    err = capsys.readouterr().err
    assert f"subs.geojson: rejected feature 4: {reason}" in err
    assert [json.loads(line) for line in out.read_text().splitlines()] == EXPECTED


@pytest.mark.parametrize("props,reason", [
    ({"id": 99, "event_time": 1, "object_id": ["a"]},
     "properties.object_id must be a non-empty string or an integer (an object id), got ['a']"),
    ({"id": 99, "event_time": 1, "object_id": ""}, "properties.object_id must be a non-empty"),
    ({"id": 99, "object_id": "a"}, "missing properties.event_time (a position of an object "
                                   "needs one)"),
])
def test_bad_positions_are_refused_naming_feature_property_and_value(tmp_path, capsys, props,
                                                                     reason):
    subs = _write(tmp_path / "subs.geojson", SUBSCRIPTIONS)
    pubs = _write(tmp_path / "pubs.geojson",
                  [_feature(props, _point(1, 1)), *_publications(PUBLICATIONS)])
    out = tmp_path / "events.jsonl"
    assert main(["match", "--events", "--subscriptions", subs, "--publications", pubs,
                 "--out", str(out), "--object-ttl", "60s"]) == 3
    assert f"pubs.geojson: rejected feature 0: {reason}" in capsys.readouterr().err
    assert [json.loads(line) for line in out.read_text().splitlines()] == EXPECTED


def test_a_bad_ttl_is_a_usage_error(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["match", "--events", "--subscriptions", "s", "--publications", "p", "--out",
              str(tmp_path / "o"), "--object-ttl", "0"])
    assert "--object-ttl" in capsys.readouterr().err


def test_the_events_flags_need_events(tmp_path, capsys):
    subs = _write(tmp_path / "subs.geojson", SUBSCRIPTIONS)
    pubs = _write(tmp_path / "pubs.geojson", _publications(PUBLICATIONS))
    assert main(["match", "--subscriptions", subs, "--publications", pubs, "--out",
                 str(tmp_path / "o"), "--object-ttl", "5m"]) == 2
    assert ("--object-id-field, --object-ttl and --roam-lateness need --events"
            in capsys.readouterr().err)
