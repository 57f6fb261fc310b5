"""End offsets and reading exact offset ranges on Apache Kafka, also while a producer writes."""

from __future__ import annotations

import itertools
import threading
import time

import pytest
from confluent_kafka import TopicPartition

from kafkaio.clients import admin, consumer
from kafkaio.errors import KafkaUnavailable
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


def test_end_offsets_while_a_producer_writes_fast(kafka_cfg):
    """Planning must not wait for an end-of-partition event, which a busy partition may never
    send: with a producer writing ~20,000 records/s, every call answers (the EOF-waiting probe
    timed out on every call after a few seconds), the ends only grow and are never past what
    was written, and once the producer stops they are exact."""
    create_topics(kafka_cfg, ["publications"])
    topic = kafka_cfg.topic("publications")
    stop = threading.Event()
    written = [0]

    def write() -> None:
        sender = Sender(kafka_cfg.kafka_client(), rate=20_000)  # a steady flow, no gaps
        i = 0
        while not stop.is_set():
            sender.send(topic, b"x" * 200, key=b"%d" % i, partition=i % 4)
            i += 1
        sender.flush()
        written[0] = i

    thread = threading.Thread(target=write, daemon=True)
    thread.start()
    probe = EndOffsets(kafka_cfg.kafka_client(), timeout=5)
    seen: list[dict[int, int]] = []
    try:
        t_end = time.monotonic() + 15
        while time.monotonic() < t_end:
            seen.append(probe(topic))
            time.sleep(0.2)
    finally:
        stop.set()
        thread.join(30)
    probe.close()
    patient = EndOffsets(kafka_cfg.kafka_client(), timeout=30)
    final = patient(topic)
    patient.close()
    exact = {p: len(range(p, written[0], 4)) for p in range(4)}
    assert final == exact
    assert len(seen) >= 20
    for before, after in itertools.pairwise(seen):
        assert all(after[p] >= before[p] for p in range(4))
    assert all(s[p] <= exact[p] for s in seen for p in range(4))
    assert seen[-1] != seen[0]  # it followed the stream


def test_read_between_with_one_consumer_reads_each_range_exactly(kafka_cfg):
    """The app reads each batch's subscription changes with the same consumer: consecutive
    ranges (also going back, and one while records are being written) come out exactly, and
    nothing fetched for one range leaks into the next."""
    from kafkaio.offsets import RangeReader, read_between

    create_topics(kafka_cfg, ["publications"])  # 4 partitions
    topic = kafka_cfg.topic("publications")
    produce(kafka_cfg, topic, 4_000, 4)
    conf = kafka_cfg.kafka_client()
    reader = RangeReader(conf)
    try:
        ranges = [({}, {p: 300 for p in range(4)}),
                  ({p: 300 for p in range(4)}, {0: 301, 1: 700, 2: 300, 3: 1_000}),
                  ({0: 10, 1: 20}, {0: 15, 1: 40, 2: 0, 3: 0}),
                  ({p: 900 for p in range(4)}, {p: 1_000 for p in range(4)})]
        for start, ends in ranges:
            got = sorted((m.partition(), m.offset()) for m in
                         read_between(conf, topic, start, ends, 30.0, reuse=reader))
            assert got == [(p, o) for p in range(4) for o in range(start.get(p, 0), ends[p])]
        writer = threading.Thread(target=produce, args=(kafka_cfg, topic, 2_000, 4))
        writer.start()
        got = [(m.partition(), m.offset()) for m in
               read_between(conf, topic, {p: 1_000 for p in range(4)},
                            {p: 1_100 for p in range(4)}, 30.0, reuse=reader)]
        writer.join()
        assert sorted(got) == [(p, o) for p in range(4) for o in range(1_000, 1_100)]
    finally:
        reader.close()


def test_an_exact_reader_reads_ranges_and_names_a_range_the_log_no_longer_holds(kafka_cfg):
    """The app's one-stage batches read Spark's planned ranges with an exact reader: whole
    ranges come out as they are, one reused consumer after another; a range past the log's end
    (the topic came back shorter) and a start below the log's start are DataLoss, never a
    silent skip or a read from elsewhere."""
    from kafkaio.errors import DataLoss
    from kafkaio.offsets import RangeReader, read_between

    create_topics(kafka_cfg, ["publications"])  # 4 partitions
    topic = kafka_cfg.topic("publications")
    produce(kafka_cfg, topic, 400, 4)
    conf = kafka_cfg.kafka_client()
    reader = RangeReader(conf, exact=True)
    try:
        for start, ends in [({p: 0 for p in range(4)}, {p: 60 for p in range(4)}),
                            ({p: 60 for p in range(4)}, {p: 100 for p in range(4)})]:
            got = sorted((m.partition(), m.offset()) for m in
                         read_between(conf, topic, start, ends, 30.0, reuse=reader))
            assert got == [(p, o) for p in range(4) for o in range(start[p], ends[p])]
        with pytest.raises(DataLoss, match=rf"{topic}\[2\] now ends at 100, below offset 150"):
            list(read_between(conf, topic, {2: 90}, {2: 150}, 30.0, reuse=reader))
        # records below offset 50 of partition 1 deleted, as retention would
        cut, client = TopicPartition(topic, 1, 50), admin(conf)  # kept until it answers
        next(iter(client.delete_records([cut]).values())).result(timeout=30)
        with pytest.raises(DataLoss, match=rf"{topic}\[1\] no longer holds offset 10"):
            list(read_between(conf, topic, {1: 10}, {1: 60}, 30.0, reuse=reader))
        # what is still there reads as before
        assert len(list(read_between(conf, topic, {1: 50}, {1: 60}, 30.0, reuse=reader))) == 10
    finally:
        reader.close()
