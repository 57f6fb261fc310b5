"""Geofence events from the app on Apache Kafka and a local Spark session equal the offline
oracle's (``geops match --events``), on a moving-object workload written while the app runs.

The positions come in two halves, each to its own run of the app on the same checkpoint: the
second run finds each object's fences in the events query's state store, so an object inside
a fence when the first run ended gives ``inside``, not a second ``enter``. The fences are a fifth
of the subscriptions, some of them distance fences; each object's events must come in the
oracle's order (they are keyed by object id).
"""

from __future__ import annotations

import json
import logging
import threading
from collections import defaultdict

import numpy as np
import pytest

from geops.offline import events_files
from geops.workload import generate_workload
from geops.workload.output import write_workload
from kafkaio.dump import by_schema
from kafkaio.sender import Sender, produce_records, record_key
from kafkaio.topics import create_topics
from schemas import codec
from schemas.records import publication_records, subscription_records
from tests.app.conftest import run_app

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


class _Streaming(logging.Handler):
    """Set when the app says its query is streaming (its log line)."""

    def __init__(self) -> None:
        super().__init__()
        self.started = threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage().startswith("streaming from"):
            self.started.set()


def _produce_once_streaming(cfg, records, rate: float, errors: list) -> threading.Thread:
    """Write ``records`` (keyed by object) at ``rate`` once the app's query has started (a
    restarted app with no new input runs no batch, so its ready file cannot be waited for)."""
    seen = _Streaming()
    logging.getLogger("geops.app").addHandler(seen)

    def run() -> None:
        try:
            assert seen.started.wait(180), "the app's query did not start"
            c = codec()
            sender = Sender(cfg.kafka_client(), rate=rate)
            for rec in records:
                sender.send(cfg.topic("publications"), c.encode("Publication", rec),
                            key=record_key(rec))
            sender.close()
        except BaseException as exc:  # reported by the test
            errors.append(exc)
        finally:
            logging.getLogger("geops.app").removeHandler(seen)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_events_equal_the_oracle_across_a_restart(moving, kafka_cfg):
    w, oracle = moving
    create_topics(kafka_cfg)
    produce_records(kafka_cfg.kafka_client(), kafka_cfg.topic("subscriptions"), "Subscription",
                    subscription_records(w.subscriptions, w.detect, np.round(w.distance_m, 1)))
    records = list(publication_records(w.publications, w.object_ids))
    half = len(records) // 2
    for part in (records[:half], records[half:]):
        errors: list = []
        producer = _produce_once_streaming(kafka_cfg, part, 600.0, errors)
        assert run_app("--partitions", "16", "--stop-after-idle", "3s") == 0
        producer.join(60)
        assert not errors, errors

    got = defaultdict(list)
    for e in by_schema(kafka_cfg.kafka_client(), kafka_cfg.topic("events"))["GeofenceEvent"]:
        e = {**e, "kind": e["kind"].lower()}
        got[e["object_id"]].append(tuple(e.get(f) for f in FIELDS))
    assert dict(got) == oracle
