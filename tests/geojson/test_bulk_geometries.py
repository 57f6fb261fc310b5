"""Building GeoJSON geometries in bulk gives what GEOS's GeoJSON reader gives, one by one:
the same geometries, and for a malformed one the same reason."""

from __future__ import annotations

import json

import numpy as np
import pytest
import shapely

from geops.geojson import read_subscriptions
from geops.geojson_geoms import SMALLEST_CHUNK, geometries

SQUARE = [[0, 0], [1, 0], [1, 1], [0, 1], [0, 0]]
HOLE = [[0.2, 0.2], [0.4, 0.2], [0.4, 0.4], [0.2, 0.2]]
OBJECTS = [
    {"type": "Point", "coordinates": [1.5, 2]},
    {"type": "Point", "coordinates": [1, 2, 3]},
    {"type": "LineString", "coordinates": [[0, 0], [1, 1], [2, 0.5]]},
    {"type": "MultiPoint", "coordinates": [[0, 0], [3, 4]]},
    {"type": "Polygon", "coordinates": [SQUARE, HOLE]},
    {"type": "Polygon", "coordinates": [[[0, 0, 1], [1, 0, 1], [1, 1, 2], [0, 0, 1]]]},
    {"type": "MultiLineString", "coordinates": [[[0, 0], [1, 1]], [[2, 2], [3, 3], [4, 2]]]},
    {"type": "MultiPolygon", "coordinates": [[SQUARE], [[[5, 5], [6, 5], [6, 6], [5, 5]]]]},
    {"type": "Polygon", "coordinates": [[[0, 0], [1, 0], [1, 1], [0, 1]]]},   # not closed
    {"type": "Polygon", "coordinates": [[[0, 0], [1, 0], [0, 0]]]},           # 3 positions
    {"type": "Polygon", "coordinates": []},                                   # empty
    {"type": "LineString", "coordinates": [[0, 0]]},                          # 1 position
    {"type": "Point", "coordinates": ["1.5", 2]},                             # a string
    {"type": "Point", "coordinates": [True, 2]},                              # a boolean
    {"type": "Point", "coordinates": [None, 2]},                              # null
    {"type": "Point", "coordinates": [1, 2, 3, 4]},                           # 4 numbers
    {"type": "LineString", "coordinates": [[0, 0], [1, 1, 1]]},               # 2-D and 3-D
    {"type": "Polygon", "coordinates": [[0, 0], [1, 1]]},                     # too shallow
    {"type": "MultiPoint", "coordinates": []},
    {"type": "polygon", "coordinates": [SQUARE]},                             # type's case
    {"type": "GeometryCollection", "geometries": [{"type": "Point", "coordinates": [0, 0]}]},
    {"type": "Bogus", "coordinates": [0, 0]},
    {"type": "Point"},
    "not an object",
    {"type": "Point", "coordinates": [float("nan"), 1.0]},
    {"type": "Point", "coordinates": [10**400, 1.0]},
]


def _same(a, b) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return shapely.equals_exact(a, b, tolerance=0) and a.has_z == b.has_z


@pytest.mark.parametrize("copies", [1, SMALLEST_CHUNK * 3])
def test_bulk_and_one_by_one_agree_on_good_and_bad_objects(copies):
    objects = [obj for obj in OBJECTS for _ in range(copies)]
    bulk, bulk_errors, finite = geometries(objects)
    each, each_errors, _ = geometries(objects, bulk=False)
    assert all(shapely.get_coordinates(g).size and np.isfinite(shapely.get_coordinates(
        g, include_z=True)[:, :2]).all() for g, f in zip(bulk, finite, strict=True) if f)
    assert bulk_errors == each_errors
    assert all(_same(a, b) for a, b in zip(bulk, each, strict=True))
    assert len(bulk_errors) >= 10 * copies  # the malformed ones are reported
    assert all(reason.startswith("unreadable geometry: ") for reason in bulk_errors.values())


def test_a_bad_geometry_among_many_is_rejected_alone(tmp_path):
    rng = np.random.default_rng(2)
    features = []
    for i in range(1000):
        x, y = rng.uniform(-10, 10, 2).round(6).tolist()
        ring = [[x, y], [x + 1, y], [x + 1, y + 1], [x, y + 1], [x, y]]
        if i == 517:
            ring = ring[:-1]  # not closed
        features.append({"type": "Feature", "properties": {"id": i, "relation": "within"},
                         "geometry": {"type": "Polygon", "coordinates": [ring]}})
    path = tmp_path / "s.geojson"
    path.write_text(json.dumps({"type": "FeatureCollection", "features": features}))
    subs, kept, rejected = read_subscriptions(path)
    old, old_kept, old_rejected = read_subscriptions(path, bulk=False)
    assert kept == old_kept == [i for i in range(1000) if i != 517]
    assert [str(r) for r in rejected] == [str(r) for r in old_rejected]
    assert str(rejected[0]).startswith("feature 517: unreadable geometry: ")
    assert shapely.equals_exact(subs.geoms, old.geoms, tolerance=0).all()


def test_json_that_orjson_refuses_is_read_as_before(tmp_path):
    path = tmp_path / "nan.geojson"
    path.write_text('{"type": "FeatureCollection", "features": [{"type": "Feature", '
                    '"properties": {"id": 1, "relation": "within"}, "geometry": {"type": '
                    '"Point", "coordinates": [NaN, 1.0]}}, {"type": "Feature", "properties": '
                    '{"id": 2, "relation": "within"}, "geometry": {"type": "Point", '
                    '"coordinates": [1.0, 1.0]}}]}')
    subs, kept, rejected = read_subscriptions(path)
    _, _, old_rejected = read_subscriptions(path, bulk=False)
    assert kept == [1] and list(subs.ids) == [2]
    assert [str(r) for r in rejected] == [str(r) for r in old_rejected]
