"""A producer's fatal error ends ``Sender.flush`` in one line naming what was denied, however
confluent-kafka hands it over (no broker needed: the error comes through the client's callback
or out of its flush)."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException

from kafkaio.errors import KafkaUnavailable
from kafkaio.sender import Sender

CONF = {"bootstrap.servers": "127.0.0.1:1", "sasl.username": "dashboard"}


def _denied() -> KafkaError:
    return KafkaError(KafkaError.CLUSTER_AUTHORIZATION_FAILED,
                      "Failed to acquire idempotence PID from broker: Broker: Cluster "
                      "authorization failed", fatal=True)


def test_a_fatal_error_from_the_callback_ends_flush_naming_the_denial():
    sender = Sender(CONF, outage_limit=5)
    sender._on_error(KafkaError(KafkaError._TRANSPORT, "broker down"))  # retried, not fatal
    sender._on_error(_denied())
    with pytest.raises(KafkaUnavailable, match=r"Kafka denied User:dashboard WRITE on topic "
                                               r"'metrics': it may write to no topic"):
        sender._topic = "metrics"
        sender.flush()


class _Raising:
    """A client whose flush raises what confluent-kafka raised out of it."""

    def __init__(self, exc: BaseException):
        self.exc = exc

    def flush(self, timeout: float) -> int:
        raise self.exc

    def __len__(self) -> int:
        return 1


def test_a_systemerror_without_cause_is_the_fatal_error_the_callback_saw():
    sender = Sender(CONF, outage_limit=5)
    sender._on_error(_denied())
    sender._producer = _Raising(SystemError("flush returned NULL without setting an exception"))
    sender._topic = "metrics"
    with pytest.raises(KafkaUnavailable, match="Kafka denied User:dashboard WRITE"):
        sender.flush()


def test_a_fatal_exception_out_of_flush_is_named_too():
    sender = Sender(CONF, outage_limit=5)
    sender._producer = _Raising(KafkaException(_denied()))
    sender._topic = "metrics"
    with pytest.raises(KafkaUnavailable, match="Kafka denied User:dashboard WRITE"):
        sender.flush()


def test_any_other_systemerror_is_raised_as_it_is():
    sender = Sender(CONF, outage_limit=5)
    sender._producer = _Raising(SystemError("something else"))
    with pytest.raises(SystemError, match="something else"):
        sender.flush()
