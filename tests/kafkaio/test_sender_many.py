"""``Sender.send_many`` on a real broker: every record written once, in order per partition, the
headers on the last one, in and out of a transaction, and a record Kafka refuses reported."""

from __future__ import annotations

import time

import pytest

from kafkaio.errors import KafkaUnavailable
from kafkaio.offsets import read_to_end
from kafkaio.sender import Sender
from kafkaio.topics import create_topics
from kafkaio.transactions import TransactionalSender

pytestmark = pytest.mark.integration

N = 25_000  # three chunks of produce_batch and a bit


def _records(n: int) -> tuple[list[bytes], list[bytes]]:
    return [b"%d" % i for i in range(n)], [b"key-%d" % (i % 7) for i in range(n)]


def _read_back(cfg, topic: str, n: int) -> list:
    """The topic's records once ``n`` are readable: a committed transaction's records become
    visible to a read-committed reader only once the broker has written its markers, which
    it does after the commit returns."""
    deadline = time.monotonic() + 30
    while True:
        read = list(read_to_end(cfg.kafka_client(), topic))
        if len(read) >= n or time.monotonic() > deadline:
            return read
        time.sleep(0.1)


def _check_read_back(cfg, topic: str, values: list[bytes]) -> None:
    read = _read_back(cfg, topic, len(values))
    assert sorted(m.value() for m in read) == sorted(values)  # each once
    per_key: dict[bytes, list[int]] = {}
    for m in read:  # one key, one partition: read back in the order sent
        per_key.setdefault(m.key(), []).append(int(m.value().lstrip(b"c")))
    assert all(seq == sorted(seq) for seq in per_key.values())
    last = next(m for m in read if m.value() == values[-1])
    assert last.headers() == [("marker", b"last")]
    assert all(not m.headers() for m in read if m.value() != values[-1])


def test_every_record_once_in_order_with_the_headers_on_the_last(kafka_cfg):
    create_topics(kafka_cfg, ["matches"])
    topic = kafka_cfg.topic("matches")
    values, keys = _records(N)
    # a local queue smaller than a chunk: send_many waits for room instead of losing records
    sender = Sender(kafka_cfg.kafka_client(), outage_limit=30,
                    **{"queue.buffering.max.messages": 4_000})
    sender.send_many(topic, values, keys, headers=[("marker", b"last")])
    sender.flush()
    assert sender.sent == N and sender.failed == 0
    _check_read_back(kafka_cfg, topic, values)


def test_in_a_transaction_they_are_all_or_nothing(kafka_cfg):
    create_topics(kafka_cfg, ["events"])
    topic = kafka_cfg.topic("events")
    sender = TransactionalSender(kafka_cfg.kafka_client(), f"{topic}-txn", outage_limit=30)
    sender.begin()
    sender.send_many(topic, *_records(N))
    sender.abort()
    values, keys = _records(N)
    values = [b"c" + v for v in values]
    sender.begin()
    sender.send_many(topic, values, keys, headers=[("marker", b"last")])
    sender.commit()
    sender.close()
    _check_read_back(kafka_cfg, topic, values)  # read committed: the aborted ones are not


def test_a_record_kafka_refuses_fails_the_flush(kafka_cfg):
    create_topics(kafka_cfg, ["metrics"])
    topic = kafka_cfg.topic("metrics")
    sender = Sender(kafka_cfg.kafka_client(), outage_limit=30,
                    **{"message.max.bytes": 10_000})
    values, keys = _records(100)
    values[40] = b"x" * 20_000
    sender.send_many(topic, values, keys)
    with pytest.raises(KafkaUnavailable, match="1 of 100 records were not delivered"):
        sender.flush()
