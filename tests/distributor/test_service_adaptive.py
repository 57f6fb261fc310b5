"""The distributor service in mode adaptive on Apache Kafka, the app played by records we
produce (``FakeApp``): it judges at every batch boundary, without a period D, and learns the
move cost from the app's MoveReport."""

from __future__ import annotations

import pytest

from distributor.service import Service
from kafkaio.dump import by_schema
from kafkaio.topics import create_topics
from tests.distributor.test_service import APP, FakeApp, P, W, commands, running, wait_for

pytestmark = pytest.mark.integration

ADAPTIVE = {"distributor.mode": "adaptive", "distributor.period": "1h"}  # D is not used


def test_adaptive_service_judges_every_batch_commands_once_and_learns_the_move(kafka_cfg):
    create_topics(kafka_cfg)
    cfg = kafka_cfg.with_overrides(ADAPTIVE)
    service = Service(cfg)
    app = FakeApp(cfg)
    initial = [p * W // P for p in range(P)]
    with running(service):
        while not service.counters.get("commands", 0):   # a batch at a time, each judged
            assert app.batch < 60, "no command"
            app.play(0, initial)
            wait_for(lambda: service.counters.get("periods", 0) == app.batch, timeout=60)
        (command,) = commands(cfg)
        assert command["reason"].startswith("adaptive: ")
        new = command["assignment"]
        moved = [m["partition"] for m in command["moves"]]
        app.send("MoveReport", {"app_id": APP, "batch_id": app.batch, "epoch": 1,
                                "partitions_moved": moved, "bytes": 400_000 * len(moved),
                                "duration_ms": 180.0, "time": 1_000})
        for _ in range(6):   # balanced now (FakeApp's hot worker would follow the move)
            app.play(1, new, hot=-1)
        wait_for(lambda: service.counters.get("periods", 0) >= app.batch, timeout=60)
    assert service.counters["commands"] == 1 and service.counters["move reports"] == 1
    statuses = by_schema(cfg.kafka_client(), cfg.topic("status"))["DistributorStatus"]
    assert len(statuses) == app.batch   # one decision per batch, no period D
    assert {s["mode"] for s in statuses} == {"adaptive"}
    after = [s for s in statuses if s["epoch"] == 1]
    assert len(after) == 6 and {s["decision"] for s in after} == {"none"}
    assert "1 move(s) seen" in after[-1]["reason"] or "nothing better" in after[-1]["reason"]
