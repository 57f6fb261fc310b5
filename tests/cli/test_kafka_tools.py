"""`geops topics/publish/subscribe/tail` against a real Apache Kafka."""

from __future__ import annotations

import json

import pytest
import shapely

import config
from cli.main import main
from kafkaio.offsets import read_to_end
from kafkaio.sender import Sender
from kafkaio.topics import topic_config
from schemas import codec
from schemas.codec import SCHEMA_DIR, read_source, strip_logical
from schemas.compat import _samples

pytestmark = pytest.mark.integration


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def feature(i, geometry, **props):
    return {"type": "Feature", "properties": {"id": i, **props}, "geometry": geometry}


def square(x, y, d=0.1):
    return {"type": "Polygon",
            "coordinates": [[[x, y], [x + d, y], [x + d, y + d], [x, y + d], [x, y]]]}


def write(path, features):
    path.write_text(json.dumps({"type": "FeatureCollection", "features": features}))
    return str(path)


def test_topics_create_is_idempotent_and_compacts(kafka_cfg, capsys):
    code, out, _ = run(capsys, "topics", "create")
    assert code == 0
    assert out.count("created") == len(config.TOPICS)
    code, out, _ = run(capsys, "topics", "create")
    assert code == 0 and out.count("exists") == len(config.TOPICS) and "created" not in out
    for logical in ("subscriptions", "control"):
        assert topic_config(kafka_cfg, kafka_cfg.topic(logical))["cleanup.policy"] == "compact"
    matches = topic_config(kafka_cfg, kafka_cfg.topic("matches"))
    assert matches.get("cleanup.policy", "delete") != "compact"


def test_publish_700_then_tail_jsonl_gives_exactly_them(kafka_cfg, capsys, tmp_path):
    feats = []
    for i in range(700):
        x, y = -5 + (i % 50) * 0.1, 50 + (i // 50) * 0.1
        geom = {"type": "Point", "coordinates": [x, y]} if i % 3 else square(x, y, 0.05)
        feats.append(feature(i, geom))
    path = write(tmp_path / "pubs.geojson", feats)
    assert run(capsys, "topics", "create")[0] == 0
    code, out, err = run(capsys, "publish", "--file", path)
    assert code == 0, err
    assert "produced 700 publications" in out
    code, out, _ = run(capsys, "tail", "--topic", "publications", "--from-beginning",
                       "--until-idle", "5", "--format", "jsonl")
    assert code == 0
    lines = [json.loads(line) for line in out.splitlines()]
    assert len(lines) == 700
    got = {rec["id"]: shapely.from_wkt(rec["geometry"]) for rec in lines}
    assert sorted(got) == list(range(700))
    for f in feats:
        want = shapely.from_geojson(json.dumps(f["geometry"]))
        assert shapely.equals_exact(got[f["properties"]["id"]], want, tolerance=0)
    assert all(rec["_schema"] == "Publication" for rec in lines)


def test_publish_keys_an_objects_positions_by_object_so_they_keep_their_order(kafka_cfg,
                                                                               capsys, tmp_path):
    """Positions of eight objects, interleaved, on the four partitions of the publications
    topic: each object's are keyed by its id, all in one partition, in the order of the file;
    a publication without an object is keyed by its own id."""
    objects = [f"car-{k}" for k in range(8)]
    feats = [feature(i, {"type": "Point", "coordinates": [i * 0.01, 50.0]}, event_time=i,
                     object_id=objects[i % 8]) for i in range(80)]
    feats.append(feature(80, {"type": "Point", "coordinates": [0.0, 50.0]}, event_time=80))
    assert run(capsys, "topics", "create")[0] == 0
    code, _, err = run(capsys, "publish", "--file", write(tmp_path / "p.geojson", feats))
    assert code == 0, err
    c = codec()
    where: dict[bytes, set[int]] = {}
    order: dict[bytes, list[int]] = {}
    for msg in read_to_end(kafka_cfg.kafka_client(), kafka_cfg.topic("publications")):
        rec = c.decode_as("Publication", msg.value())
        assert msg.key() == (rec["object_id"] or str(rec["id"])).encode()
        where.setdefault(msg.key(), set()).add(msg.partition())
        order.setdefault(msg.key(), []).append(rec["id"])
    assert all(len(parts) == 1 for parts in where.values()), where
    assert len(set().union(*where.values())) > 1, "every object landed in one partition"
    assert order == {**{o.encode(): list(range(k, 80, 8)) for k, o in enumerate(objects)},
                     b"80": [80]}


def test_rejected_features_are_reported_and_not_produced(kafka_cfg, capsys, tmp_path):
    bow_tie = {"type": "Polygon", "coordinates": [[[0, 0], [1, 1], [1, 0], [0, 1], [0, 0]]]}
    feats = [
        feature(1, {"type": "Point", "coordinates": [1, 2]}, relation="within"),
        {"type": "Feature", "properties": {"relation": "within"},
         "geometry": {"type": "Point", "coordinates": [1, 2]}},
        feature(3, {"type": "Point", "coordinates": [1, 2]}, relation="NEAR"),
        feature(4, bow_tie, relation="contains"),
        feature(5, {"type": "Polygon", "coordinates": []}, relation="contains"),
        feature("six", {"type": "Point", "coordinates": [1, 2]}, relation="contains"),
        feature(7, None, relation="covers"),
        feature(8, square(0, 0), relation="Covered_By"),
    ]
    path = write(tmp_path / "subs.geojson", feats)
    assert run(capsys, "topics", "create")[0] == 0
    code, out, err = run(capsys, "subscribe", "--file", path)
    assert code == 3
    assert "produced 2 subscriptions" in out and "rejected 6" in out
    for needle in ("feature 1: missing properties.id", "feature 2: unknown relation 'NEAR'",
                   "feature 3: invalid geometry: Self-intersection",
                   "feature 4: empty geometry", "feature 5: properties.id must be an integer",
                   "feature 6: missing geometry"):
        assert needle in err
    code, out, _ = run(capsys, "tail", "--topic", "subscriptions", "--from-beginning",
                       "--until-idle", "3")
    assert sorted(out.splitlines()) == [
        "subscription 1 WITHIN POINT (1 2)",
        "subscription 8 COVERED_BY POLYGON ((0 0, 0.1 0, 0.1 0.1, 0 0.1, 0 0))",
    ]


def test_nan_coordinates_and_bad_files(kafka_cfg, capsys, tmp_path):
    path = tmp_path / "nan.geojson"
    path.write_text('{"type": "FeatureCollection", "features": [{"type": "Feature", '
                    '"properties": {"id": 1}, "geometry": {"type": "Point", '
                    '"coordinates": [NaN, 1.0]}}]}')
    assert run(capsys, "topics", "create")[0] == 0
    code, out, err = run(capsys, "publish", "--file", str(path))
    assert code == 3 and "feature 0:" in err and "produced 0" in out
    (tmp_path / "bad.json").write_text("{not json")
    code, _, err = run(capsys, "publish", "--file", str(tmp_path / "bad.json"))
    assert code == 2 and "not valid JSON" in err
    code, _, err = run(capsys, "publish", "--file", str(tmp_path / "missing.json"))
    assert code == 2 and "file not found" in err


def test_every_schema_round_trips_through_kafka_and_tail(kafka_cfg, capsys):
    assert run(capsys, "topics", "create")[0] == 0
    topic = kafka_cfg.topic("metrics")
    c = codec()
    sent = []
    sender = Sender(kafka_cfg.kafka_client())
    for name in sorted(c.current):
        plain = strip_logical(read_source(SCHEMA_DIR / f"{name}.avsc"))
        for record in _samples(plain, {}):
            sender.send(topic, c.encode(name, record))
            sent.append((name, record))
    sender.send(topic, b"\xc3\x01garbage!")          # unknown fingerprint
    sender.send(topic, b"plain text")                # not single-object encoded
    sender.send(topic, None, key=b"42")              # tombstone
    sender.flush()
    code, out, _ = run(capsys, "tail", "--topic", "metrics", "--from-beginning",
                       "--until-idle", "3", "--format", "jsonl")
    assert code == 0
    rows = [json.loads(line) for line in out.splitlines()]
    assert len(rows) == len(sent) + 3
    for (name, record), row in zip(sent, rows, strict=False):
        if name == "GeofenceEvent":  # the line geops match --events writes, to compare with
            assert set(row) == {"object_id", "subscription_id", "kind", "publication_id",
                                "event_time",
                                *(["reason"] if record["reason"] is not None else []),
                                # a pair's fields only on a roaming fence's event
                                *([k for k in ("other_object_id", "distance_m")
                                   if record[k] is not None]
                                  if record.get("other_object_id") is not None else [])}
            continue
        assert row["_schema"] == name
        assert set(row) == {"_schema", *record}
    assert "unknown schema fingerprint" in rows[-3]["_error"]
    assert "missing C3 01 marker" in rows[-2]["_error"]
    assert rows[-1]["_tombstone"] is True and rows[-1]["key"] == "42"
    code, out, _ = run(capsys, "tail", "--topic", "metrics", "--from-beginning",
                       "--until-idle", "3", "--max", str(len(sent) + 3))
    lines = out.splitlines()
    assert len(lines) == len(sent) + 3
    assert not any(line.startswith("!!") for line in lines[:len(sent)])
    assert lines[-3].startswith("!! undecodable record") and lines[-1] == "tombstone key=42"


def test_tail_of_missing_topic_and_unreachable_broker(kafka_cfg, capsys, monkeypatch):
    code, _, err = run(capsys, "tail", "--topic", "no-such-topic", "--until-idle", "1")
    assert code == 1 and "does not exist" in err
    monkeypatch.setenv("GEOPS_BOOTSTRAP_SERVERS", "127.0.0.1:1")
    code, _, err = run(capsys, "tail", "--topic", "control", "--until-idle", "1")
    assert code == 1 and "cannot reach Kafka at 127.0.0.1:1" in err


def test_publish_event_time_from_file_or_now(kafka_cfg, capsys, tmp_path):
    import time

    path = write(tmp_path / "p.geojson", [
        feature(1, {"type": "Point", "coordinates": [1, 2]}, event_time=1_000),
        feature(2, {"type": "Point", "coordinates": [1, 2]})])
    assert run(capsys, "topics", "create")[0] == 0
    before = int(time.time() * 1000)
    assert run(capsys, "publish", "--file", path)[0] == 0
    assert run(capsys, "publish", "--file", path, "--event-time", "now")[0] == 0
    from kafkaio.dump import by_schema

    pubs = by_schema(kafka_cfg.kafka_client(), kafka_cfg.topic("publications"))["Publication"]
    times = sorted((p["id"], p["event_time"]) for p in pubs)
    assert times[0] == (1, 1_000)  # from the file
    assert all(t >= before for i, t in times[1:])  # stamped when sent


def test_unsubscribe_writes_tombstones_and_tail_shows_one_subscriber(kafka_cfg, capsys,
                                                                     tmp_path):
    assert run(capsys, "topics", "create")[0] == 0
    path = write(tmp_path / "gone.geojson", [feature(7, square(0, 0)), feature(8, None),
                                             {"type": "Feature", "properties": {}}])
    code, out, err = run(capsys, "unsubscribe", "--id", "5", "--id", "7", "--file", path)
    assert code == 3  # the feature without an id is rejected, the others are written
    assert "unsubscribed 3 subscriptions" in out and "rejected 1" in out
    assert "missing properties.id" in err
    tomb = [line for line in run(capsys, "tail", "--topic", "subscriptions",
                                 "--from-beginning", "--until-idle", "1")[1].splitlines()]
    assert tomb == ["tombstone key=5", "tombstone key=7", "tombstone key=8"]
    code, _, err = run(capsys, "unsubscribe")
    assert code == 2 and "give --id N" in err

    c = codec()
    sender = Sender(kafka_cfg.kafka_client())
    for pub, subs in ((1, [3, 9]), (2, [4]), (3, [9])):
        sender.send(kafka_cfg.topic("matches"), c.encode("Match", {
            "publication_id": pub, "subscription_ids": subs, "event_time": 1, "match_time": 2,
            "batch_id": 0, "app_id": "geops"}), key=str(pub).encode())
    sender.close()
    code, out, _ = run(capsys, "tail", "--topic", "matches", "--from-beginning",
                       "--until-idle", "1", "--subscription", "9", "--format", "jsonl")
    assert code == 0
    assert [json.loads(line)["publication_id"] for line in out.splitlines()] == [1, 3]


def test_app_without_its_positions_topic_ends_in_one_line(kafka_cfg, caplog):
    """Geofence events need the positions topic (`geops topics create` makes it); an app
    without it ends before Spark starts, naming it."""
    from app.main import main as app_main
    from kafkaio.topics import create_topics

    create_topics(kafka_cfg, [t for t in config.TOPICS if t != "positions"])
    assert app_main(["--master", "local[1]", "--stop-after-idle", "1s"]) == 1
    errors = [r.getMessage() for r in caplog.records if r.levelname == "ERROR"]
    assert len(errors) == 1 and errors[0].startswith("geofence events (--events on)")
    assert f"topic '{kafka_cfg.topic('positions')}' does not exist" in errors[0]
