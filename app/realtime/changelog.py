"""Each object's geofence state on a compacted topic, so a task started again goes on with it.

A real-time task keeps its objects' states (``events.TaskEvents``) in memory; with every commit
of its output (``delivery``) it also writes the state of each object that changed since the
last commit to the app's object-state topic (``topics.object_state``, compacted), one record
per object keyed ``<app id>/<object id>``: the publications partition its positions come from,
its ``ObjectState`` (last event time, the fences it is in, where it was) and the task's
clock. An object the
TTL expired is a tombstone. The record goes to the object-state partition of its publications
partition (modulo the topic's partitions), so a task started again reads back only the
partitions of its own publications partitions, and of their records keeps those of its
partitions (``restore``): the newest record of each object wins, as compaction leaves it.

The restored state is the state after the offsets the task resumes from: under exactly-once the
records are in the transaction of the output and the offsets (``delivery``), so a
``read_committed`` reader sees the state of the last committed transaction and no other; under
at-least-once they are written once the period's output is delivered and before its offsets are
committed, so the state may be ahead of the offsets by one period, whose positions come again:
those older than their object's last are dropped as out of order (their events were
delivered), the last one gives its events again.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from geops.events import ObjectState
from kafkaio.offsets import EndOffsets, read_between

StateRecord = tuple[int, bytes, bytes | None]  # (object-state partition, key, value)


class Tracked(dict):
    """An objects' states dict that remembers which objects were set or removed (``changed``)
    since it was last cleared: what the next commit writes."""

    def __init__(self, *args: Any):
        super().__init__(*args)
        self.changed: set[str] = set()

    def __setitem__(self, key: str, value: Any) -> None:
        super().__setitem__(key, value)
        self.changed.add(key)

    def __delitem__(self, key: str) -> None:
        super().__delitem__(key)
        self.changed.add(key)

    def pop(self, key: str, *default: Any) -> Any:
        self.changed.add(key)
        return super().pop(key, *default)


def state_key(app_id: str, object_id: str) -> bytes:
    """The record key of an object's state: the app's, so apps may share the topic."""
    return f"{app_id}/{object_id}".encode()


def encode_state(partition: int, state: Sequence, clock: int) -> bytes:
    """An object's state record: ``[partition, last_ms, fence ids, fence since, clock, x, y]``
    (``x, y``: where its last accepted position was, the start of its next track for
    ``cross``; null when not known)."""
    st = ObjectState.of(state)
    return json.dumps([partition, st.last_ms, list(st.fence_ids), list(st.fence_since), clock,
                       st.x, st.y], separators=(",", ":")).encode()


class Changelog:
    """The object-state topic of one app: the records a commit writes, and a task's restore."""

    def __init__(self, conf: Mapping[str, str], topic: str, app_id: str, outage_limit: float,
                 partitions: int | None = None):
        """``partitions``: the topic's count, when known (else Kafka is asked)."""
        self.conf, self.topic, self.app_id = conf, topic, app_id
        self.outage_limit = outage_limit
        if partitions is None:
            probe = EndOffsets(conf)
            try:
                partitions = len(probe.partitions(topic))
            finally:
                probe.close()
        self.partitions = partitions

    def records(self, states: Mapping[str, Any], changed: Iterable[str],
                partition_of: Mapping[str, int], clock: int) -> list[StateRecord]:
        """The records of the ``changed`` objects: each one's state now, or a tombstone."""
        out = []
        for name in changed:
            part = partition_of[name]
            state = states.get(name)
            out.append((part % self.partitions, state_key(self.app_id, name),
                        None if state is None else encode_state(part, state, clock)))
        return out

    def restore(self, owned: Sequence[int]) -> tuple[dict[str, tuple], dict[str, int], int]:
        """The states of the objects of publications partitions ``owned``, as committed: (object
        -> ``(last_ms, fence ids, fence since)``, object -> its publications partition, the
        clock)."""
        probe = EndOffsets(self.conf)
        try:
            ends = probe(self.topic, sorted({p % self.partitions for p in owned}))
        finally:
            probe.close()
        return replay(((m.key(), m.value()) for m in read_between(
            self.conf, self.topic, {}, ends, self.outage_limit)), self.app_id, owned)


def replay(records: Iterable[tuple[bytes | None, bytes | None]], app_id: str,
           owned: Sequence[int]) -> tuple[dict[str, tuple], dict[str, int], int]:
    """``Changelog.restore`` of object-state records (key, value) in the topic's order."""
    prefix = f"{app_id}/".encode()
    mine = set(owned)
    states: dict[str, tuple] = {}
    parts: dict[str, int] = {}
    clock = 0
    for key, value in records:
        if not (key or b"").startswith(prefix):
            continue
        name = key[len(prefix):].decode()
        if value is None:
            states.pop(name, None)
            parts.pop(name, None)
            continue
        part, last, ids, since, at, *place = json.loads(value)
        if part in mine:
            states[name] = ObjectState.of((last, ids, since, *place))
            parts[name] = part
            clock = max(clock, at)
    return states, parts, clock
