"""The fault suite: a live producer, the app and the distributor run while, in turn, a poison
record arrives, a forged command is injected, the broker is paused (SIGSTOP/SIGCONT), the
driver is ``kill -9``ed mid-write and restarted, and the distributor is ``kill -9``ed and
restarted. At the end the matches equal the oracle's and nothing is lost.

The broker is this test's own (pausing the session's would stall other tests). The processes'
Kafka clients time a request out after ``REQUEST_TIMEOUT_MS`` (librdkafka's and Java's default
is 30 s; any client may be given less) and the pause lasts ``GEOPS_FAULT_PAUSE`` seconds
(default 15: past that timeout, so timed-out requests are retried too; the outage limit is 5
minutes).
"""

from __future__ import annotations

import os
import signal
import time

import pytest

from geops.workload import generate_workload
from kafkaio.dump import by_schema
from kafkaio.sender import Sender
from schemas import codec
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

REQUEST_TIMEOUT_MS = 10_000
PAUSE = float(os.environ.get("GEOPS_FAULT_PAUSE", "15"))
RATE = 100.0


def test_live_stream_survives_every_fault(own_broker, procs, tmp_path, monkeypatch):
    monkeypatch.setenv("GEOPS_KAFKA_REQUEST_TIMEOUT_MS", str(REQUEST_TIMEOUT_MS))
    env, cfg = live_env(own_broker.address, tmp_path, "f-", monkeypatch)
    w = generate_workload(seed=21, subscriptions=600, publications=4000)
    oracle = oracle_of(w.subscriptions, w.publications)
    load_subscriptions_only(cfg, w.subscriptions)
    dist = procs.distributor(env, "--resync-periods", "3")
    app = procs.app(env)
    wait_ready(cfg, app)

    pub = Publisher(cfg, w.publications, RATE)
    pub.publish(300)
    pub.sender.send(pub.topic, b"\x00poison, not Avro", key=b"poison")  # 1. a poison record
    pub.publish(300)
    forged = codec().encode("RebalanceCommand", {                 # 2. a forged command
        "app_id": "geops", "epoch": 99, "assignment": [7] * 16, "moves": [],
        "metric": "LB", "mldc_before": 1.0, "mldc_predicted": 0.0, "reason": "forged",
        "time": int(time.time() * 1000)})
    injector = Sender(cfg.kafka_client())
    injector.send(cfg.topic("control"), forged, key=b"geops")
    injector.close()
    pub.publish(300)
    os.kill(own_broker.pid, signal.SIGSTOP)                         # 3. the broker stops answering
    paused_at = time.monotonic()
    pub.publish(400)  # the producer keeps writing: librdkafka holds the records
    time.sleep(max(PAUSE - (time.monotonic() - paused_at), 0))
    os.kill(own_broker.pid, signal.SIGCONT)
    resumed_at = time.monotonic()
    pub.sender.flush()

    # The same app process resumes by itself: every record so far (and the poison one) is
    # processed before anything else happens.
    wait_for("the app to resume after the pause", lambda: processed(cfg) >= pub.sent + 1, 120,
             [app])
    resume_s = time.monotonic() - resumed_at
    pub.publish(300)
    app.kill9()                                                     # 4. kill -9 mid-write
    pub.publish(300)
    app.start()
    pub.publish(300)
    dist.kill9()                                                    # 5. the distributor too
    pub.publish(200)
    dist.start()

    # The restarted distributor recovers the forged epoch from the control topic and drops it
    # once the app has gone on reporting its own for --resync-periods periods; those periods
    # need batches, so the stream goes on in small steps until it has (not a race between the
    # rest of the stream and the distributor's start on a busy machine).
    def resynced() -> bool:
        if "resync" in {s["decision"] for s in by_schema(cfg.kafka_client(), cfg.topic(
                "status")).get("DistributorStatus", [])}:
            return True
        pub.publish(50)
        return False

    wait_for("the restarted distributor to drop the forged epoch", resynced, 240, [app, dist])
    pub.publish(pub.left)
    pub.close()

    wait_answered(cfg, oracle, [app, dist])
    assert app.stop() == 0, app.logs()[-3000:]
    assert dist.stop() == 0, dist.logs()[-3000:]

    assert_matches_oracle(cfg, oracle)
    dead = by_schema(cfg.kafka_client(), cfg.topic("dead_letter"))["DeadLetter"]
    assert [d["key"] for d in dead] == [b"poison"]
    statuses = by_schema(cfg.kafka_client(), cfg.topic("status"))["DistributorStatus"]
    assert "resync" in {s["decision"] for s in statuses}, "the forged epoch was never dropped"
    app_log = app.logs()
    assert "not answering" in app_log or "answers again" in app_log
    assert "Traceback" not in app_log
    summaries = metrics(cfg)["BatchSummary"]
    print(f"\n{pub.sent} publications, {len(summaries)} batches, {len(dead)} dead letter; "
          f"broker paused {PAUSE:.0f} s, the app caught up {resume_s:.1f} s after it answered "
          f"again; app runs {app.runs}, distributor runs {dist.runs}")
