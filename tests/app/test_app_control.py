"""Control commands mid-stream, and bad publications going to the dead-letter topic."""

from __future__ import annotations

import logging
import threading
import time

import numpy as np
import pytest
import shapely

from geops.strategies import build_strategy
from kafkaio.clients import consumer
from kafkaio.dump import by_schema
from kafkaio.offsets import EndOffsets
from kafkaio.sender import Sender, produce_records
from schemas import codec
from schemas.assignment import initial_assignment
from schemas.records import publication_records
from tests.app.conftest import load, matches, metrics, run_app

pytestmark = pytest.mark.integration

P, W = 16, 2


def command(epoch: int, assignment: list[int], app_id: str = "",
            replicas: tuple = ()) -> bytes:
    return codec().encode("RebalanceCommand", {
        "epoch": epoch, "assignment": assignment, "moves": [], "mldc_before": 1.0,
        "mldc_predicted": 0.1, "metric": "LB", "reason": "test", "time": 0, "app_id": app_id,
        "replicas": [{"partition": p, "workers": list(w)} for p, w in replicas]})


def wait_for_batches(cfg, n: int, timeout: float = 120.0,
                     gave_up: threading.Event | None = None) -> bool:
    """True once the app has reported ``n`` batch summaries on the metrics topic.

    False after ``timeout`` or as soon as ``gave_up`` is set (the app already finished).
    """
    c = consumer(cfg.kafka_client())
    from confluent_kafka import TopicPartition

    c.assign([TopicPartition(cfg.topic("metrics"), 0, 0)])
    seen = 0
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline and not (gave_up and gave_up.is_set()):
            for msg in c.consume(100, timeout=0.2):
                if msg.error() is None and codec().decode(msg.value())[0] == "BatchSummary":
                    seen += 1
            if seen >= n:
                return True
    finally:
        c.close()
    return False


def test_command_mid_stream_moves_partitions_without_losing_matches(workload, kafka_cfg,
                                                                    caplog):
    load(kafka_cfg, workload)
    old = initial_assignment(P, W)
    new = list(old)
    new[0], new[1], new[14], new[15] = 1, 1, 0, 0
    control = kafka_cfg.topic("control")
    sent, app_done = threading.Event(), threading.Event()

    def commander() -> None:
        if not wait_for_batches(kafka_cfg, 2, gave_up=app_done):
            return
        s = Sender(kafka_cfg.kafka_client())
        # malformed
        s.send(control, b"\x00garbage", key=b"geops")
        # not newer than epoch 0
        s.send(control, command(0, new), key=b"geops")
        # wrong length
        s.send(control, command(5, new[:-1]), key=b"geops")
        # worker out of range
        s.send(control, command(6, [0] * (P - 1) + [W]), key=b"geops")
        # another app's
        s.send(control, command(7, new, app_id="someone"), key=b"geops")
        # replicas not led by owner
        s.send(control, command(8, new, replicas=[(0, (0, 1))]), key=b"geops")
        # replica worker out of range
        s.send(control, command(9, new, replicas=[(2, (0, W))]), key=b"geops")
        # the one to apply
        s.send(control, command(3, new, app_id="geops"), key=b"geops")
        s.flush()
        sent.set()

    thread = threading.Thread(target=commander, daemon=True)
    thread.start()
    try:
        assert run_app("--strategy", "sPIS", "--partitions", str(P),
                       "--max-records-per-trigger", "100") == 0
    finally:
        app_done.set()
    thread.join(5)
    assert sent.is_set(), "the app finished before the command could be sent"
    ignored = [r.getMessage() for r in caplog.records if r.name == "geops.app.control"]
    assert any("epoch 8: replicas of partition 0 [0, 1] must start with its owner 1" in m
               for m in ignored), ignored
    assert any("epoch 9: replica worker ids [2] outside 0..1" in m for m in ignored), ignored

    got = matches(kafka_cfg)
    assert all(len(v) == 1 for v in got.values())  # nothing lost, nothing duplicated
    assert {k: v[0] for k, v in got.items()} == workload.oracle

    m = metrics(kafka_cfg)
    epochs = [s["epoch"] for s in m["BatchSummary"]]
    assert epochs[0] == 0 and epochs[-1] == 3
    assert epochs == sorted(epochs) and set(epochs) == {0, 3}  # switched once, at a boundary
    (move,) = m["MoveReport"]
    assert move["epoch"] == 3 and sorted(move["partitions_moved"]) == [0, 1, 14, 15]
    strategy = build_strategy("sPIS", workload.subs, P, "kdbtree")
    assert move["bytes"] == sum(len(strategy.partition_payload(p)) for p in (0, 1, 14, 15))
    for load_ in m["PartitionLoad"]:
        owner = new if load_["epoch"] == 3 else old
        assert load_["worker"] == owner[load_["partition"]]
    moved_after = [r for r in m["PartitionLoad"]
                   if r["epoch"] == 3 and r["partition"] in (0, 1, 14, 15) and r["items"]]
    assert any(r["index_builds"] for r in moved_after)  # the new owner built them


def test_restart_recovers_assignment_from_control_topic(workload, kafka_cfg):
    load(kafka_cfg, workload)
    new = [1] * 8 + [0] * 8
    s = Sender(kafka_cfg.kafka_client())
    s.send(kafka_cfg.topic("control"), command(4, initial_assignment(P, W)), key=b"geops")
    s.send(kafka_cfg.topic("control"), command(9, new), key=b"geops")
    s.flush()
    assert run_app("--strategy", "RIsPS", "--partitions", str(P),
                   "--max-records-per-trigger", "500") == 0
    m = metrics(kafka_cfg)
    assert {s["epoch"] for s in m["BatchSummary"]} == {9}
    assert all(r["worker"] == new[r["partition"]] for r in m["PartitionLoad"])
    assert {k: v[0] for k, v in matches(kafka_cfg).items()} == workload.oracle


# Batches of 400 records: in one stage (each join task reads the batch, worker 0's sends its dead
# letters), and in two, where each of the app's read tasks sends those of its slice.
@pytest.mark.parametrize("stages", [(), ("--one-stage-records", "100")],
                         ids=["one-stage", "read-tasks"])
def test_bad_publications_go_to_dead_letter_with_reasons(workload, kafka_cfg, stages, caplog):
    load(kafka_cfg, workload)
    topic = kafka_cfg.topic("publications")
    c = codec()
    bad = {
        b"garbage": (b"not avro at all", "missing C3 01 marker"),
        b"match": (c.encode("Match", {"publication_id": 1, "subscription_ids": [], "event_time": 0,
                                      "match_time": 0, "batch_id": 0}),
                   "expected a Publication record, got Match"),
        b"bowtie": (c.encode("Publication", {
            "id": 90001, "event_time": 0,
            "geometry": shapely.to_wkb(shapely.from_wkt("POLYGON ((0 0, 1 1, 1 0, 0 1, 0 0))"))}),
            "invalid geometry: Self-intersection"),
        b"empty": (c.encode("Publication", {"id": 90002, "event_time": 0,
                                            "geometry": shapely.to_wkb(shapely.Point())}),
                   "empty geometry"),
        b"nan": (c.encode("Publication", {"id": 90003, "event_time": 0,
                                          "geometry": shapely.to_wkb(shapely.Point(np.nan, 1))}),
                 "non-finite coordinate"),
        b"badwkb": (c.encode("Publication", {"id": 90004, "event_time": 0,
                                             "geometry": b"\x01\x02\x03"}),
                    "unreadable WKB geometry"),
        b"tombstone": (None, "empty record (null value)"),
    }
    ends_before = EndOffsets(kafka_cfg.kafka_client())(topic)
    s = Sender(kafka_cfg.kafka_client())
    for key, (value, _) in bad.items():
        s.send(topic, value, key=key, partition=0)
    s.flush()
    # and some more good ones after them, which must still be matched
    produce_records(kafka_cfg.kafka_client(), topic, "Publication",
                    publication_records(workload.pubs.take(np.arange(50))))
    with caplog.at_level(logging.INFO, logger="geops.app"):
        assert run_app("--strategy", "sPS", "--max-records-per-trigger", "400", *stages) == 0
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("batch ")
             and " records, " in r.getMessage()]
    read = "two stages, read directly" if stages else "one stage"
    assert lines and all(read in line for line in lines), lines[:3]

    dead = by_schema(kafka_cfg.kafka_client(), kafka_cfg.topic("dead_letter"))["DeadLetter"]
    assert len(dead) == len(bad)
    for rec in dead:
        value, reason = bad[rec["key"]]
        assert reason in rec["reason"]
        assert rec["payload"] == value
        assert rec["topic"] == topic and rec["partition"] == 0
        assert ends_before[0] <= rec["offset"] < ends_before[0] + len(bad)
        assert rec["app_id"] == "geops"
    summaries = metrics(kafka_cfg)["BatchSummary"]
    assert sum(s["dead_letters"] for s in summaries) == len(bad)
    assert sum(s["records"] for s in summaries) == len(workload.pubs) + len(bad) + 50
    got = matches(kafka_cfg)
    assert {k: v[0] for k, v in got.items()} == workload.oracle
    assert all(len(v) == 2 for k, v in got.items() if k < 50 and k in workload.oracle)
