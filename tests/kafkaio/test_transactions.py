"""Transactional output on a real broker: all or nothing for read_committed readers, the marker
read back, and a newer producer of the same transactional id fencing the older one."""

from __future__ import annotations

import pytest

from kafkaio.offsets import read_to_end
from kafkaio.topics import create_topics
from kafkaio.transactions import Fenced, Marker, TransactionalSender, transactional_id

pytestmark = pytest.mark.integration


def values(cfg, topic: str) -> list[bytes]:
    return [m.value() for m in read_to_end(cfg.kafka_client(), topic)]


def test_identity_depends_on_app_and_topics():
    a = transactional_id("geops", "t-publications", "t-matches", "t-metrics")
    assert a == transactional_id("geops", "t-publications", "t-matches", "t-metrics")
    assert a != transactional_id("other", "t-publications", "t-matches", "t-metrics")
    assert a != transactional_id("geops", "u-publications", "u-matches", "u-metrics")
    assert transactional_id("my app/1", "x").startswith("geops-my_app_1-")


def test_commit_abort_marker_and_fencing(kafka_cfg):
    create_topics(kafka_cfg, ["publications", "matches"])
    pubs, matches = kafka_cfg.topic("publications"), kafka_cfg.topic("matches")
    conf = kafka_cfg.kafka_client()
    txn = transactional_id("geops", pubs, matches)
    first = TransactionalSender(conf, txn, outage_limit=30)
    assert first.last_marker(pubs, [0, 1, 2, 3]) is None

    first.begin()
    first.send(matches, b"aborted")
    first.flush()  # in the log, not committed
    first.abort()
    first.begin()
    first.send(matches, b"committed-0")
    first.commit(pubs, {0: 5, 1: 7}, Marker("q1", 0))
    assert values(kafka_cfg, matches) == [b"committed-0"]
    assert first.last_marker(pubs, [0, 1, 2, 3]) == Marker("q1", 0)

    first.begin()
    first.send(matches, b"left-open")
    first.flush()
    second = TransactionalSender(conf, txn, outage_limit=30)  # aborts what the first left open
    assert second.last_marker(pubs, [0, 1, 2, 3]) == Marker("q1", 0)
    with pytest.raises(Fenced, match=txn):
        first.commit(pubs, {0: 9}, Marker("q1", 1))
    second.begin()
    second.send(matches, b"committed-1")
    second.commit(pubs, {0: 9, 1: 9}, Marker("q1", 1))
    assert values(kafka_cfg, matches) == [b"committed-0", b"committed-1"]
    assert second.last_marker(pubs, [0, 1, 2, 3]) == Marker("q1", 1)
    second.close()
