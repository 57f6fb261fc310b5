"""Every subscription in one task: the real-time path's static side, kept current.

It is built from the whole subscriptions topic, read up to its end when the task starts, by the
rules of the micro-batch app's start-up scan (``app.subscriptions.scan.read_change``: the last
record of an id wins, a tombstone deletes, a distance fence is matched by its shape); then the
records that arrive are applied as they come (``refresh``, called between polls of the
publications), so a change is in force within one poll of its arrival.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from confluent_kafka import TopicPartition

from app.subscriptions.scan import DeadRecord, read_change
from geops.model import DetectKind, Subscriptions
from geops.strategies import BatchMatches, LocalRunner, build_strategy
from kafkaio.clients import consumer
from kafkaio.offsets import EndOffsets, read_between

# The matcher of every subscription: one R-tree over them all (sPIS with one partition). The
# task holds the whole static side, so partitions would only add a routing step and a loop per
# partition to every poll, most of which holds a single record.
STRATEGY, PARTITIONS = "sPIS", 1
# Subscription records applied at most per refresh: a burst of changes is taken in steps, so
# the publications waiting meanwhile are not held up by all of it at once.
REFRESH_RECORDS = 5_000


class WholeStatic:
    """The subscriptions topic as one matcher of every subscription, following the topic."""

    def __init__(self, conf: Mapping[str, str], topic: str, outage_limit: float):
        probe = EndOffsets(conf)
        try:
            ends = probe(topic)
        finally:
            probe.close()
        found, subs = read_change(read_between(conf, topic, {}, ends, outage_limit))
        self.subscriptions = len(subs)
        # the detecting subscriptions (fences): id -> DetectKind mask
        self.fences = {i: m for i, m in zip(found.envelopes.ids.tolist(),
                                            found.detect.tolist(), strict=True) if m}
        # the shapes of the fences that ask for cross (their tracks are tested in the task)
        self.cross_shapes = _cross_shapes(found.envelopes.ids, found.detect, subs)
        self.dead: list[DeadRecord] = list(found.dead)
        self.runner = LocalRunner(build_strategy(STRATEGY, subs, PARTITIONS))
        self._follow = consumer(conf)
        self._follow.assign([TopicPartition(topic, p, end) for p, end in sorted(ends.items())])

    def refresh(self) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """Apply the subscription records that arrived since the last call. Returns the ids
        they changed with each one's detect mask now (0: no fence, or deleted) and shape
        (None where deleted), or None when none arrived. Records that cannot be used are
        added to ``dead``."""
        msgs = [m for m in self._follow.consume(REFRESH_RECORDS, timeout=0)
                if m.error() is None]
        if not msgs:
            return None
        found, upserts = read_change(msgs)
        self.dead.extend(found.dead)
        self.runner.apply(upserts, found.deleted)
        shapes = np.full(len(found.envelopes.ids) + len(found.deleted), None, object)
        if len(upserts):
            at = np.minimum(np.searchsorted(upserts.ids, found.envelopes.ids), len(upserts) - 1)
            same = upserts.ids[at] == found.envelopes.ids
            shapes[np.flatnonzero(same)] = upserts.geoms[at[same]]
        return (np.concatenate([found.envelopes.ids, found.deleted]),
                np.concatenate([found.detect, np.zeros(len(found.deleted), np.uint8)]), shapes)

    def match(self, geoms: np.ndarray) -> BatchMatches:
        """The matches of ``geoms``, keyed by their position."""
        return self.runner.match(np.arange(len(geoms), dtype=np.int64), geoms)

    def offsets(self) -> dict[int, int]:
        """The subscriptions topic's offsets applied: partition -> next offset."""
        return {tp.partition: tp.offset
                for tp in self._follow.position(self._follow.assignment()) if tp.offset >= 0}

    def close(self) -> None:
        self._follow.close()


def _cross_shapes(ids: np.ndarray, detect: np.ndarray, subs: Subscriptions) -> dict[int, object]:
    """Id -> shape of the fences (``ids`` with their ``detect`` masks) that ask for cross,
    from the live subscriptions ``subs`` (sorted by id; a distance fence's shape is its
    fence)."""
    asks = np.asarray(ids, np.int64)[(np.asarray(detect) & int(DetectKind.CROSS)) > 0]
    if not len(asks) or not len(subs):
        return {}
    at = np.minimum(np.searchsorted(subs.ids, asks), len(subs) - 1)
    found = subs.ids[at] == asks
    return dict(zip(asks[found].tolist(), subs.geoms[at[found]], strict=True))
