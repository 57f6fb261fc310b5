"""The dashboard's feed on Apache Kafka, with records written by hand (no Spark).

Read back at start: records of the history in periods, an older PartitionLayout found further
back, statuses of other apps left out; then records that arrive while it follows, publications
as points; and a banner, not a crash, while Kafka cannot be reached.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import shapely

from config import TOPICS, Config
from dashboard.feed import LAYOUT_CHUNK, Feed
from dashboard.state import View
from kafkaio.clients import producer
from kafkaio.topics import create_topics
from schemas import codec
from tests.dashboard.test_state import command, layout, load, status, summary

pytestmark = pytest.mark.integration

APP = "geops"  # the configured default app id


class Writer:
    """Produces geops records with a chosen timestamp."""

    def __init__(self, cfg: Config):
        self.cfg = cfg
        self.p = producer(cfg.kafka_client())

    def send(self, logical: str, name: str, record: dict, ago_s: float = 0.0,
             key: str = APP) -> None:
        self.p.produce(self.cfg.topic(logical), codec().encode(name, record), key=key.encode(),
                       timestamp=int((time.time() - ago_s) * 1000))

    def flush(self) -> None:
        assert self.p.flush(10) == 0


@contextmanager
def following(cfg: Config, view: View) -> Iterator[list[int]]:
    """Run a Feed in a thread for the block; yields the list of publish times (one per call)."""
    published: list[int] = []
    feed = Feed(cfg, view, lambda v: published.append(v.now_ms))
    stop = threading.Event()
    thread = threading.Thread(target=feed.run, args=(stop,), daemon=True)
    thread.start()
    try:
        yield published
    finally:
        stop.set()
        thread.join(20)
        assert not thread.is_alive(), "the feed did not stop"


def wait_for(check, timeout: float = 20.0):
    deadline = time.monotonic() + timeout
    while not (got := check()):
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)
    return got


def with_app(rec: tuple[str, dict]) -> tuple[str, dict]:
    name, r = rec
    return name, {**r, "app_id": APP}


def test_reads_back_then_follows(kafka_cfg):
    create_topics(kafka_cfg)
    w = Writer(kafka_cfg)
    w.send("metrics", *with_app(layout(time=1)), ago_s=120)          # before the history
    w.send("control", "RebalanceCommand", command(1, [0, 0, 1, 1], app=APP), ago_s=100)
    for i in range(5):                                                # within the history
        w.send("metrics", *with_app(summary(i, 1, records=100)), ago_s=6 - i)
        w.send("metrics", *with_app(load(0, 0, 5, epoch=1)), ago_s=6 - i)
    w.send("status", "DistributorStatus", status("none", period=7), ago_s=2)
    w.send("status", "DistributorStatus", status("rebalance", period=99), ago_s=1,
           key="another-app")
    w.flush()
    # a history long enough that the batches written 2-6 s ago are still in it when a loaded
    # machine gets to read them back; the layout and command (100-120 s ago) are before it
    view = View(APP, period_s=0.5, history_s=60.0, window_s=2.0)
    with following(kafka_cfg, view) as published:
        wait_for(lambda: len(published) >= 2)
        # read back: the five batches in the series, the old layout and command as state
        assert sum(r.batches for r in view.rows) == 5
        assert sorted(r.output_rate for r in view.rows if r.batches) == [200.0] * 5  # 100/0.5 s
        assert view.layout is not None and view.layout["partitions"] == 4
        assert view.epoch == 1 and view.status["period"] == 7  # the other app's is left out
        assert [c["owners"] for c in view.map()["partitions"]] == [[0], [0], [1], [1]]
        assert view.problem is None
        # followed: records that arrive now, publications as points
        w.send("metrics", *with_app(summary(5, 2, records=40)))
        w.send("metrics", *with_app(load(3, 1, 50, epoch=2)))
        w.send("control", "RebalanceCommand", command(2, [0, 1, 1, 0], app=APP))
        for i in range(3):
            w.send("publications", "Publication", {
                "id": i, "geometry": shapely.to_wkb(shapely.Point(0.5 + i / 2, 1.5)),
                "event_time": int(time.time() * 1000)}, key=str(i))
        for i in range(7):
            w.send("events", "GeofenceEvent", {
                "object_id": f"o{i}", "subscription_id": i, "kind": "ENTER", "reason": None,
                "publication_id": i, "event_time": 0, "match_time": 0, "batch_id": 0},
                key=f"o{i}")
        w.flush()
        m = wait_for(lambda: (m := view.map())["epoch"] == 2 and m["publications"] == 3
                     and m)
        assert sorted(m["points"]) == [[0.5, 1.5], [1.0, 1.5], [1.5, 1.5]]
        assert [p["owners"] for p in m["partitions"]] == [[0], [1], [1], [0]]
        assert m["partitions"][3]["load_ms_per_s"] == 25.0  # 50 ms over a 2 s window
        assert wait_for(lambda: any(r.input_rate for r in view.rows))
        # events: counted per period, none before the dashboard started following
        wait_for(lambda: sum(r.events or 0 for r in view.rows) == 7)
        assert view.series()["events_per_s"][0] is None  # read back: not counted
        assert [r["epoch"] for r in view.rebalances()] == [1, 2]


def test_past_input_rate_and_lag_come_from_the_publications_topic(kafka_cfg):
    create_topics(kafka_cfg.with_overrides({"topics.publications.partitions": "1"}))
    w = Writer(kafka_cfg)
    w.send("metrics", *with_app(summary(0, 0, records=10, ends={"0": 10})))
    w.flush()
    written = 0
    for burst in (300, 300):  # written a second apart: the broker stamps when it appends
        time.sleep(1.1)
        for i in range(burst):
            w.send("publications", "Publication", {
                "id": i, "geometry": shapely.to_wkb(shapely.Point(0, 0)), "event_time": 0},
                key=str(i))
        w.flush()
        written += burst
    time.sleep(1.1)
    w.send("metrics", *with_app(summary(1, 0, records=10, ends={"0": 20})))
    w.flush()
    view = View(APP, period_s=0.5, history_s=30.0)
    with following(kafka_cfg, view) as published:
        wait_for(lambda: published)
        past = [r for r in view.rows if r.time_ms <= published[0]]
        rates = [r.input_rate for r in past if r.input_rate is not None]
        lags = [r.lag for r in past if r.lag is not None]
        # back from before the dashboard ran: each burst of 300 in the period it was written
        # in (or the two it straddled on a slow machine), none between them, before the first
        # (end 0) and after the second (end 600)
        bursts, run = [], 0.0
        for r in past:
            if r.input_rate:
                run += r.input_rate * 0.5
            elif run:
                bursts, run = [*bursts, run], 0.0
        assert [*bursts, run][:2] == [300, 300] and max(rates) <= 300 / 0.5
        assert sum(r * 0.5 for r in rates) == written
        assert lags[0] == 0 and lags[-1] == written - 20  # the newest batch ended at 20


def test_the_newest_layout_is_found_further_back_chunk_by_chunk(kafka_cfg):
    create_topics(kafka_cfg)
    w = Writer(kafka_cfg)
    w.send("metrics", *with_app(layout(partitions=2, time=1)))
    w.send("metrics", *with_app(layout(partitions=4, time=2)))
    w.send("metrics", *layout(partitions=9, time=3, app="another-app"))
    for i in range(2 * LAYOUT_CHUNK + 100):  # three chunks to read back through
        w.send("metrics", *with_app(load(i % 4, 0, 1)))
    w.flush()
    end = 3 + 2 * LAYOUT_CHUNK + 100
    feed = Feed(kafka_cfg, View(APP), lambda v: None)
    ((_, kind, name, found),) = feed._older_layout({0: end})
    assert (kind, name, found["partitions"], found["time"]) == ("metrics", "PartitionLayout",
                                                               4, 2)
    ((_, _, _, first),) = feed._older_layout({0: 1})  # only the first record before
    assert (first["partitions"], first["time"]) == (2, 1)
    assert feed._older_layout({0: 0}) == []


def test_without_the_events_topic_there_is_no_events_series(kafka_cfg):
    create_topics(kafka_cfg, [t for t in TOPICS if t != "events"])
    w = Writer(kafka_cfg)
    w.send("metrics", *with_app(summary(0, 0, records=10)))
    w.flush()
    view = View(APP, period_s=0.5)
    with following(kafka_cfg, view) as published:
        wait_for(lambda: len(published) >= 3)
        assert view.problem is None and view.rows
        assert all(r.events is None for r in view.rows)
        assert view.latest()["events_per_s"] is None


def test_unreachable_kafka_is_a_problem_retried(kafka_cfg):
    cfg = kafka_cfg.with_overrides({"kafka.bootstrap_servers": "127.0.0.1:1"})
    view = View(APP, period_s=0.5)
    with following(cfg, view) as published:
        wait_for(lambda: published)
        assert "cannot reach Kafka at 127.0.0.1:1" in view.problem
        assert view.rows == type(view.rows)()  # no made-up figures while it cannot read


def test_a_missing_topic_is_named(kafka_cfg):
    view = View(APP, period_s=0.5)
    with following(kafka_cfg, view) as published:  # the test's topics were never created
        wait_for(lambda: published)
        assert "does not exist" in view.problem and "geops topics create" in view.problem
        create_topics(kafka_cfg)
        wait_for(lambda: view.problem is None, 30)
