"""The broker killed with ``kill -9`` mid-stream and started again on its data while the app,
the distributor and a producer run: all three ride out the outage by themselves (the same
processes go on), nothing is lost and no data loss is reported. The app writes exactly once:
the transaction of the batch under way waits for the broker (or is aborted and written
again), and a read_committed reader sees every match once, equal to the oracle's. (A broker
that stops answering with at-least-once output is tests/faults/test_fault_suite.py's.)"""

from __future__ import annotations

import time

import pytest

from config.exitcodes import EXIT_DATA_LOSS
from geops.workload import generate_workload
from kafkaio import broker as embedded
from kafkaio.dump import by_schema
from tests.app.conftest import metrics
from tests.app.delivery_checks import assert_exactly_once
from tests.app.live import load_subscriptions_only
from tests.faults.stack import (
    Publisher,
    live_env,
    oracle_of,
    processed,
    wait_answered,
    wait_for,
    wait_ready,
)

pytestmark = [pytest.mark.integration, pytest.mark.slow]

RATE = 120.0
DOWN = 5.0           # seconds the broker stays dead before it is started again
OUTAGE_LIMIT = 90.0  # test-sized: the broker is away DOWN plus its start-up


def test_broker_killed_and_restarted_mid_stream(own_broker, broker_state, procs, tmp_path,
                                                monkeypatch):
    env, cfg = live_env(own_broker.address, tmp_path, "k-", monkeypatch)
    w = generate_workload(seed=25, subscriptions=300, publications=1200)
    oracle = oracle_of(w.subscriptions, w.publications)
    load_subscriptions_only(cfg, w.subscriptions)
    limit = ["--outage-limit", f"{OUTAGE_LIMIT:.0f}s"]
    dist = procs.distributor(env, *limit)
    app = procs.app(env, *limit, "--delivery", "exactly-once")
    wait_ready(cfg, app)

    pub = Publisher(cfg, w.publications, RATE, outage_limit=OUTAGE_LIMIT)
    pub.publish(300)
    wait_for("the app's first batches", lambda: processed(cfg) >= 300, 120, [app, dist])
    pub.publish(100)
    embedded.kill_node(broker_state, 1)  # mid-stream: batches run, the producer writes
    killed_at = time.monotonic()
    pub.publish(300)  # queued by the producer while the broker is gone
    time.sleep(max(DOWN - (time.monotonic() - killed_at), 0))
    info, started = embedded.start(broker_state, port=0)
    back_at, back_wall = time.monotonic(), time.time()
    assert started and info.address == own_broker.address
    pub.publish(pub.left)
    pub.close()
    delivered_s = time.monotonic() - back_at

    wait_answered(cfg, oracle, [app, dist], 180)
    answered_s = time.monotonic() - back_at
    # The distributor goes on too: it reports periods after the broker came back.
    wait_for("a distributor period after the restart", lambda: any(
        s["time"] >= back_wall * 1000
        for s in by_schema(cfg.kafka_client(), cfg.topic("status")).get("DistributorStatus", [])
    ), 60, [dist])
    code = app.stop()
    assert code != EXIT_DATA_LOSS, f"the app reported data loss:\n{app.logs()[-3000:]}"
    assert code == 0, app.logs()[-3000:]
    assert dist.stop() == 0, dist.logs()[-3000:]
    assert app.runs == 1 and dist.runs == 1

    assert_exactly_once(cfg, oracle)
    app_log = app.logs()
    assert "answers again" in app_log, "the app never saw the broker go"
    assert "data loss" not in app_log and "Traceback" not in app_log, app_log[-3000:]
    assert "answers again" in dist.logs() or "not answering" in dist.logs()
    summaries = metrics(cfg)["BatchSummary"]
    print(f"\n{pub.sent} publications, {len(summaries)} batches; "
          f"broker dead {back_at - killed_at:.1f} s (kill to started again), producer delivered "
          f"{delivered_s:.1f} s and every publication answered {answered_s:.1f} s after")
