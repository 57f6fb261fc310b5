"""`geops match --events` with roaming fences: a hand-made file whose events are known by hand,
generated moving objects against the brute-force loop of ``tests.geops.test_roam`` (the
offline run is the stream's oracle, so it must be the rule exactly), the positions that come
too late, a bad lateness, and a roaming fence among fixed ones, each matched as before."""

from __future__ import annotations

import json

import numpy as np
import pytest
import shapely

from cli.main import main
from geops.events import Event, PairEvent
from geops.fences import GEOD
from tests.geops.test_match_events import _box, _feature, _point, _write
from tests.geops.test_roam import SPECS, brute_force, moving_objects

LON, LAT = 13.4, 52.5


def east(metres: float) -> list[float]:
    lon, lat, _ = GEOD.fwd(LON, LAT, 90.0, metres)
    return [float(lon), float(lat)]


def _positions(rows) -> list[dict]:
    return [_feature({"id": pid, "object_id": obj, "event_time": t}, geometry)
            for pid, obj, t, geometry in rows]


def _run(tmp_path, subs: list[dict], pubs: list[dict], *flags: str) -> tuple[int, list[dict]]:
    out = tmp_path / "events.jsonl"
    code = main(["match", "--events", "--subscriptions", _write(tmp_path / "s.geojson", subs),
                 "--publications", _write(tmp_path / "p.geojson", pubs), "--out", str(out),
                 *flags])
    return code, [json.loads(line) for line in out.read_text().splitlines()]


def test_roaming_events_known_by_hand(tmp_path, capsys):
    subs = [_feature({"id": 5, "relation": "within",
                      "roam": {"distance_m": 100, "match": "courier-*"}}, _point(0, 0)),
            _feature({"id": 6, "relation": "intersects", "detect": "faraway",
                      "roam": {"distance_m": 300, "match": "*"}}, _point(0, 0))]
    pubs = _positions([(1, "courier-a", 0, {"type": "Point", "coordinates": east(0)}),
                       (2, "courier-b", 1_000, {"type": "Point", "coordinates": east(80)}),
                       (3, "van", 2_000, {"type": "Point", "coordinates": east(500)}),
                       (4, "courier-b", 3_000, {"type": "Point", "coordinates": east(400)})])
    code, events = _run(tmp_path, subs, pubs, "--roam-lateness", "0")
    assert code == 0
    assert [(e["object_id"], e["subscription_id"], e["kind"], e["publication_id"],
             e["other_object_id"]) for e in events] == [
        ("courier-b", 5, "nearby", 2, "courier-a"),
        # 6 asks only for faraway: courier-b parts from courier-a past 1.1 × 300 m
        ("courier-b", 5, "faraway", 4, "courier-a"),
        ("courier-b", 6, "faraway", 4, "courier-a")]
    assert abs(events[0]["distance_m"] - 80) < 1e-3 and abs(events[2]["distance_m"] - 400) < 1e-3
    assert "3 of 2 roaming fences, 0 positions too late" in capsys.readouterr().err


def _as_features(positions) -> list[dict]:
    return [_feature({"id": pid, "object_id": name, "event_time": t},
                     json.loads(shapely.to_geojson(geom))) for name, pid, t, geom in positions]


def _roam_subscriptions() -> list[dict]:
    return [_feature({"id": sid, "relation": "intersects",
                      "roam": {"distance_m": d, "match": glob}}, _point(0, 0))
            for sid, d, glob in SPECS]


def test_generated_objects_give_the_events_of_every_pair(tmp_path):
    positions = moving_objects(7)
    rng = np.random.default_rng(7)  # in file order a little out of time order
    shuffled = sorted(positions, key=lambda p: p[2] + rng.uniform(0, 1_000))
    code, events = _run(tmp_path, _roam_subscriptions(), _as_features(shuffled),
                        "--object-ttl", "2s", "--roam-lateness", "1s")
    assert code == 0
    # GeoJSON keeps coordinates as they were: the same distances to the bit
    expected = brute_force(positions, SPECS, ttl_ms=2_000)
    assert len(expected) > 20
    assert events == [json.loads(e.to_json()) for e in expected]


def test_late_positions_are_left_out_and_counted(tmp_path, capsys):
    positions = moving_objects(8, objects=10, steps=20)
    shuffled = sorted(positions, key=lambda p: -p[2])      # the file backwards
    code, events = _run(tmp_path, _roam_subscriptions(), _as_features(shuffled),
                        "--roam-lateness", "0")
    end = max(p[2] for p in positions)                     # all late but the last ones
    last = [p for p in positions if p[2] == end]
    assert code == 0 and events == [json.loads(e.to_json())
                                     for e in brute_force(last, SPECS, ttl_ms=600_000)]
    assert (f"{len(positions) - len(last):,} positions too late"
            in capsys.readouterr().err)


def test_a_bad_lateness_is_a_usage_error(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["match", "--events", "--subscriptions", "s", "--publications", "p", "--out",
              str(tmp_path / "o"), "--roam-lateness=soon"])
    assert exit_.value.code == 2 and "--roam-lateness" in capsys.readouterr().err


def test_a_roaming_fence_among_fixed_ones_changes_none_of_theirs(tmp_path):
    fixed = [_feature({"id": 1, "relation": "intersects", "detect": "enter,exit"},
                      _box(LON - 0.001, LAT - 0.001, LON + 0.001, LAT + 0.001))]
    roaming = [_feature({"id": 7, "relation": "intersects",
                         "roam": {"distance_m": 400, "match": "*"}}, _point(0, 0))]
    pubs = _positions([(1, "a", 0, {"type": "Point", "coordinates": east(0)}),
                       (2, "b", 10, {"type": "Point", "coordinates": east(30)}),
                       (3, "a", 20, {"type": "Point", "coordinates": east(3000)})])
    _, alone = _run(tmp_path, fixed, pubs)
    _, both = _run(tmp_path, [*fixed, *roaming], pubs)
    assert [e["kind"] for e in alone] == ["enter", "enter", "exit"]
    assert [e for e in both if "other_object_id" not in e] == alone
    assert [(e["kind"], e["object_id"], e["other_object_id"]) for e in both
            if "other_object_id" in e] == [("nearby", "b", "a"), ("faraway", "a", "b")]


def test_event_json_names_the_other_object_only_for_roaming_events():
    assert "other_object_id" not in Event("a", 1, "enter", 2, 3).to_json()
    line = json.loads(PairEvent("a", 1, "faraway", None, 3, "expired", "b").to_json())
    assert line == {"object_id": "a", "subscription_id": 1, "kind": "faraway",
                    "publication_id": None, "event_time": 3, "reason": "expired",
                    "other_object_id": "b"}
