"""`geops subscribe` of an Avro container file (as geops generate writes it) against the real
local broker: the same records as from GeoJSON, bad ones rejected by index."""

from __future__ import annotations

import pytest
import shapely

from cli.main import main
from geops.workload.output import write_avro

pytestmark = pytest.mark.integration


def test_subscribe_an_avro_file(kafka_cfg, capsys, tmp_path):
    path = tmp_path / "subs.avro"
    write_avro(path, "Subscription", iter([
        {"id": 1, "geometry": shapely.to_wkb(shapely.Point(1, 2)), "relation": "WITHIN"},
        {"id": 2, "geometry": b"not wkb", "relation": "COVERS"},
        {"id": 3, "geometry": shapely.to_wkb(shapely.box(0, 0, 1, 1)), "relation": "TOUCHES"},
    ]))
    assert main(["topics", "create"]) == 0
    capsys.readouterr()
    code = main(["subscribe", "--file", str(path)])
    out, err = capsys.readouterr()
    assert code == 3 and "produced 2 subscriptions" in out and "rejected 1" in out
    assert f"{path}: rejected record 1: unreadable geometry: " in err
    assert main(["tail", "--topic", "subscriptions", "--from-beginning",
                 "--until-idle", "3"]) == 0
    assert sorted(capsys.readouterr().out.splitlines()) == [
        "subscription 1 WITHIN POINT (1 2)",
        "subscription 3 TOUCHES POLYGON ((1 0, 1 1, 0 1, 0 0, 1 0))",
    ]
