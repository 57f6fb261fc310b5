"""Reading to the end of a topic on the embedded broker, despite its ListOffsets answer."""

from __future__ import annotations

import itertools
import threading
import time

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
    # Exact once the fetch answered (a loaded machine may take longer than a planning call
    # waits; such a call keeps offsets known to exist, which the loop above checks).
    patient = EndOffsets(kafka_cfg.kafka_client(), timeout=30, answer_wait=30)
    final = patient(topic)
    assert patient.answered == {0, 1, 2, 3}
    patient.close()
    exact = {p: len(range(p, written[0], 4)) for p in range(4)}
    assert final == exact
    assert len(seen) >= 20
    for before, after in itertools.pairwise(seen):
        assert all(after[p] >= before[p] for p in range(4))
    assert all(s[p] <= exact[p] for s in seen for p in range(4))
    assert seen[-1] != seen[0]  # it followed the stream


def test_list_offsets_only_checks_partitions_whose_fetch_answers_stand_still(kafka_cfg):
    """ListOffsets waits behind the parked fetch (~200 ms on the embedded broker while producers
    write): while the fetch answers move every partition's end, calls do not ask it; once the
    producer stops, each call of a still partition past RELIST_EVERY asks it again (a paused
    broker would leave the cache standing: that check finds it)."""
    from kafkaio.offsets import RELIST_EVERY

    create_topics(kafka_cfg, ["publications"])
    topic = kafka_cfg.topic("publications")
    stop = threading.Event()

    def write() -> None:
        sender = Sender(kafka_cfg.kafka_client(), rate=4_000)
        i = 0
        while not stop.is_set():
            sender.send(topic, b"x" * 200, key=b"%d" % i, partition=i % 4)
            i += 1
        sender.flush()

    thread = threading.Thread(target=write, daemon=True)
    thread.start()
    probe = EndOffsets(kafka_cfg.kafka_client(), timeout=5)
    asked: list[list[int]] = []
    listed = probe.listed
    probe.listed = lambda t, parts: (asked.append(list(parts)), listed(t, parts))[1]
    try:
        probe(topic)  # the first call asks for every partition
        time.sleep(0.5)
        asked.clear()
        for _ in range(20):  # 6 s of a stream that moves every partition's end
            probe(topic)
            time.sleep(0.3)
        moving = [a for a in asked if a]
    finally:
        stop.set()
        thread.join(30)
    time.sleep(0.5)
    asked.clear()
    for _ in range(8):  # 2.4 s with nothing written
        probe(topic)
        time.sleep(0.3)
    probe.close()
    still = [a for a in asked if a]
    # (a partition whose end stood still for a second on a loaded machine: checked once)
    assert len(moving) <= 1, moving  # checking every second: 5 or 6
    assert len(still) >= 2 and all(sorted(a) == [0, 1, 2, 3] for a in still), still
    assert RELIST_EVERY <= 1.0  # the check comes within about a second of the end standing


def test_reads_deep_in_a_long_partition_are_answered(kafka_cfg):
    """The embedded broker gives up finding records when a fetch's wait runs out and answers
    empty; deep in a long partition that took longer than the range reader's 5 ms wait, so
    every fetch came back empty and the app's reads stalled until the outage limit (a 30-minute
    soak stopped at ~280,000 records per partition). What the broker scans is record batches:
    written in batches of 16, as a live publisher's small batches are, 300,000 records gave
    the old reader nothing within 15 s. A stalled read now asks again with a longer wait."""
    from app.source import KafkaRange, ReadPolicy, iter_range
    from kafkaio.offsets import read_between

    create_topics(kafka_cfg, ["control"])  # one partition
    topic = kafka_cfg.topic("control")
    sender = Sender(kafka_cfg.kafka_client(), **{"batch.num.messages": 16, "linger.ms": 1000})
    body = b"x" * 200
    for i in range(300_000):
        sender.send(topic, body, key=b"%d" % i, partition=0)
    sender.flush()
    conf = kafka_cfg.kafka_client()
    started = time.monotonic()
    got = [o for _, o, *_ in iter_range(conf, KafkaRange(topic, 0, 150_000, 151_000),
                                        ReadPolicy(outage_limit=60.0))]
    took = time.monotonic() - started
    assert got == list(range(150_000, 151_000))
    started = time.monotonic()
    between = [m.offset() for m in read_between(conf, topic, {0: 200_000}, {0: 201_000}, 60.0)]
    assert between == list(range(200_000, 201_000))
    print(f"\nread 1,000 records at 150,000 in {took:.2f} s, at 200,000 "
          f"(read_between) in {time.monotonic() - started:.2f} s")


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
        # a longer fetch wait, once needed, stays with the reader for the next ranges
        reader.escalate()
        kept = reader.consumer
        for start, ends in ranges[:2]:
            got = sorted((m.partition(), m.offset()) for m in
                         read_between(conf, topic, start, ends, 30.0, reuse=reader))
            assert got == [(p, o) for p in range(4) for o in range(start.get(p, 0), ends[p])]
        assert reader.level == 1 and reader.consumer is kept
    finally:
        reader.close()
