"""The subscription changes read ahead in a thread (``app.subscriptions.feed.Prefetch``):
consecutive batches take exactly their ranges while a producer writes, in two topic partitions (a
broker that stays away: ``tests/faults/test_outage_limit.py``)."""

from __future__ import annotations

import itertools
import threading
import time

import pytest

from app.subscriptions.feed import Prefetch, SubscriptionFeed
from kafkaio.sender import Sender
from kafkaio.topics import create_topics

pytestmark = pytest.mark.integration


def test_batches_take_exactly_what_was_read_ahead_while_records_arrive(kafka_cfg, tmp_path):
    kafka_cfg = kafka_cfg.with_overrides({"topics.subscriptions.partitions": "2"})
    create_topics(kafka_cfg, ["subscriptions"])
    topic = kafka_cfg.topic("subscriptions")
    sender = Sender(kafka_cfg.kafka_client())
    for i in range(500):  # before the app started: the set up to 200, then 50 changes each
        sender.send(topic, b"old%d" % i, key=b"%d" % i, partition=i % 2)
    sender.flush()
    start = {0: 200, 1: 200}
    feed = SubscriptionFeed(kafka_cfg.kafka_client(), topic, str(tmp_path), 30.0)
    ahead = Prefetch(kafka_cfg.kafka_client(), topic, start, 30.0, feed.ends_now)
    done = threading.Event()

    def write() -> None:
        for i in range(3_000):
            sender.send(topic, b"new%d" % i, key=b"%d" % i, partition=i % 2)
            if i % 100 == 99:
                sender.flush()
                time.sleep(0.02)
        sender.flush()
        done.set()

    writer = threading.Thread(target=write)
    got, position, batches = [], dict(start), 0
    try:
        # the first batch has every change written before the start (a restart's first batch)
        assert ahead.ahead() == {0: 250, 1: 250}
        writer.start()
        while not done.is_set() or position != {0: 1_750, 1: 1_750}:
            ends = {p: max(e, position.get(p, 0)) for p, e in ahead.ahead().items()}
            got += [(m.partition(), m.offset(), m.value()) for m in ahead.take(position, ends)]
            position = {**position, **ends}
            batches += 1
            time.sleep(0.05)
    finally:
        if writer.is_alive():
            writer.join()
        ahead.close()
        feed.close()
        sender.close()
    assert sorted((p, o) for p, o, _ in got) == [(p, o) for p in range(2)
                                                 for o in range(200, 1_750)]
    assert sum(v.startswith(b"old") for _, _, v in got) == 100
    assert batches > 3  # the records came over several batches, not at once


def test_a_slow_answer_spaces_the_looks_out_and_changes_still_arrive(kafka_cfg, tmp_path):
    """When asking the end offsets takes long (the local broker after a burst: 80-90 ms),
    the thread asks less often instead of keeping the broker busy, and still reads what is
    written."""
    create_topics(kafka_cfg, ["subscriptions"])
    topic = kafka_cfg.topic("subscriptions")
    feed = SubscriptionFeed(kafka_cfg.kafka_client(), topic, str(tmp_path), 30.0)
    asked: list[float] = []

    def slow_ends() -> dict[int, int]:
        asked.append(time.monotonic())
        time.sleep(0.1)
        return feed.ends_now()

    ahead = Prefetch(kafka_cfg.kafka_client(), topic, {0: 0}, 30.0, slow_ends)
    sender = Sender(kafka_cfg.kafka_client())
    try:
        assert ahead.ahead() == {0: 0}
        time.sleep(2.0)
        for i in range(5):
            sender.send(topic, b"v%d" % i, key=b"%d" % i)
        sender.flush()
        deadline = time.monotonic() + 10
        while ahead.ahead().get(0, 0) < 5 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert [m.offset() for m in ahead.take({0: 0}, {0: 5})] == list(range(5))
        # enough looks to judge their spacing, however slow the broker answers on a busy machine
        deadline = time.monotonic() + 15
        while len(asked) < 4 and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        ahead.close()
        feed.close()
        sender.close()
    gaps = [b - a for a, b in itertools.pairwise(asked)]
    # at least 5 x 100 ms apart (a look every 50 ms plus its ask would be 150 ms)
    assert len(gaps) >= 3 and min(gaps) >= 0.45, gaps
