"""Avro container files of Subscription and Publication records as input: the same rules as
GeoJSON, rejected records reported by index with their reason."""

from __future__ import annotations

import numpy as np
import shapely

from geops.avro_input import (
    is_avro,
    read_fence_subscriptions_avro,
    read_positions_avro,
    read_publications_avro,
    read_subscriptions_avro,
)
from geops.errors import GeoJSONError
from geops.workload.output import write_avro

SQUARE = shapely.to_wkb(shapely.box(0, 0, 1, 1))
BOWTIE = shapely.to_wkb(shapely.from_wkt("POLYGON ((0 0, 1 1, 1 0, 0 1, 0 0))"))


def test_subscriptions_with_bad_geometries_are_rejected_by_index(tmp_path):
    path = tmp_path / "s.avro"
    write_avro(path, "Subscription", iter([
        {"id": 7, "geometry": SQUARE, "relation": "WITHIN"},
        {"id": 8, "geometry": b"\x01\x02garbage", "relation": "COVERS"},
        {"id": 9, "geometry": BOWTIE, "relation": "CONTAINS"},
        {"id": -3, "geometry": shapely.to_wkb(shapely.Point(2, 3)), "relation": "DISJOINT"},
    ]))
    assert is_avro(path)
    subs, kept, rejected = read_subscriptions_avro(path)
    assert kept == [0, 3] and list(subs.ids) == [7, -3] and list(subs.relations) == [8, 9]
    assert shapely.equals(subs.geoms[0], shapely.box(0, 0, 1, 1))
    assert [r.index for r in rejected] == [1, 2]
    assert str(rejected[0]).startswith("record 1: unreadable geometry: ")
    assert str(rejected[1]).startswith("record 2: invalid geometry: Self-intersection")


def test_publications_and_a_file_of_the_wrong_schema(tmp_path):
    path = tmp_path / "p.avro"
    write_avro(path, "Publication", iter([
        {"id": 1, "geometry": shapely.to_wkb(shapely.Point(1, 2)), "event_time": 1700},
    ]))
    pubs, kept, rejected = read_publications_avro(path)
    assert kept == [0] and not rejected and list(pubs.event_time) == [1700]
    try:
        read_subscriptions_avro(path)
    except GeoJSONError as exc:
        assert "not an Avro file of Subscription records" in str(exc)
    else:
        raise AssertionError("a file of publications was read as subscriptions")
    (tmp_path / "x.geojson").write_text("{}")
    assert not is_avro(tmp_path / "x.geojson") and not is_avro(tmp_path / "missing")


def test_detect_kinds_distances_and_object_ids_are_read_and_checked(tmp_path):
    path = tmp_path / "s.avro"
    write_avro(path, "Subscription", iter([
        {"id": 1, "geometry": SQUARE, "relation": "WITHIN", "detect": ["ENTER", "EXIT"],
         "distance_m": 50.0},
        {"id": 2, "geometry": SQUARE, "relation": "WITHIN", "distance_m": 50.0},
        {"id": 3, "geometry": SQUARE, "relation": "WITHIN", "detect": ["INSIDE"],
         "distance_m": -1.0},
        {"id": 4, "geometry": SQUARE, "relation": "WITHIN"},
    ]))
    subs, detect, distance, kept, rejected = read_fence_subscriptions_avro(path)
    assert kept == [0, 3] and subs.ids.tolist() == [1, 4] and detect.tolist() == [3, 0]
    assert distance[0] == 50.0 and np.isnan(distance[1])
    assert [str(r) for r in rejected] == [
        "record 1: distance_m (50.0) needs detect kinds: a distance makes a fence for geofence "
        "events, plain matching uses the geometry itself",
        "record 2: distance_m must be a finite number of metres above zero, got -1.0"]
    path = tmp_path / "p.avro"
    point = shapely.to_wkb(shapely.Point(1, 2))
    write_avro(path, "Publication", iter([
        {"id": 1, "geometry": point, "event_time": 5, "object_id": "car"},
        {"id": 2, "geometry": point, "event_time": 6},
        {"id": 3, "geometry": point, "event_time": 7, "object_id": ""}]))
    pubs, objects, kept, rejected = read_positions_avro(path)
    assert kept == [0, 1] and objects.tolist() == ["car", None] and pubs.ids.tolist() == [1, 2]
    assert [str(r) for r in rejected] == ["record 2: object_id must be a non-empty string, "
                                          "got ''"]
