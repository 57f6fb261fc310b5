"""A secured connection end to end: the broker takes SASL/PLAIN credentials only, geops is
given them once (librdkafka's names), and both of its Kafka clients use them: librdkafka for
the producers and the app's writers, the Java client of Spark's connector for the app's
reading (translated by ``kafkaio.java_conf``). A wrong password ends the app in one line."""

from __future__ import annotations

import logging

import pytest

import config
from config.exitcodes import EXIT_FAILED
from kafkaio import broker as local
from tests.app.conftest import matches, run_app
from tests.app.live import LiveProducer, Phase, load_subscriptions_only
from tests.conftest import kafka_env

pytestmark = [pytest.mark.integration, pytest.mark.slow]

USER, PASSWORD = "geops", "s3cret-pw"


@pytest.fixture
def sasl_broker(tmp_path):
    state = tmp_path / "broker"
    info, _ = local.start(state, port=0, sasl_users={USER: PASSWORD, "other": "x"})
    try:
        yield info
    finally:
        local.stop(state)


def secured_env(info: local.BrokerInfo, tmp_path, password: str) -> dict[str, str]:
    env = kafka_env(info.sasl_address, str(tmp_path / "state"), "s-")
    env.update({"GEOPS_KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT",
                "GEOPS_KAFKA_SASL_MECHANISM": "PLAIN", "GEOPS_KAFKA_SASL_USERNAME": USER,
                "GEOPS_KAFKA_SASL_PASSWORD": password})
    return env


def test_the_app_reads_and_writes_through_sasl_plain(sasl_broker, workload, tmp_path,
                                                     monkeypatch):
    env = secured_env(sasl_broker, tmp_path, PASSWORD)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    cfg = config.load(environ=env)
    assert cfg.bootstrap_servers() == sasl_broker.sasl_address
    load_subscriptions_only(cfg, workload.subs)
    producer = LiveProducer(cfg, workload.pubs, [Phase(len(workload.pubs), rate=400)]).start()
    assert run_app("--strategy", "sPIS", "--stop-after-idle", "4s") == 0
    producer.join()
    got = matches(cfg)
    assert {k: v[0] for k, v in got.items()} == workload.oracle


def test_a_wrong_password_is_one_line(sasl_broker, tmp_path, monkeypatch, caplog):
    env = secured_env(sasl_broker, tmp_path, "wrong")
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    with caplog.at_level(logging.ERROR, logger="geops.app"):
        assert run_app("--strategy", "sPIS", "--outage-limit", "10s") == EXIT_FAILED
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors and "\n" not in errors[-1]
    assert "auth" in errors[-1].lower(), errors
