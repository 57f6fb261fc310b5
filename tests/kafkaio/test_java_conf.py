"""librdkafka settings translated for the Java client of Spark's Kafka connector (pure)."""

from __future__ import annotations

import pytest

from app.read.source import source_options
from config import load
from kafkaio.clients import client_conf
from kafkaio.errors import UntranslatableSetting
from kafkaio.java_conf import java_client_conf, librdkafka_conf


def test_same_names_pass_and_different_names_are_translated():
    got = java_client_conf({"bootstrap.servers": "b:9092", "security.protocol": "SASL_SSL",
                            "sasl.mechanisms": "SCRAM-SHA-512", "fetch.wait.max.ms": "50",
                            "client.id": "geops"})
    assert got == {"bootstrap.servers": "b:9092", "security.protocol": "SASL_SSL",
                   "sasl.mechanism": "SCRAM-SHA-512", "fetch.max.wait.ms": "50",
                   "client.id": "geops"}


def test_credentials_become_a_jaas_config_for_the_mechanism():
    plain = java_client_conf({"sasl.mechanism": "PLAIN", "sasl.username": "alice",
                              "sasl.password": 'p"w\\d'})
    assert plain["sasl.jaas.config"] == (
        'org.apache.kafka.common.security.plain.PlainLoginModule required '
        'username="alice" password="p\\"w\\\\d";')
    scram = java_client_conf({"sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "a",
                              "sasl.password": "b"})
    assert scram["sasl.jaas.config"].startswith(
        "org.apache.kafka.common.security.scram.ScramLoginModule required")
    with pytest.raises(UntranslatableSetting, match="GSSAPI"):
        java_client_conf({"sasl.mechanism": "GSSAPI", "sasl.username": "a"})
    # a JAAS line given for the Java client wins
    own = java_client_conf({"sasl.mechanism": "PLAIN", "sasl.username": "a",
                            "java.sasl.jaas.config": "X required;"})
    assert own["sasl.jaas.config"] == "X required;"


def test_pem_files_become_pem_stores(tmp_path):
    cert, key = tmp_path / "c.pem", tmp_path / "k.pem"
    cert.write_text("-----BEGIN CERTIFICATE-----\nAAA\n-----END CERTIFICATE-----\n")
    key.write_text("-----BEGIN PRIVATE KEY-----\nBBB\n-----END PRIVATE KEY-----\n")
    got = java_client_conf({"ssl.ca.location": "/etc/ca.pem",
                            "ssl.certificate.location": str(cert),
                            "ssl.key.location": str(key), "ssl.key.password": "s"})
    assert got["ssl.truststore.type"] == "PEM"
    assert got["ssl.truststore.location"] == "/etc/ca.pem"
    assert got["ssl.keystore.type"] == "PEM"
    assert "AAA" in got["ssl.keystore.certificate.chain"] and "BBB" in got["ssl.keystore.key"]
    assert got["ssl.key.password"] == "s"
    with pytest.raises(UntranslatableSetting, match="go together"):
        java_client_conf({"ssl.key.location": str(key)})
    with pytest.raises(UntranslatableSetting, match="cannot read it"):
        java_client_conf({"ssl.certificate.location": str(tmp_path / "none"),
                          "ssl.key.location": str(key)})


def test_producer_only_settings_stay_with_librdkafka_and_unknown_ones_are_refused():
    assert java_client_conf({"linger.ms": "5", "statistics.interval.ms": "0"}) == {}
    with pytest.raises(UntranslatableSetting, match=r"'ssl\.engine\.location'.*java\.ssl"):
        java_client_conf({"ssl.engine.location": "/x.so"})


def test_java_settings_reach_only_the_java_client():
    conf = {"bootstrap.servers": "b", "java.ssl.provider": "SunJSSE"}
    assert java_client_conf(conf) == {"bootstrap.servers": "b", "ssl.provider": "SunJSSE"}
    assert librdkafka_conf(conf) == {"bootstrap.servers": "b"}
    assert "java.ssl.provider" not in client_conf(conf, {"linger.ms": 1})


def test_the_apps_connector_options_follow_its_settings():
    cfg = load(environ={"GEOPS_BOOTSTRAP_SERVERS": "h:1", "GEOPS_KAFKA_SASL_MECHANISM": "PLAIN",
                        "GEOPS_KAFKA_SASL_USERNAME": "u", "GEOPS_KAFKA_SASL_PASSWORD": "p",
                        "GEOPS_APP_MAX_RECORDS_PER_TRIGGER": "500",
                        "GEOPS_APP_ON_DATA_LOSS": "continue", "GEOPS_OUTAGE_LIMIT": "60s"})
    opts = source_options(cfg, "pubs", "latest")
    assert opts["subscribe"] == "pubs" and opts["startingOffsets"] == "latest"
    assert opts["kafka.bootstrap.servers"] == "h:1"
    assert "username=\"u\"" in opts["kafka.sasl.jaas.config"]
    assert opts["maxOffsetsPerTrigger"] == "500" and opts["failOnDataLoss"] == "false"
    assert opts["kafka.isolation.level"] == "read_committed"
    assert opts["kafka.fetch.max.wait.ms"] == "0"
    assert opts["kafkaConsumer.pollTimeoutMs"] == "60000"
    # each call waits 15 s; the driver's offset lookups are tried 4 times 16 s apart (the limit)
    assert opts["kafka.default.api.timeout.ms"] == "15000"
    assert opts["fetchOffset.numRetries"] == "4"
    short = source_options(load(environ={"GEOPS_BOOTSTRAP_SERVERS": "h:1",
                                         "GEOPS_OUTAGE_LIMIT": "5s"}), "pubs", "latest")
    assert short["kafka.default.api.timeout.ms"] == "5000"
    assert short["fetchOffset.numRetries"] == "1"
    plain = source_options(load(environ={"GEOPS_BOOTSTRAP_SERVERS": "h:1"}), "pubs", "earliest")
    assert "maxOffsetsPerTrigger" not in plain and plain["failOnDataLoss"] == "true"
