"""Partitions added to the publications topic while the app and a producer run: the app reads
the new partitions from their first offset, and the matches equal the oracle's."""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka.admin import NewPartitions

from geops.workload import generate_workload
from kafkaio.clients import admin
from kafkaio.offsets import EndOffsets
from tests.app.conftest import metrics
from tests.app.live import load_subscriptions_only
from tests.faults.stack import (
    Publisher,
    assert_matches_oracle,
    live_env,
    oracle_of,
    processed,
    wait_answered,
    wait_for,
    wait_ready,
)

pytestmark = [pytest.mark.integration, pytest.mark.slow]

RATE = 150.0
ADDED = 2


def test_partitions_added_mid_stream_are_read(broker, procs, tmp_path, monkeypatch):
    env, cfg = live_env(broker, tmp_path, f"np{uuid.uuid4().hex[:8]}-", monkeypatch)
    w = generate_workload(seed=23, subscriptions=300, publications=1200)
    oracle = oracle_of(w.subscriptions, w.publications)
    load_subscriptions_only(cfg, w.subscriptions)
    topic = cfg.topic("publications")
    before = cfg["topics.publications.partitions"]
    app = procs.app(env)
    wait_ready(cfg, app)

    pub = Publisher(cfg, w.publications, RATE)
    pub.publish(400, partitions=range(before))
    pub.sender.flush()
    wait_for("the app to read the first publications", lambda: processed(cfg) >= pub.sent, 120,
             [app])
    client = admin(cfg.kafka_client())
    for future in client.create_partitions([NewPartitions(topic, before + ADDED)]).values():
        future.result()
    added_at = time.monotonic()

    def known() -> bool:
        parts = client.list_topics(topic, timeout=10).topics[topic].partitions
        return len(parts) == before + ADDED and all(p.leader >= 0 for p in parts.values())

    wait_for("the new partitions to have leaders", known, 30)
    pub.renew()  # a producer that knows the new partitions
    pub.publish(pub.left, partitions=range(before + ADDED))
    pub.close()
    wait_answered(cfg, oracle, [app], 90)
    answered_s = time.monotonic() - added_at
    assert app.stop() == 0, app.logs()[-3000:]

    assert assert_matches_oracle(cfg, oracle) == 0  # no fault, so no replayed batch either
    probe = EndOffsets(cfg.kafka_client())
    ends = {str(p): end for p, end in probe(topic).items()}
    probe.close()
    new = [ends[str(p)] for p in range(before, before + ADDED)]
    assert all(n > 0 for n in new), ends
    summaries = metrics(cfg)["BatchSummary"]
    read = summaries[-1]["source_end_offsets"]
    assert read == ends, f"the app read {read}, the topic holds {ends}"
    print(f"\n{pub.sent} publications, {len(summaries)} batches; partitions {before} -> "
          f"{before + ADDED} (the new ones hold {new} records), every publication answered "
          f"{answered_s:.1f} s after the partitions were added")
