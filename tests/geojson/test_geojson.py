"""GeoJSON input rules and geometry validation shared by publish, subscribe and match."""

from __future__ import annotations

import json

import numpy as np
import pytest
import shapely

from geops.errors import GeoJSONError
from geops.geojson import (
    read_publications,
    read_subscriptions,
    write_publications,
    write_subscriptions,
)
from geops.model import (
    Publications,
    Relation,
    Subscriptions,
    geometries_from_wkb,
    geometry_problems,
)


def fc(path, features):
    path.write_text(json.dumps({"type": "FeatureCollection", "features": features}))
    return path


def test_geometry_problems_names_each_defect():
    geoms = np.array([
        shapely.Point(1, 2),
        None,
        shapely.from_wkt("POLYGON EMPTY"),
        shapely.Point(float("nan"), 1),
        shapely.Point(1, 2, float("inf")),
        shapely.from_wkt("POLYGON ((0 0, 1 1, 1 0, 0 1, 0 0))"),
        shapely.from_wkt("POINT Z (1 2 3)"),
        shapely.from_wkt("MULTIPOLYGON (((0 0, 1 0, 1 1, 0 0)), ((2 2, 3 2, 3 3, 2 2)))"),
    ], dtype=object)
    problems = geometry_problems(geoms)
    assert problems[0] is None and problems[6] is None and problems[7] is None
    assert problems[1] == "missing geometry"
    assert problems[2] == "empty geometry"
    assert problems[3].startswith("non-finite") and problems[4].startswith("non-finite")
    assert problems[5].startswith("invalid geometry: Self-intersection")


def test_geometries_from_wkb_reads_each_distinct_record_once():
    square = shapely.box(0, 0, 1, 1)
    bowtie = shapely.from_wkt("POLYGON ((0 0, 1 1, 1 0, 0 1, 0 0))")
    wkbs = [square.wkb, bowtie.wkb, b"junk", square.wkb, shapely.Point(3, 4).wkb, bowtie.wkb]
    geoms, problems = geometries_from_wkb(wkbs)
    assert geoms[0] is geoms[3] and geoms[1] is geoms[5] and geoms[2] is None
    assert shapely.equals_identical(geoms[[0, 4]], [square, shapely.Point(3, 4)]).all()
    assert problems[0] is None and problems[3] is None and problems[4] is None
    assert problems[1] == problems[5] and problems[1].startswith("invalid geometry")
    assert problems[2] == "missing geometry"
    assert [len(x) for x in geometries_from_wkb([])] == [0, 0]


def test_subscriptions_rules(tmp_path):
    path = fc(tmp_path / "s.json", [
        {"type": "Feature", "properties": {"id": 1, "relation": "within"},
         "geometry": {"type": "Point", "coordinates": [0, 0]}},
        {"type": "Feature", "properties": {"id": 2.0, "relation": "Covered_By"},
         "geometry": {"type": "Point", "coordinates": [0, 0]}},
        {"type": "Feature", "properties": {"id": 2.5, "relation": "within"},
         "geometry": {"type": "Point", "coordinates": [0, 0]}},
        {"type": "Feature", "properties": {"id": True, "relation": "within"},
         "geometry": {"type": "Point", "coordinates": [0, 0]}},
        {"type": "Feature", "properties": {"id": 5},
         "geometry": {"type": "Point", "coordinates": [0, 0]}},
        {"type": "Feature", "properties": {"id": 6, "relation": "within"},
         "geometry": {"type": "Bogus"}},
        "not a feature",
    ])
    subs, kept, rejected = read_subscriptions(path)
    assert list(subs.ids) == [1, 2] and kept == [0, 1]
    assert [Relation(r) for r in subs.relations] == [Relation.WITHIN, Relation.COVERED_BY]
    reasons = {r.index: r.reason for r in rejected}
    assert reasons[2].startswith("properties.id must be an integer")
    assert reasons[3].startswith("properties.id must be an integer")
    assert reasons[4] == "missing properties.relation"
    assert reasons[5].startswith("unreadable geometry")
    assert reasons[6] == "not a GeoJSON Feature"


def test_publications_event_time(tmp_path):
    path = fc(tmp_path / "p.json", [
        {"type": "Feature", "properties": {"id": 1, "event_time": 1700000000000},
         "geometry": {"type": "Point", "coordinates": [0, 0]}},
        {"type": "Feature", "properties": {"id": 1},
         "geometry": {"type": "Point", "coordinates": [1, 0]}},
        {"type": "Feature", "properties": {"id": 3, "event_time": "yesterday"},
         "geometry": {"type": "Point", "coordinates": [1, 0]}},
    ])
    pubs, kept, rejected = read_publications(path, default_event_time=42)
    assert list(pubs.ids) == [1, 1] and list(pubs.event_time) == [1700000000000, 42]
    assert kept == [0, 1] and rejected[0].index == 2


@pytest.mark.parametrize("content,needle", [
    ("{", "not valid JSON"), ('{"type": "Feature"}', "FeatureCollection"),
    ('{"type": "FeatureCollection", "features": 3}', "must be a list"),
])
def test_whole_file_errors(tmp_path, content, needle):
    path = tmp_path / "x.json"
    path.write_text(content)
    with pytest.raises(GeoJSONError, match=needle):
        read_publications(path)


def test_write_then_read_round_trip(tmp_path):
    subs = Subscriptions([4, 9], [shapely.box(0, 0, 1, 1), shapely.Point(0.3, 0.7)],
                         [Relation.DISJOINT, Relation.TOUCHES])
    write_subscriptions(tmp_path / "s.json", subs, extra={"layer": np.array(["a", "b"])})
    back, _, rejected = read_subscriptions(tmp_path / "s.json")
    assert not rejected and list(back.ids) == [4, 9]
    assert list(back.relations) == list(subs.relations)
    assert all(shapely.equals_exact(back.geoms, subs.geoms, tolerance=0))
    pubs = Publications([1], [shapely.box(0.1, 0.1, 0.123456789012345, 2)], [5])
    write_publications(tmp_path / "p.json", pubs)
    back, _, _ = read_publications(tmp_path / "p.json")
    assert shapely.equals_exact(back.geoms[0], pubs.geoms[0], tolerance=0)
    assert back.event_time[0] == 5


def test_positions_event_times_and_object_ids(tmp_path):
    from geops.geojson import read_positions

    path = tmp_path / "p.geojson"
    point = {"type": "Point", "coordinates": [1, 2]}
    path.write_text(json.dumps({"type": "FeatureCollection", "features": [
        {"type": "Feature", "properties": p, "geometry": point} for p in (
            {"id": 1, "object_id": "a", "event_time": 5}, {"id": 2},
            {"id": 3, "object_id": "b"}, {"id": 4, "event_time": None},
            {"id": 5, "object_id": 7, "event_time": 6})]}))
    pubs, objects, kept, rejected = read_positions(path)
    assert kept == [0, 1, 4] and objects.tolist() == ["a", None, "7"]
    assert pubs.event_time.tolist() == [5, 0, 6]
    assert [str(r) for r in rejected] == [
        "feature 2: missing properties.event_time (a position of an object needs one)",
        "feature 3: properties.event_time must be epoch milliseconds, got None"]
