"""An outage longer than the limit stops the app with one line naming the broker, and exit 4."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import config
from app.main import checkpoint_dir, ready_path
from app.subscriptions.feed import Prefetch, SubscriptionFeed
from config.exitcodes import EXIT_OUTAGE
from geops.workload import generate_workload
from kafkaio.errors import KafkaOutage
from kafkaio.sender import Sender
from kafkaio.topics import create_topics
from tests.app.conftest import Workload, load
from tests.conftest import kafka_env

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def _start(broker, tmp_path: Path, prefix: str, seed: int, subscriptions: int,
           publications: int, flags: list[str]) -> tuple[config.Config, subprocess.Popen]:
    """A workload loaded on ``broker`` and `geops app` (local[2]) started on it."""
    env = kafka_env(broker.address, str(tmp_path / "state"), prefix)
    cfg = config.load(environ=env)
    w = generate_workload(seed=seed, subscriptions=subscriptions, publications=publications)
    load(cfg, Workload(w.subscriptions, w.publications, {}))
    app = subprocess.Popen(
        [sys.executable, "-m", "cli.main", "app", "--master", "local[2]", "--workers", "2",
         *flags],
        env={**os.environ, **env}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True)
    return cfg, app


def test_outage_past_the_limit_ends_the_app_in_one_line(own_broker, tmp_path):
    cfg, app = _start(own_broker, tmp_path, "o-", 41, 100, 300,
                      ["--trigger", "200ms", "--outage-limit", "15s"])
    try:
        marker = ready_path(checkpoint_dir(cfg))
        deadline = time.monotonic() + 180
        while not marker.exists():
            assert app.poll() is None and time.monotonic() < deadline, "the app did not start"
            time.sleep(0.2)
        time.sleep(3)  # a few batches
        os.kill(own_broker.pid, signal.SIGSTOP)
        stopped_at = time.monotonic()
        out, _ = app.communicate(timeout=120)
        waited = time.monotonic() - stopped_at
    finally:
        os.kill(own_broker.pid, signal.SIGCONT)
        if app.poll() is None:
            os.killpg(app.pid, signal.SIGKILL)
    assert app.returncode == EXIT_OUTAGE, out[-3000:]
    # the limit counts from Kafka's last answer: the connector's own wait (up to the limit)
    # and the app's check that Kafka is still silent, not the limit twice
    assert 15 <= waited < 2 * 15, waited
    assert "Traceback" not in out, out[-5000:]
    final = [line for line in out.splitlines() if "did not answer for" in line]
    assert final, out[-3000:]
    assert f"Kafka at {own_broker.address}" in final[-1]
    assert "outage limit of 15 s" in final[-1]
    print(f"\nexit {app.returncode} after {waited:.0f} s: {final[-1][-220:]}")


def test_an_outage_while_the_executors_scan_the_subscriptions_ends_in_one_line(own_broker,
                                                                                tmp_path):
    """The broker stops answering after the app asked the subscriptions' end offsets, while
    the executors read the topic: one line naming the broker, exit 4, no traceback."""
    _, app = _start(own_broker, tmp_path, "os-", 42, 2000, 10, ["--outage-limit", "5s"])
    seen = []
    try:
        for line in app.stdout:  # the lease is held before the executors scan the topic
            seen.append(line)
            if "holding the lease of app" in line:
                break
        os.kill(own_broker.pid, signal.SIGSTOP)
        out, _ = app.communicate(timeout=120)
    finally:
        os.kill(own_broker.pid, signal.SIGCONT)
        if app.poll() is None:
            os.killpg(app.pid, signal.SIGKILL)
    out = "".join(seen) + out
    assert app.returncode == EXIT_OUTAGE, out[-3000:]
    final = [line for line in out.splitlines() if "reading the subscriptions topic" in line]
    assert final, out[-3000:]
    assert f"Kafka at {own_broker.address}" in final[-1] and "outage limit of 5 s" in final[-1]
    assert "subscriptions (" not in out  # it never got a set to start from
    print(f"\nexit {app.returncode}: {final[-1][-220:]}")


def test_a_broker_gone_past_the_limit_fails_the_batch_that_waits(own_broker, tmp_path):
    """The subscription changes read ahead (``app.subscriptions.feed.Prefetch``): a broker that
    stays away past the limit fails the batch that waits for its records."""
    cfg = config.load(environ=kafka_env(own_broker.address, str(tmp_path / "state"), "pf-"))
    create_topics(cfg, ["subscriptions"])
    topic = cfg.topic("subscriptions")
    sender = Sender(cfg.kafka_client())
    sender.send(topic, b"a", key=b"1")
    sender.flush()
    feed = SubscriptionFeed(cfg.kafka_client(), topic, str(tmp_path), 3.0)
    ahead = Prefetch(cfg.kafka_client(), topic, {0: 0}, 3.0, feed.ends_now)
    try:
        assert len(ahead.take({0: 0}, {0: 1})) == 1
        os.kill(own_broker.pid, signal.SIGSTOP)
        started = time.monotonic()
        with pytest.raises(KafkaOutage):
            ahead.take({0: 1}, {0: 2})  # a recorded end the broker cannot serve now
        assert time.monotonic() - started < 60
    finally:
        os.kill(own_broker.pid, signal.SIGCONT)
        ahead.close()
        feed.close()
        sender.close()
