"""Transactional output on a real broker: all or nothing for read_committed readers, the
newest marker read back, and a newer producer of the same transactional id fencing the older
one."""

from __future__ import annotations

import pytest

from kafkaio import transactions
from kafkaio.errors import Fenced
from kafkaio.offsets import read_to_end
from kafkaio.topics import create_topics
from kafkaio.transactions import Marker, TransactionalSender, last_marker, transactional_id

pytestmark = pytest.mark.integration


def values(cfg, topic: str) -> list[bytes]:
    return [m.value() for m in read_to_end(cfg.kafka_client(), topic)]


def test_identity_depends_on_app_and_topics():
    a = transactional_id("geops", "t-publications", "t-matches", "t-metrics")
    assert a == transactional_id("geops", "t-publications", "t-matches", "t-metrics")
    assert a != transactional_id("other", "t-publications", "t-matches", "t-metrics")
    assert a != transactional_id("geops", "u-publications", "u-matches", "u-metrics")
    assert transactional_id("my app/1", "x").startswith("geops-my_app_1-")


def test_commit_abort_marker_and_fencing(kafka_cfg, monkeypatch):
    monkeypatch.setattr(transactions, "SCAN_WINDOW", 3)  # the scan takes several steps back
    create_topics(kafka_cfg, ["matches", "metrics"])
    matches, metrics = kafka_cfg.topic("matches"), kafka_cfg.topic("metrics")
    conf = kafka_cfg.kafka_client()
    txn = transactional_id("geops", matches, metrics)
    first = TransactionalSender(conf, txn, outage_limit=30)
    assert last_marker(conf, metrics, txn) is None

    first.begin()
    first.send(matches, b"aborted")
    first.send(metrics, b"summary", headers=Marker(txn, "q1", 0).header())
    first.flush()  # in the log, not committed
    first.abort()
    first.begin()
    first.send(matches, b"committed-0")
    first.send(metrics, b"summary-0", headers=Marker(txn, "q1", 0).header())
    first.commit()
    other = TransactionalSender(conf, transactional_id("other", matches, metrics), 30)
    for i in range(7):  # another app's markers after ours
        other.begin()
        other.send(metrics, b"other", headers=Marker(other.txn_id, "q9", 50 + i).header())
        other.commit()
    other.close()
    assert values(kafka_cfg, matches) == [b"committed-0"]
    assert last_marker(conf, metrics, txn) == Marker(txn, "q1", 0)

    first.begin()
    first.send(matches, b"left-open")
    first.send(metrics, b"summary-1", headers=Marker(txn, "q1", 1).header())
    first.flush()
    second = TransactionalSender(conf, txn, outage_limit=30)  # aborts what the first left open
    assert last_marker(conf, metrics, txn) == Marker(txn, "q1", 0)
    with pytest.raises(Fenced, match=txn):
        first.commit()
    second.begin()
    second.send(matches, b"committed-1")
    second.send(metrics, b"summary-1", headers=Marker(txn, "q1", 1).header())
    second.commit()
    assert sorted(values(kafka_cfg, matches)) == [b"committed-0", b"committed-1"]
    assert last_marker(conf, metrics, txn) == Marker(txn, "q1", 1)
    second.close()
