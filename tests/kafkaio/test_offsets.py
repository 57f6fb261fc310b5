"""Reading to the end of a topic on the embedded broker, despite its ListOffsets answer."""

from __future__ import annotations

import pytest
from confluent_kafka import TopicPartition

from kafkaio.clients import KafkaUnavailable, consumer
from kafkaio.offsets import EndOffsets, read_to_end
from kafkaio.sender import Sender
from kafkaio.topics import create_topics

pytestmark = pytest.mark.integration


def produce(cfg, topic: str, n: int, partitions: int) -> None:
    sender = Sender(cfg.kafka_client())
    for i in range(n):
        sender.send(topic, b"v%d" % i, key=b"%d" % i, partition=i % partitions)
    sender.flush()


def test_end_offsets_and_read_to_end_are_exact(kafka_cfg):
    create_topics(kafka_cfg, ["publications"])  # 4 partitions
    topic = kafka_cfg.topic("publications")
    n = 25_003
    produce(kafka_cfg, topic, n, 4)
    probe = EndOffsets(kafka_cfg.kafka_client())
    ends = probe(topic)
    assert ends == {p: len(range(p, n, 4)) for p in range(4)}
    # The plain ListOffsets answer is not trusted; record what it said for the log.
    listed = {p: consumer(kafka_cfg.kafka_client()).get_watermark_offsets(
        TopicPartition(topic, p), timeout=10)[1] for p in range(4)}
    print("ListOffsets said", listed, "true ends", ends)
    records = list(read_to_end(kafka_cfg.kafka_client(), topic))
    assert len(records) == n
    assert sorted(int(m.key()) for m in records) == list(range(n))
    # from given positions: only the rest
    rest = list(read_to_end(kafka_cfg.kafka_client(), topic, start={0: ends[0] - 5}))
    assert len([m for m in rest if m.partition() == 0]) == 5
    probe.close()


def test_empty_topic_reads_nothing(kafka_cfg):
    create_topics(kafka_cfg, ["control"])
    topic = kafka_cfg.topic("control")
    assert EndOffsets(kafka_cfg.kafka_client())(topic) == {0: 0}
    assert list(read_to_end(kafka_cfg.kafka_client(), topic)) == []


def test_missing_topic_is_a_clear_error(kafka_cfg):
    with pytest.raises(KafkaUnavailable, match="does not exist"):
        EndOffsets(kafka_cfg.kafka_client(), timeout=5)("no-such-topic-here")
