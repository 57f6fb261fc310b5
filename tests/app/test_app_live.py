"""The app keeps up with publications that arrive while it runs (not a backlog).

A producer thread writes once the query has started, at a steady rate, then pauses and sends a
burst; a second test keeps writing a skewed stream across a rebalance while the distributor
runs. Every publication must be answered exactly once, with the oracle's matches (a partition
added mid-stream: tests/faults/test_new_partitions.py).
"""

from __future__ import annotations

import logging
import re

import pytest

from distributor.service import Service
from kafkaio.dump import by_schema
from tests.app.conftest import matches, metrics, run_app
from tests.app.live import LiveProducer, Phase, load_subscriptions_only
from tests.distributor.test_service import running
from tests.distributor.test_service_app import SETTINGS, skewed  # noqa: F401 (fixture)

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def check_answered_once(cfg, oracle: dict[int, tuple[int, ...]], published: int) -> list[dict]:
    summaries = metrics(cfg)["BatchSummary"]
    assert sum(s["records"] for s in summaries) == published
    assert sum(s["dead_letters"] for s in summaries) == 0
    got = matches(cfg)
    assert all(len(v) == 1 for v in got.values()), "a clean run answers each publication once"
    assert {k: v[0] for k, v in got.items()} == oracle
    return summaries


def test_steady_rate_then_pause_then_burst(workload, kafka_cfg, caplog):
    caplog.set_level(logging.INFO, logger="geops.app")
    load_subscriptions_only(kafka_cfg, workload.subs)
    n = len(workload.pubs)
    producer = LiveProducer(kafka_cfg, workload.pubs, [
        Phase(n // 2, rate=150, pause=4.0),   # steady, then silence shorter than the idle stop
        Phase(n - n // 2)]).start()           # a burst as fast as the producer goes
    assert run_app("--strategy", "sPIS", "--stop-after-idle", "8s") == 0
    producer.join()
    summaries = check_answered_once(kafka_cfg, workload.oracle, n)
    # Live, not a backlog: batches ran while the producer was still writing (a backlog has
    # none; on a loaded machine batches are fewer and larger, so a few is the proof).
    during = [s for s in summaries if s["end_time"] < producer.finished_at * 1000]
    assert len(during) >= 3
    assert sum(s["records"] for s in during) >= n // 4
    # a warm start: every resident index built before the query, ready after its first batch
    lines = [r.getMessage() for r in caplog.records if r.name == "geops.app"]
    warmed = next(i for i, m in enumerate(lines) if m.startswith("warmed up"))
    first = next(i for i, m in enumerate(lines) if m.startswith("batch 0 "))
    ready = next(i for i, m in enumerate(lines) if m.startswith("ready:"))
    assert warmed < first < ready, lines[:ready + 1]
    built = int(re.search(r"and (\d+) resident indexes", lines[warmed]).group(1))
    assert built >= summaries[0]["partitions"], lines[warmed]
    p99 = max(s["latency_p99_ms"] for s in summaries if s["records"])
    print(f"\n{len(summaries)} batches, {len(during)} while the producer wrote; worst batch "
          f"p99 latency {p99:.0f} ms")


def test_producer_keeps_writing_across_a_rebalance(skewed, kafka_cfg):  # noqa: F811
    """Distributor running, skewed stream written live: the command lands mid-stream and no
    publication is lost or answered twice."""
    load_subscriptions_only(kafka_cfg.with_overrides({"topics.publications.partitions": "1"}),
                            skewed.subs)
    service = Service(kafka_cfg.with_overrides({**SETTINGS, "distributor.mode": "dynamic"}))
    producer = LiveProducer(kafka_cfg, skewed.pubs, [Phase(len(skewed.pubs), rate=700)])
    with running(service):
        producer.start()
        assert run_app("--strategy", "sPS", "--partitions", "16", "--stop-after-idle", "5s",
                       "--max-records-per-trigger", "400") == 0
    producer.join()
    summaries = check_answered_once(kafka_cfg, skewed.oracle, len(skewed.pubs))
    commands = by_schema(kafka_cfg.kafka_client(),
                         kafka_cfg.topic("control")).get("RebalanceCommand", [])
    moves = metrics(kafka_cfg).get("MoveReport", [])
    assert commands and moves, "the skewed live stream must lead to a rebalance"
    first_move = min(m["time"] for m in moves)
    assert first_move < producer.finished_at * 1000, "the rebalance came after the stream"
    after = [s for s in summaries if s["start_time"] >= first_move]
    assert sum(s["records"] for s in after) > 0
    ahead = (producer.finished_at * 1000 - first_move) / 1000
    print(f"\n{len(commands)} command(s); first move {ahead:.1f} s before the producer "
          f"finished; {len(summaries)} batches")
