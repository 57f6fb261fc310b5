"""Exactly-once output while the broker is killed (``kill -9``) and restarted mid-stream: the
app's transaction of the batch under way waits for the broker (or is aborted and written
again), and a read_committed reader sees every match once."""

from __future__ import annotations

import os
import threading
import time

import pytest

import config
from geops.oracle import oracle_match
from geops.workload import generate_workload
from kafkaio import broker as embedded
from tests.app.delivery import assert_exactly_once, run_app
from tests.app.live import LiveProducer, Phase, load_subscriptions_only
from tests.app.test_app_control import wait_for_batches
from tests.conftest import kafka_env

pytestmark = pytest.mark.integration

DOWN_S = 5.0


def test_broker_killed_and_restarted_mid_stream(own_broker, tmp_path, monkeypatch):
    env = kafka_env(own_broker.address, str(tmp_path / "state"), "x-")
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    cfg = config.load(environ=env)
    w = generate_workload(seed=23, subscriptions=600, publications=1500)
    keys, offsets, ids = oracle_match(w.subscriptions, w.publications.ids, w.publications.geoms)
    oracle = {int(k): tuple(ids[offsets[i]:offsets[i + 1]].tolist())
              for i, k in enumerate(keys)}
    load_subscriptions_only(cfg, w.subscriptions)
    producer = LiveProducer(cfg, w.publications, [Phase(len(w.publications), 150.0)]).start()
    codes: list[int] = []
    app = threading.Thread(target=lambda: codes.append(run_app(
        ["--master", "local[2]", "--delivery", "exactly-once", "--stop-after-idle", "8s"],
        {**os.environ, **env}, tmp_path / "app.log", timeout=240)))
    app.start()
    assert wait_for_batches(cfg, 4, timeout=180), (tmp_path / "app.log").read_text()[-3000:]
    state = tmp_path / "broker"
    embedded.kill_node(state, 1)
    time.sleep(DOWN_S)
    embedded.start(state, port=own_broker.port)
    producer.join(180)
    app.join(240)
    log = (tmp_path / "app.log").read_text()
    assert codes == [0], log[-3000:]
    assert "not answering" in log or "answers again" in log or "writing it again" in log, (
        "the app never noticed the broker was gone")
    assert_exactly_once(cfg, oracle)
