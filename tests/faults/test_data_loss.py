"""A topic that came back shorter (deleted and created again): restarting the app on its old
checkpoint stops with a message naming the offsets and the remedy (exit code 5); with
``--on-data-loss continue`` (Spark's ``failOnDataLoss=false``) it skips what the new log held
when the loss was found, names the skipped range on the dead-letter topic, and reads what
arrives after it."""

from __future__ import annotations

import logging
import time
import uuid

import pytest

import config
from config.exitcodes import EXIT_DATA_LOSS
from geops.oracle import oracle_answers
from geops.workload import generate_workload
from kafkaio.dump import by_schema
from kafkaio.sender import produce_records
from kafkaio.topics import drop_topics
from schemas.records import publication_records
from tests.app.conftest import Workload, load, matches, run_app
from tests.conftest import kafka_env

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def workload(seed: int, n: int) -> Workload:
    w = generate_workload(seed=seed, subscriptions=200, publications=n)
    return Workload(w.subscriptions, w.publications,
                    oracle_answers(w.subscriptions, w.publications.ids, w.publications.geoms))


def test_topic_reset_is_named_then_continue_reads_the_new_log(broker, tmp_path,
                                                                 monkeypatch, caplog):
    prefix = f"d{uuid.uuid4().hex[:8]}-"
    env = kafka_env(broker, str(tmp_path / "state"), prefix)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    cfg = config.load(environ=env)
    before = workload(31, 1200)
    load(cfg, before)
    assert run_app("--strategy", "sPIS") == 0
    assert {k: v[0] for k, v in matches(cfg).items()} == before.oracle

    # Every topic is deleted and created again, with fewer publications than the checkpoint
    # has read.
    drop_topics(cfg)
    wait_until_gone(cfg)
    after = workload(32, 200)
    load(cfg, after)

    with caplog.at_level(logging.WARNING, logger="geops.app"):
        assert run_app("--strategy", "sPIS") == EXIT_DATA_LOSS
    # the static side's snapshot is of the topic deleted: another workload, rebuilt
    (foreign,) = [r.getMessage() for r in caplog.records if "does not match" in r.getMessage()]
    assert "it was written for topic id " in foreign, foreign
    (message,) = [r.getMessage() for r in caplog.records if r.name == "geops.app"
                  and r.levelno == logging.ERROR]
    assert f"data loss: {prefix}publications[" in message
    assert "but the query has read to" in message
    assert "--on-data-loss continue" in message and str(tmp_path / "state") in message
    assert "\n" not in message
    assert matches(cfg) == {}  # nothing was answered from the wrong offsets

    assert run_app("--strategy", "sPIS", "--on-data-loss", "continue") == 0
    assert matches(cfg) == {}
    dead = by_schema(cfg.kafka_client(), cfg.topic("dead_letter")).get("DeadLetter", [])
    reasons = [d["reason"] for d in dead]
    assert reasons, "the skipped range was not reported"
    assert all(r.startswith(f"data loss: {prefix}publications[") and "skipped" in r
               for r in reasons), reasons

    produce_records(cfg.kafka_client(), cfg.topic("publications"), "Publication",
                    publication_records(after.pubs))
    assert run_app("--strategy", "sPIS", "--on-data-loss", "continue") == 0
    assert {k: v[0] for k, v in matches(cfg).items()} == after.oracle


def wait_until_gone(cfg: config.Config, timeout: float = 30.0) -> None:
    """Topic deletion is asynchronous: wait until the broker no longer lists the topics."""
    from kafkaio.clients import admin

    client, deadline = admin(cfg.kafka_client()), time.monotonic() + timeout
    names = {cfg.topic(t) for t in config.TOPICS}
    while names & set(client.list_topics(timeout=10).topics):
        assert time.monotonic() < deadline, "the deleted topics are still listed"
        time.sleep(0.2)
