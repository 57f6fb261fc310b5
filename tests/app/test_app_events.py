"""Geofence events from the app on Apache Kafka and a local Spark session equal the offline
oracle's (``geops match --events``), exactly once, on a moving-object workload written while the
app runs, across a driver crash and a rebalance.

The app runs with exactly-once delivery. Its first run dies (SIGKILL) right after a batch's
transaction committed and before Spark committed the batch, its events query having written
events already; the restart runs that batch again without writing it again, and finds each
object's fences in the events query's state store (an object inside a fence when the driver
died gives ``inside`` next, not a second ``enter``).
A third of the way through, a command moves every static partition to the other worker, fences
included. The fences are a fifth of the subscriptions, some of them distance fences. What
``geops tail --topic events --format jsonl`` prints equals the oracle's lines, each object's in
the oracle's order (events are keyed by object id), none twice.
"""

from __future__ import annotations

import json
import os
import re
from collections import defaultdict

import numpy as np
import pytest

from app.faults import KILL_VAR
from cli.main import main as cli_main
from geops.offline import events_files
from geops.workload import generate_workload
from geops.workload.output import write_workload
from kafkaio.sender import produce_records
from kafkaio.topics import create_topics
from schemas.assignment import initial_assignment
from schemas.records import subscription_records
from tests.app.delivery_checks import run_app
from tests.app.replicas import P, SteppedProducer, replica_command

pytestmark = [pytest.mark.integration, pytest.mark.slow]

FIELDS = ("object_id", "subscription_id", "kind", "publication_id", "event_time", "reason")


@pytest.fixture(scope="module")
def moving(tmp_path_factory):
    """80 objects, 2,400 positions, 500 subscriptions (a fifth fences), and the oracle's
    events by object."""
    w = generate_workload(seed=7, objects=80, subscriptions=500, publications=2_400,
                          interval_ms=1_000)
    out = tmp_path_factory.mktemp("moving")
    write_workload(out, w, {})
    events_files(out / "subscriptions.geojson", out / "publications.geojson",
                 out / "events.jsonl")
    oracle = defaultdict(list)
    for line in (out / "events.jsonl").read_text().splitlines():
        e = json.loads(line)
        oracle[e["object_id"]].append(tuple(e.get(f) for f in FIELDS))
    kinds = {e[2] for v in oracle.values() for e in v}
    assert sum(len(v) for v in oracle.values()) > 100 and {"enter", "exit"} <= kinds
    return w, dict(oracle)


def test_events_equal_the_oracle_exactly_once_across_a_kill_and_a_rebalance(
        moving, kafka_cfg, geops_env, tmp_path, capsys):
    w, oracle = moving
    create_topics(kafka_cfg)
    produce_records(kafka_cfg.kafka_client(), kafka_cfg.topic("subscriptions"), "Subscription",
                    subscription_records(w.subscriptions, w.detect, np.round(w.distance_m, 1)))
    swapped = [(1 - owner,) for owner in initial_assignment(P, 2)]
    n = len(w.publications)
    producer = SteppedProducer(kafka_cfg, w.publications,
                               [(n // 3, 1, replica_command(1, swapped))], rate=200.0,
                               object_ids=w.object_ids).start()
    flags = ["--master", "local[2]", "--delivery", "exactly-once", "--partitions", str(P)]
    env = {**os.environ, **geops_env}
    code = run_app(flags, {**env, KILL_VAR: "after-commit@20"}, tmp_path / "killed.log")
    killed = (tmp_path / "killed.log").read_text()
    assert code != 0 and "stopped after" not in killed, killed[-3000:]
    # the events query had state to lose: it wrote events before the driver died
    assert "geofence events" in killed, killed[-3000:]
    assert run_app(flags, env, tmp_path / "last.log", timeout=240) == 0, \
        (tmp_path / "last.log").read_text()[-3000:]
    producer.join()
    last = (tmp_path / "last.log").read_text()
    assert "batch 20: its output was committed to Kafka before a restart" in last
    # the command moved the partitions mid-stream, or (written while the driver was down) the
    # restart recovered it
    assert re.search(r"epoch 1 in force|recovered epoch 1 ", killed + last)

    # what a user reads: geops tail prints each event as geops match --events does
    capsys.readouterr()
    assert cli_main(["tail", "--topic", "events", "--from-beginning", "--format", "jsonl",
                     "--until-idle", "2s"]) == 0
    got = defaultdict(list)
    for line in capsys.readouterr().out.splitlines():
        e = json.loads(line)
        got[e["object_id"]].append(tuple(e.get(f) for f in FIELDS))
    assert dict(got) == oracle
