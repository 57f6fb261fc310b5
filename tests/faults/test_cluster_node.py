"""A three-node cluster loses a node to ``kill -9`` mid-stream while the app, the distributor
and a producer run: topics made with the broker's default replication (3 replicas, 2 in sync
required) lose nothing, the app never stops (the same process runs to the end) and the matches
equal the oracle's; the node then comes back on its data."""

from __future__ import annotations

import time

import pytest

from config import TOPICS
from geops.workload import generate_workload
from kafkaio import broker as embedded
from kafkaio.clients import admin
from kafkaio.topics import topic_config
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

RATE = 120.0


def test_a_node_killed_mid_stream_loses_nothing(own_cluster, broker_state, procs, tmp_path,
                                                 monkeypatch):
    env, cfg = live_env(own_cluster.address, tmp_path, "c-", monkeypatch)
    assert cfg["kafka.replication_factor"] == 0  # the brokers' default
    w = generate_workload(seed=27, subscriptions=300, publications=1200)
    oracle = oracle_of(w.subscriptions, w.publications)
    load_subscriptions_only(cfg, w.subscriptions)
    client = admin(cfg.kafka_client())
    meta = client.list_topics(timeout=10).topics
    for logical in TOPICS:
        parts = meta[cfg.topic(logical)].partitions.values()
        assert all(len(p.replicas) == 3 for p in parts), (logical, [p.replicas for p in parts])
    topic = cfg.topic("publications")
    assert topic_config(cfg, topic)["min.insync.replicas"] == "2"
    dist = procs.distributor(env)
    app = procs.app(env)
    wait_ready(cfg, app)

    pub = Publisher(cfg, w.publications, RATE)
    pub.publish(300)
    wait_for("the app's first batches", lambda: processed(cfg) >= 300, 120, [app, dist])
    pub.publish(100)
    victim = client.list_topics(topic, timeout=10).topics[topic].partitions[0].leader
    embedded.kill_node(broker_state, victim)  # the leader of partition 0, mid-stream
    killed_at = time.monotonic()
    pub.publish(400)
    pub.sender.flush()
    wait_for("the app to read everything with one node dead",
             lambda: processed(cfg) >= pub.sent, 120, [app, dist])
    degraded_s = time.monotonic() - killed_at
    leaders = {p.leader for p in client.list_topics(topic, timeout=10).topics[topic]
               .partitions.values()}
    assert victim not in leaders, leaders

    info, started = embedded.start(broker_state, port=0, nodes=3)  # the node comes back
    assert started and info.node(victim).pid != 0
    pub.publish(pub.left)
    pub.close()
    wait_answered(cfg, oracle, [app, dist], 120)
    assert app.alive() and dist.alive()
    assert app.stop() == 0, app.logs()[-3000:]
    assert dist.stop() == 0, dist.logs()[-3000:]
    assert app.runs == 1 and dist.runs == 1

    duplicates = assert_matches_oracle(cfg, oracle)
    app_log = app.logs()
    assert "data loss" not in app_log and "Traceback" not in app_log, app_log[-3000:]
    summaries = metrics(cfg)["BatchSummary"]
    print(f"\n{pub.sent} publications, {len(summaries)} batches, {duplicates} repeated matches; "
          f"node {victim} (leader of {topic}[0]) killed, everything written meanwhile read "
          f"{degraded_s:.1f} s after the kill; leaders now {sorted(leaders)}")

