"""librdkafka's log lines go through Python logging, not straight to the process's stderr: the
clients of a broker that a test stopped no longer fill the test output with pages of
``%3|...|FAIL|... Connection refused``, and what they say is still logged, as an error."""

from __future__ import annotations

import logging
import time

import pytest
from confluent_kafka import TopicPartition

import config
from kafkaio import broker as embedded
from kafkaio.clients import consumer, producer
from kafkaio.topics import create_topics
from tests.conftest import kafka_env

pytestmark = [pytest.mark.integration]


def test_a_client_of_a_stopped_broker_logs_through_logging(own_broker, broker_state, tmp_path,
                                                           capfd, caplog):
    cfg = config.load(environ=kafka_env(own_broker.address, str(tmp_path / "state"), "q-"))
    create_topics(cfg, ["publications"])
    topic = cfg.topic("publications")
    writer = producer(cfg.kafka_client())
    writer.produce(topic, b"before", partition=0)
    assert writer.flush(10) == 0
    reader = consumer(cfg.kafka_client())
    reader.assign([TopicPartition(topic, 0, 0)])
    assert [m.value() for m in reader.consume(1, timeout=10)] == [b"before"]
    capfd.readouterr()

    embedded.stop(broker_state)
    writer.produce(topic, b"after", partition=0)  # both keep trying to reach the broker
    refused = []
    # a deadline, not a wait: the loop ends once both clients have logged (within a second when
    # the machine is idle; under the whole suite's load once not within 20 s)
    deadline = time.monotonic() + 60
    with caplog.at_level(logging.WARNING, logger="geops.kafka.librdkafka"):
        while time.monotonic() < deadline and len({r.getMessage().split("]")[0]
                                                    for r in refused}) < 2:
            reader.consume(10, timeout=0.2)
            writer.poll(0.2)
            refused = [r for r in caplog.records if r.name == "geops.kafka.librdkafka"
                       and "Connection refused" in r.getMessage()]
    err = capfd.readouterr().err
    reader.close()
    writer.purge()

    assert "rdkafka" not in err and "Connection refused" not in err, err[:2000]
    clients = {r.getMessage().split("]")[0] for r in refused}  # "FAIL [rdkafka#producer-1"
    assert any("consumer" in c for c in clients) and any("producer" in c for c in clients), \
        [r.getMessage() for r in caplog.records][:10]
    assert all(r.levelno == logging.ERROR for r in refused)
    print(f"\n{len(refused)} lines of {len(clients)} clients through logging, e.g. "
          f"{refused[0].getMessage()[:160]}")
