"""A topic that came back empty (the embedded broker keeps topics in memory, so a restart loses
them): restarting the app on its old checkpoint stops with a message naming the offsets and the
remedy (exit code 5), or with ``--on-data-loss continue`` reads the new log from its start."""

from __future__ import annotations

import logging

import pytest

import config
from config.exitcodes import EXIT_DATA_LOSS
from geops.oracle import oracle_match
from geops.workload import generate_workload
from kafkaio import broker as embedded
from tests.app.conftest import Workload, load, matches, run_app
from tests.conftest import kafka_env

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def workload(seed: int, n: int) -> Workload:
    w = generate_workload(seed=seed, subscriptions=200, publications=n)
    keys, offsets, ids = oracle_match(w.subscriptions, w.publications.ids, w.publications.geoms)
    oracle = {int(k): tuple(ids[offsets[i]:offsets[i + 1]].tolist())
              for i, k in enumerate(keys)}
    return Workload(w.subscriptions, w.publications, oracle)


def test_topic_reset_is_named_then_continue_reads_the_new_log(own_broker, tmp_path,
                                                                 monkeypatch, caplog):
    env = kafka_env(own_broker.address, str(tmp_path / "state"), "d-")
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    cfg = config.load(environ=env)
    before = workload(31, 1200)
    load(cfg, before)
    assert run_app("--strategy", "sPIS") == 0
    assert {k: v[0] for k, v in matches(cfg).items()} == before.oracle

    # The broker restarts without its data; topics and subscriptions come back, with fewer
    # publications than the checkpoint has read.
    state = tmp_path / "broker"
    embedded.stop(state)
    embedded.start(state, port=own_broker.port)
    after = workload(32, 200)
    load(cfg, after)

    with caplog.at_level(logging.ERROR, logger="geops.app"):
        assert run_app("--strategy", "sPIS") == EXIT_DATA_LOSS
    (message,) = [r.getMessage() for r in caplog.records if r.name == "geops.app"
                  and r.levelno == logging.ERROR]
    assert "data loss: d-publications[" in message and "but the query has read to" in message
    assert "--on-data-loss continue" in message and str(tmp_path / "state") in message
    assert "\n" not in message
    assert matches(cfg) == {}  # nothing was answered from the wrong offsets

    assert run_app("--strategy", "sPIS", "--on-data-loss", "continue") == 0
    assert {k: v[0] for k, v in matches(cfg).items()} == after.oracle
