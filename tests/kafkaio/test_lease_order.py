"""The lease's rules as the log's order applies them (``kafkaio.lease.LeaseState``), and a
claim's append that the broker takes late: pure."""

from __future__ import annotations

import pytest

from kafkaio.errors import KafkaUnavailable
from kafkaio.lease import CLAIM, HEARTBEAT, LeaseLog, LeaseRecord, LeaseState


def rec(kind: str, term: int, holder: str, app: str = "geops") -> LeaseRecord:
    return LeaseRecord(app, term, kind, holder)


def test_the_first_claim_of_a_term_wins_and_every_reader_agrees():
    log = [rec(CLAIM, 1, "a"), rec(HEARTBEAT, 1, "a"), rec(CLAIM, 2, "b"),
           rec(CLAIM, 2, "c"), rec(CLAIM, 1, "d")]
    states = [LeaseState("geops", fresh=0.0) for _ in range(3)]
    for state in states:
        for i, r in enumerate(log):
            state.apply(r, float(i))
    assert {(s.term, s.holder) for s in states} == {(2, "b")}
    assert states[0].fresh == 2.0  # confirmed by b's claim, not by c's or d's


def test_only_the_holders_heartbeat_of_the_current_term_keeps_it_fresh():
    state = LeaseState("geops", fresh=0.0)
    state.apply(rec(CLAIM, 3, "a"), 1.0)
    state.apply(rec(HEARTBEAT, 2, "old"), 5.0)   # a replaced holder that came back
    state.apply(rec(HEARTBEAT, 3, "b"), 6.0)     # not the holder
    state.apply(rec(CLAIM, 3, "a", app="other"), 7.0)  # another app's record
    assert state.fresh == 1.0 and state.lapsed(3.5, 2.0) and not state.lapsed(2.5, 2.0)
    state.apply(rec(HEARTBEAT, 3, "a"), 8.0)
    assert state.fresh == 8.0 and not state.lapsed(9.0, 2.0)


def test_records_round_trip_and_foreign_values_are_skipped():
    r = rec(CLAIM, 4, "host:1:abc")
    assert LeaseRecord.decode(r.encode()) == r
    assert LeaseRecord.decode(b"not json") is None
    assert LeaseRecord.decode(b'{"app":"x","term":1,"kind":"vote","holder":"h"}') is None
    assert LeaseRecord.decode(None) is None


def test_a_heartbeat_whose_claim_was_compacted_away_takes_the_lease():
    """The compacted topic keeps the newest record per app of a closed segment: a reader may
    find the holder's heartbeat without its claim, and must not claim over a live holder."""
    state = LeaseState("geops", fresh=0.0)
    state.apply(rec(HEARTBEAT, 5, "a"), 1.0)
    state.apply(rec(CLAIM, 5, "b"), 2.0)   # a late claim of the same term loses
    state.apply(rec(HEARTBEAT, 5, "a"), 3.0)
    assert (state.term, state.holder, state.fresh) == (5, "a", 3.0)


class SlowBroker:
    """A producer whose record the broker takes only at the third flush."""

    def __init__(self) -> None:
        self.flushes, self.on_delivery = 0, None

    def produce(self, topic, value, key, partition, on_delivery) -> None:
        self.on_delivery = on_delivery

    def flush(self, timeout: float) -> int:
        self.flushes += 1
        if self.flushes < 3:
            return 1
        self.on_delivery(None, None)
        return 0


def test_a_claim_the_broker_takes_late_is_waited_for_not_given_up():
    # a standby that gave up its claim after the timeout would end while the claim, still
    # queued, could land later and stop the active app: nobody would answer
    lease_log = LeaseLog.__new__(LeaseLog)
    lease_log.topic, lease_log.holder, lease_log.state = "t", "me", LeaseState("geops")
    lease_log._producer = SlowBroker()
    with pytest.raises(KafkaUnavailable, match="did not take a claim"):
        lease_log.append(CLAIM, 2, timeout=0.01)
    lease_log._producer = SlowBroker()
    lease_log.append(CLAIM, 2, timeout=0.01, settle=True)
    assert lease_log._producer.flushes == 3
