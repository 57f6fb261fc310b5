"""Real data: CSV accident points and GeoJSON postcode layers replace their synthetic versions."""

from __future__ import annotations

import json

import numpy as np
import pytest
import shapely

from geops.errors import DataError, GeoJSONError
from geops.workload import (
    generate_workload,
    read_points_csv,
    read_polygons_geojson,
    synthetic_world,
    with_real_data,
)


def _write(path, text):
    path.write_text(text, encoding="utf-8")
    return path


def _collection(path, geometries):
    feats = [{"type": "Feature", "properties": {"name": f"cell {i}"},
              "geometry": json.loads(shapely.to_geojson(g))} for i, g in enumerate(geometries)]
    path.write_text(json.dumps({"type": "FeatureCollection", "features": feats}))
    return path


def test_csv_points_are_read_and_bad_rows_reported_with_reasons(tmp_path):
    f = _write(tmp_path / "acc.csv", "\ufeffSeverity,Longitude,Latitude\n"
               "1,-0.12,51.5\n"
               "2,abc,51.5\n"
               "3,,52.0\n"
               "\n"
               "4,-2.5\n"
               "5,200,50\n"
               "6,-1,95\n"
               "7,inf,50\n"
               "8, -3.25 , 55.75 \n")
    pts, bad = read_points_csv(f)
    assert pts.tolist() == [[-0.12, 51.5], [-3.25, 55.75]]
    assert [(b.line, b.reason) for b in bad] == [
        (3, "Longitude 'abc' is not a number"),
        (4, "missing Longitude or Latitude value"),
        (6, "missing Longitude or Latitude value"),
        (7, "Longitude 200.0 outside [-180, 180]"),
        (8, "Latitude 95.0 outside [-90, 90]"),
        (9, "Longitude 'inf' is not finite"),
    ]
    assert str(bad[0]) == "line 3: Longitude 'abc' is not a number"


@pytest.mark.parametrize("header", ["lon,lat", "LAT,LON", "Longitude,Latitude", "x,y", "Y,X"])
def test_csv_column_names_are_case_insensitive_and_in_any_order(tmp_path, header):
    f = _write(tmp_path / "p.csv", f"{header}\n1.5,2.5\n")
    pts, bad = read_points_csv(f)
    swapped = header.lower().startswith(("lat", "y"))
    assert pts.tolist() == [[2.5, 1.5] if swapped else [1.5, 2.5]] and bad == []


@pytest.mark.parametrize("text,message", [
    ("", "empty file"),
    ("a,b\n1,2\n", "must name lon and lat columns"),
    ("lon,latitude\n1,2\n", "must name lon and lat columns"),
])
def test_csv_without_usable_header_is_refused(tmp_path, text, message):
    with pytest.raises(DataError, match=message):
        read_points_csv(_write(tmp_path / "p.csv", text))


def test_missing_files_are_reported(tmp_path):
    with pytest.raises(DataError, match="file not found"):
        read_points_csv(tmp_path / "nope.csv")
    with pytest.raises(GeoJSONError, match="file not found"):
        read_polygons_geojson(tmp_path / "nope.geojson")


def test_geojson_layers_round_trip(tmp_path):
    world = synthetic_world(2, 4, 20, 60)
    for layer, cells in world.layers.items():
        geoms, rejected = read_polygons_geojson(_collection(tmp_path / f"{layer}.geojson", cells))
        assert rejected == []
        assert shapely.equals_exact(geoms, cells, tolerance=0).all()


def test_unusable_features_are_reported_and_skipped(tmp_path):
    good = shapely.box(0, 0, 1, 1)
    bowtie = [[[0, 0], [1, 1], [1, 0], [0, 1], [0, 0]]]
    multi = shapely.MultiPolygon([shapely.box(2, 2, 3, 3), shapely.box(4, 4, 5, 5)])
    def feature(geometry):
        return {"type": "Feature", "properties": {}, "geometry": geometry}

    features = [
        feature(json.loads(shapely.to_geojson(good))),
        feature({"type": "Point", "coordinates": [1, 2]}),
        feature(None),
        feature({"type": "Polygon", "coordinates": bowtie}),
        feature({"type": "Polygon", "coordinates": 7}),
        ["not", "a", "feature"],
        feature(json.loads(shapely.to_geojson(multi))),
    ]
    f = tmp_path / "mixed.geojson"
    f.write_text(json.dumps({"type": "FeatureCollection", "features": features}))
    geoms, rejected = read_polygons_geojson(f)
    assert shapely.equals(geoms, [good, multi]).all()
    reasons = {r.index: r.reason for r in rejected}
    assert reasons[1] == "expected a Polygon or MultiPolygon, got Point"
    assert reasons[2] == "missing geometry"
    assert reasons[3].startswith("invalid geometry: Self-intersection")
    assert reasons[4].startswith("unreadable geometry")
    assert reasons[5] == "not a GeoJSON Feature"
    assert sorted(reasons) == [1, 2, 3, 4, 5]


def test_a_file_that_is_not_a_feature_collection_is_refused(tmp_path):
    f = _write(tmp_path / "x.geojson", '{"type": "Feature"}')
    with pytest.raises(GeoJSONError, match="FeatureCollection"):
        read_polygons_geojson(f)


def test_real_points_and_layers_drive_the_workload(tmp_path):
    # Grids of 16 "sectors", 8 "districts" and 4 "areas" over [0,4]², accidents only in the
    # lower half.
    sectors = shapely.box(*np.array([[x, y, x + 1, y + 1] for x in range(4)
                                     for y in range(4)]).T)
    districts = shapely.box(*np.array([[x, y, x + 2, y + 1] for x in (0, 2)
                                       for y in range(4)]).T)
    areas = shapely.box(*np.array([[x, y, x + 2, y + 2] for x in (0, 2) for y in (0, 2)]).T)
    rng = np.random.default_rng(0)
    points = np.c_[rng.uniform(0, 4, 300), rng.uniform(0, 2, 300)]
    world = with_real_data(synthetic_world(0, 3, 10, 30), points,
                           {"sector": sectors, "district": districts, "area": areas},
                           {"points": "acc.csv", "sector": "s.geojson", "area": "a.geojson"})
    assert world.parent == {}  # nothing nests any more
    w = generate_workload(seed=0, subscriptions=200, publications=2_000, world=world,
                          point_share=0.4)
    labels, geoms = w.publication_layers, w.publications.geoms
    pts = shapely.get_coordinates(geoms[labels == "point"])
    assert {tuple(p) for p in pts} <= {tuple(p) for p in points}
    published = shapely.to_wkb(geoms[labels == "sector"])
    lower = set(shapely.to_wkb(sectors[shapely.bounds(sectors)[:, 1] < 2]))
    assert set(published) == lower   # only sectors covering an accident location
    assert set(shapely.to_wkb(geoms[labels == "area"])) <= set(shapely.to_wkb(areas[[0, 2]]))
    assert w.summary()["sources"] == {"points": "acc.csv", "area": "a.geojson",
                                      "district": "data", "sector": "s.geojson"}
    assert set(shapely.to_wkb(w.subscriptions.geoms[w.subscription_layers == "sector"])) \
        <= set(shapely.to_wkb(sectors))


def test_a_layer_no_accident_falls_in_is_refused():
    far = shapely.box(100, 0, 101, 1)
    world = with_real_data(synthetic_world(0, 3, 10, 30), layers={"district": np.array([far])})
    with pytest.raises(DataError, match=r"no district polygon \(data\) covers any accident "
                                        r"location \(synthetic\)"):
        generate_workload(seed=0, subscriptions=10, publications=100, world=world)


def test_empty_replacements_are_refused():
    world = synthetic_world(0, 3, 10, 30)
    with pytest.raises(DataError, match="no usable sector polygons"):
        with_real_data(world, layers={"sector": np.empty(0, dtype=object)})
    with pytest.raises(DataError, match="no usable accident points"):
        with_real_data(world, points=np.empty((0, 2)))
