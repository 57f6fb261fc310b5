"""The outage clock of ``kafkaio.retry.Outage`` (pure: a fake clock, no sleeping)."""

from __future__ import annotations

import pytest

from kafkaio.errors import KafkaOutage
from kafkaio.retry import Outage


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_an_outage_counts_from_the_first_failure_and_gives_up_at_the_limit():
    clock = Clock()
    outage = Outage("h:9092", limit=10.0, sleep=lambda s: None, clock=clock)
    outage.failed("reading")
    clock.now += 9.0
    outage.failed("reading")
    clock.now += 1.0
    with pytest.raises(KafkaOutage, match=r"did not answer for 10 s \(reading\)"):
        outage.failed("reading")


def test_an_outage_counts_from_the_last_answer_when_the_caller_knows_it():
    clock = Clock()
    outage = Outage("h:9092", limit=10.0, sleep=lambda s: None, clock=clock)
    # Kafka last answered 12 s before the first failure seen here: past the limit at once
    with pytest.raises(KafkaOutage, match="did not answer for 12 s"):
        outage.failed("the query", silent_since=clock.now - 12.0)
    # an answer in the future of this clock is no earlier than the failure itself
    later = Outage("h:9092", limit=10.0, sleep=lambda s: None, clock=clock)
    later.failed("the query", silent_since=clock.now + 5.0)
    assert later.down_for() == 0.0


def test_an_answer_ends_the_outage():
    clock = Clock()
    outage = Outage("h:9092", limit=10.0, sleep=lambda s: None, clock=clock)
    outage.failed("reading", silent_since=clock.now - 8.0)
    outage.ok()
    clock.now += 5.0
    outage.failed("reading", silent_since=clock.now - 1.0)
    assert outage.down_for() == 1.0
