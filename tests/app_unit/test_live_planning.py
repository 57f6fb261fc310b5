"""Planning micro-batches on a live topic: never fatal on a slow broker, new partitions read
from offset 0, a topic that came back shorter is data loss (or read anew with ``continue``).

The broker is replaced by a scripted end-offset probe: the embedded broker cannot add a
partition (CreatePartitions is UNSUPPORTED_FEATURE) nor be made to answer late on cue. The
real probe against a real broker with a concurrent producer is tested in
tests/kafkaio/test_offsets.py, the whole app on a live stream in tests/app/test_app_live.py.
"""

from __future__ import annotations

import itertools

import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

from app.source import KafkaRange, KafkaStreamReader, ranges
from kafkaio.clients import KafkaUnavailable
from kafkaio.retry import DataLoss, KafkaOutage, Outage, with_retry


class ScriptedProbe:
    """Answers each call with the next item: an end-offset map, or an exception to raise."""

    def __init__(self, *answers):
        self.answers = list(answers)

    def __call__(self, topic):
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def spans(rs: list[KafkaRange]) -> list[tuple[int, int, int]]:
    return [(r.partition, r.start, r.end) for r in rs]


def reader(*answers, on_data_loss="fail", limit=300.0, clock=None) -> KafkaStreamReader:
    r = KafkaStreamReader({"topic": "pubs", "kafka": "{}", "onDataLoss": on_data_loss,
                           "outageLimit": str(limit)})
    r._probe = ScriptedProbe(*answers)
    clock = clock or Clock()
    r._outage = Outage("b:9092", limit, sleep=clock.sleep, clock=clock)
    return r


def test_a_partition_added_mid_stream_is_read_from_offset_0():
    r = reader({0: 10, 1: 12}, {0: 15, 1: 12, 2: 7})
    assert r.latestOffset({"0": 0, "1": 0}, ReadAllAvailable()) == {"0": 10, "1": 12}
    end = r.latestOffset({"0": 10, "1": 12}, ReadAllAvailable())
    assert end == {"0": 15, "1": 12, "2": 7}
    assert spans(ranges("pubs", {"0": 10, "1": 12}, end)) == [(0, 10, 15), (2, 0, 7)]


def test_a_broker_that_does_not_answer_plans_an_empty_batch_until_the_outage_limit():
    clock = Clock()
    down = KafkaUnavailable("timed out")
    r = reader(down, down, {0: 20}, down, down, clock=clock, limit=60)
    start = {"0": 10}
    assert r.latestOffset(start, ReadAllAvailable()) == start  # no new data: no batch
    clock.now = 30
    assert r.latestOffset(start, ReadAllAvailable()) == start
    clock.now = 40
    assert r.latestOffset(start, ReadAllAvailable()) == {"0": 20}  # it answers again: resumes
    clock.now = 50
    assert r.latestOffset({"0": 20}, ReadAllAvailable()) == {"0": 20}
    clock.now = 111  # 61 s since the new outage began
    with pytest.raises(KafkaOutage, match=r"b:9092 did not answer for 61 s"):
        r.latestOffset({"0": 20}, ReadAllAvailable())


def test_a_topic_that_came_back_shorter_is_data_loss_by_default():
    r = reader({0: 500, 1: 900})
    with pytest.raises(DataLoss, match=r"pubs\[0\] ends at 500 but the query has read to 4500"):
        r.latestOffset({"0": 4500, "1": 900}, ReadAllAvailable())


def test_with_continue_a_reset_partition_is_read_anew_from_offset_0():
    r = reader({0: 500, 1: 950}, on_data_loss="continue")
    end = r.latestOffset({"0": 4500, "1": 900}, ReadAllAvailable())
    assert end == {"0": 500, "1": 950}
    assert spans(ranges("pubs", {"0": 4500, "1": 900}, end)) == [(0, 0, 500), (1, 900, 950)]
    # with a record limit the reset partition's backlog counts from 0
    r = reader({0: 500, 1: 950}, on_data_loss="continue")
    end = r.latestOffset({"0": 4500, "1": 900}, ReadMaxRows(110))
    assert sum(e.end - e.start for e in ranges("pubs", {"0": 4500, "1": 900}, end)) == 110


def test_with_retry_backs_off_then_gives_up_with_one_line():
    clock = Clock()
    outage = Outage("b:9092", 10, sleep=clock.sleep, clock=clock)
    calls = []

    def flaky():
        calls.append(clock.now)
        if len(calls) < 4:
            raise KafkaUnavailable("no answer")
        return "ok"

    assert with_retry(flaky, outage, "reading x") == "ok"
    assert [round(b - a, 2) for a, b in itertools.pairwise(calls)] == [0.1, 0.2, 0.4]
    assert outage.since is None  # reset by the success

    def dead():
        raise KafkaUnavailable("no answer")

    with pytest.raises(KafkaOutage) as info:
        with_retry(dead, outage, "reading x")
    assert "\n" not in str(info.value) and "outage limit of 10 s" in str(info.value)
    assert clock.now - calls[-1] == pytest.approx(10, abs=0.01)
