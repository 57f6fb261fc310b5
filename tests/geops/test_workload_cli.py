"""`geops generate`: files written, Avro matching GeoJSON, workload.json, flag errors, real data."""

from __future__ import annotations

import json

import fastavro
import pytest
import shapely

from cli.generate import parse_time
from cli.main import main
from config.exitcodes import EXIT_OK, EXIT_REJECTED, EXIT_USAGE
from geops.geojson import read_publications, read_subscriptions
from geops.model import Relation
from geops.workload.output import FILES

SMALL = ["--world-size", "6,40,150", "--subscriptions", "300", "--publications", "500"]


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    out = tmp_path_factory.mktemp("gen")
    code = main(["generate", "--out", str(out), "--seed", "3", *SMALL,
                 "--start-time", "2025-03-01T00:00:00Z", "--interval-ms", "10"])
    return code, out


def _avro(path):
    with open(path, "rb") as fh:
        reader = fastavro.reader(fh)
        return reader.writer_schema, list(reader)


def test_all_files_are_written(generated):
    code, out = generated
    assert code == EXIT_OK
    assert sorted(p.name for p in out.iterdir()) == sorted(FILES)


def test_avro_subscriptions_match_the_geojson(generated):
    _, out = generated
    subs, _, rejected = read_subscriptions(out / "subscriptions.geojson")
    schema, records = _avro(out / "subscriptions.avro")
    assert schema["name"] == "io.geops.Subscription"
    assert rejected == [] and len(records) == len(subs) == 300
    assert [r["id"] for r in records] == subs.ids.tolist()
    assert [r["relation"] for r in records] == [Relation(r).name for r in subs.relations]
    wkb = shapely.from_wkb([r["geometry"] for r in records])
    assert shapely.equals_exact(wkb, subs.geoms, tolerance=1e-12).all()


def test_avro_publications_match_the_geojson(generated):
    _, out = generated
    pubs, _, rejected = read_publications(out / "publications.geojson")
    schema, records = _avro(out / "publications.avro")
    assert schema["name"] == "io.geops.Publication"
    assert rejected == [] and len(records) == len(pubs) == 500
    assert [r["id"] for r in records] == pubs.ids.tolist()
    start = 1_740_787_200_000  # 2025-03-01T00:00:00Z
    assert [r["event_time"] for r in records] == pubs.event_time.tolist()
    assert pubs.event_time.tolist() == [start + 10 * i for i in range(500)]
    wkb = shapely.from_wkb([r["geometry"] for r in records])
    assert shapely.equals_exact(wkb, pubs.geoms, tolerance=1e-12).all()


def test_geojson_features_carry_their_layer(generated):
    _, out = generated
    doc = json.loads((out / "publications.geojson").read_text())
    layers = [f["properties"]["layer"] for f in doc["features"]]
    kinds = [f["geometry"]["type"] for f in doc["features"]]
    assert {lay for lay, k in zip(layers, kinds, strict=True) if k == "Point"} == {"point"}
    assert layers.count("point") == 200 and layers.count("sector") == 150


def test_workload_json_records_parameters_and_counts(generated):
    _, out = generated
    doc = json.loads((out / "workload.json").read_text())
    assert doc["seed"] == 3
    assert doc["parameters"]["publications"] == 500
    assert doc["parameters"]["world_size"] == {"area": 6, "district": 40, "sector": 150}
    assert doc["subscriptions"]["layers"] == {"area": 60, "district": 90, "sector": 150}
    assert sum(doc["subscriptions"]["relations"].values()) == 300
    assert "DISJOINT" not in doc["subscriptions"]["relations"]
    assert doc["publications"]["layers"] == {"point": 200, "area": 50, "district": 100,
                                             "sector": 150}
    assert doc["skew"] is None


def test_the_same_seed_writes_the_same_files(generated, tmp_path):
    _, out = generated
    assert main(["generate", "--out", str(tmp_path), "--seed", "3", *SMALL,
                 "--start-time", "1740787200000", "--interval-ms", "10"]) == EXIT_OK
    for name in FILES:
        assert (tmp_path / name).read_bytes() == (out / name).read_bytes(), name


@pytest.mark.parametrize("args,message", [
    (["--point-share", "2"], "--point-share must be within [0, 1]"),
    (["--skew", "1.5", "--workers", "2"], "--skew must be within [0, 1]"),
    (["--skew", "0.5", "--workers", "2", "--hot-workers", "2"],
     "--hot-workers must be >= 1 and < --workers"),
    (["--skew", "0.5", "--workers", "8", "--partitions", "4"], "--partitions must be >= --workers"),
    (["--relation", "near"], "--relation: unknown relation 'near'"),
    (["--world-size", "10,5,20"], "--world-size expects AREAS,DISTRICTS,SECTORS"),
    (["--start-time", "yesterday"], "--start-time expects epoch milliseconds or ISO 8601"),
    (["--publications", "-1"], "--publications must be >= 0"),
])
def test_bad_flags_are_named(tmp_path, capsys, args, message):
    assert main(["generate", "--out", str(tmp_path), *SMALL, *args]) == EXIT_USAGE
    assert message in capsys.readouterr().err
    assert not (tmp_path / "workload.json").exists()


def test_start_time_accepts_epoch_ms_and_iso_8601():
    assert parse_time("0") == 0
    assert parse_time("2024-01-01T00:00:00Z") == 1_704_067_200_000
    assert parse_time("2024-01-01T01:00:00+01:00") == 1_704_067_200_000
    assert parse_time("2024-01-01") == 1_704_067_200_000


def test_real_data_files_replace_the_synthetic_ones(tmp_path, capsys):
    csv = tmp_path / "accidents.csv"
    csv.write_text("id,LAT,LON\n1,0.5,0.5\n2,x,0.5\n3,1.5,1.5\n4,0.25,1.75\n")
    squares = [shapely.box(x, y, x + 1, y + 1) for x in (0, 1) for y in (0, 1)]
    for name, geoms in (("areas", [shapely.box(0, 0, 2, 2)]), ("districts", squares),
                        ("sectors", [*squares, shapely.Point(0, 0)])):
        (tmp_path / f"{name}.geojson").write_text(json.dumps({
            "type": "FeatureCollection",
            "features": [{"type": "Feature", "properties": {},
                          "geometry": json.loads(shapely.to_geojson(g))} for g in geoms]}))
    out = tmp_path / "out"
    code = main(["generate", "--out", str(out), "--subscriptions", "20", "--publications", "60",
                 "--points-csv", str(csv), *(f"--{n}={tmp_path / n}.geojson"
                                             for n in ("areas", "districts", "sectors"))])
    captured = capsys.readouterr()
    assert code == EXIT_REJECTED
    assert f"{csv}: skipped 1 rows" in captured.err and "line 3: LAT 'x' is not a number" \
        in captured.err
    assert "sectors.geojson: skipped 1 features" in captured.err
    assert "feature 4: expected a Polygon or MultiPolygon, got Point" in captured.err
    pubs, _, _ = read_publications(out / "publications.geojson")
    points = {tuple(c) for c in shapely.get_coordinates(pubs.geoms[shapely.get_type_id(
        pubs.geoms) == 0])}
    assert points <= {(0.5, 0.5), (1.5, 1.5), (1.75, 0.25)}
    doc = json.loads((out / "workload.json").read_text())
    assert doc["sources"]["points"] == str(csv)
    assert doc["sources"]["sector"] == f"{tmp_path / 'sectors'}.geojson"
    assert doc["world"] == {"area": 1, "district": 4, "sector": 4}


def test_a_bad_csv_is_a_failure_not_a_traceback(tmp_path, capsys):
    csv = tmp_path / "p.csv"
    csv.write_text("a,b\n1,2\n")
    assert main(["generate", "--out", str(tmp_path / "o"), *SMALL,
                 "--points-csv", str(csv)]) == 1
    assert "must name lon and lat columns" in capsys.readouterr().err


def test_points_far_from_every_polygon_are_a_clear_failure(tmp_path, capsys):
    csv = tmp_path / "p.csv"
    csv.write_text("lon,lat\n100.5,0.5\n")
    assert main(["generate", "--out", str(tmp_path / "o"), *SMALL,
                 "--points-csv", str(csv)]) == 1
    assert "no area polygon (synthetic) covers any accident location" in capsys.readouterr().err
