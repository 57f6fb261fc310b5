"""The real-time task's events, pure: positions matched against every subscription held in one
place (as a real-time task holds them), a few at a time in stream order, give the events of
``geops.events.EventEngine`` (the engine of ``geops match --events``), distance fences, fence
changes and cross included; a task started again from its changelog's records goes on with the
same events."""

from __future__ import annotations

import json
import zlib

import numpy as np
import pytest

from app.realtime.changelog import Changelog, replay
from app.realtime.events import TaskEvents
from app.realtime.task import hits_of
from geops.events import CROSS, EventEngine, ObjectState
from geops.model import DetectKind
from geops.offline import matched_as
from geops.strategies import BatchMatches, LocalRunner, build_strategy
from geops.workload import generate_workload
from schemas import codec

DAY_MS = 86_400_000  # a TTL no position of the workload outlives
PARTS = 4  # publications partitions; the object-state topic has 3, so they share some


def test_hits_of_gives_each_rows_matches_in_order():
    found = BatchMatches(np.array([1, 3, 4], np.int64), np.array([0, 2, 2, 5]),
                         np.array([10, 11, 12, 13, 14], np.int64), 0, 0)
    counts, ids = hits_of(found, np.array([0, 1, 3, 4], np.int64))
    assert counts.tolist() == [0, 2, 0, 3]
    assert ids.tolist() == [10, 11, 12, 13, 14]
    empty = BatchMatches(np.empty(0, np.int64), np.zeros(1, np.int64), np.empty(0, np.int64),
                         0, 0)
    assert [a.tolist() for a in hits_of(empty, np.array([2]))] == [[0], []]


def _decoded(values: list[bytes]) -> list[tuple]:
    c = codec()
    out = []
    for v in values:
        r = c.decode_as("GeofenceEvent", v)
        out.append((r["object_id"], r["subscription_id"], r["kind"].lower(),
                    r["publication_id"], r["event_time"], r["reason"]))
    return out


@pytest.mark.parametrize("poll", [1, 7, 50])
def test_task_events_equal_the_oracle_engine_poll_by_poll(poll):
    """Every fence asks for cross too (a step of 80 s: up to 2.4 km, so some tracks pass
    through fences); the task has the fences' shapes and the positions' geometries."""
    w = generate_workload(seed=7, objects=80, subscriptions=500, publications=2_400,
                          interval_ms=1_000)
    subs, distance = w.subscriptions, np.round(w.distance_m, 1)
    detect = w.detect.copy()
    detect[detect > 0] |= int(DetectKind.CROSS)
    fenced, refused = matched_as(subs, detect, distance, list(range(len(subs))))
    assert not refused
    runner = LocalRunner(build_strategy("sPIS", fenced, 1))
    shapes = dict(zip(fenced.ids.tolist(), fenced.geoms, strict=True))
    task = TaskEvents(dict(zip(subs.ids.tolist(), detect.tolist(), strict=True)), DAY_MS, -1,
                      shapes)
    engine = EventEngine(DAY_MS)
    assert not any(engine.set_fences(subs.ids, subs.geoms, detect, distance))
    pubs, objects = w.publications, np.asarray(w.object_ids, object)
    parts = np.array([zlib.crc32(o.encode()) % PARTS for o in objects.tolist()], np.int64)
    changelog = Changelog({}, "object-state", "app", 0.0, partitions=3)
    written: list = []
    half = len(pubs) // 2
    got, want = [], []
    for lo in range(0, len(pubs), poll):
        if lo <= len(pubs) // 3 < lo + poll:  # started again from what its changelog holds
            fences = dict(zip(subs.ids.tolist(), detect.tolist(), strict=True))
            task = TaskEvents(fences, DAY_MS, -1, shapes)
            task.restore(*replay([(k, v) for _, k, v in written], "app", range(PARTS)))
        if lo <= half < lo + poll:  # fences change between two polls: a fifth stop detecting
            gone = subs.ids[np.flatnonzero(detect)[::5]]
            task.change(gone, np.zeros(len(gone), np.uint8))
            keep = ~np.isin(subs.ids, gone)
            assert not any(engine.set_fences(subs.ids[keep], subs.geoms[keep], detect[keep],
                                             distance[keep]))
        rows = np.arange(lo, min(lo + poll, len(pubs)))
        found = runner.match(rows, pubs.geoms[rows])
        counts, ids = hits_of(found, rows)
        _, values = task.events(objects[rows], pubs.ids[rows], pubs.event_time[rows], counts,
                                ids, 0, parts[rows], pubs.geoms[rows])
        got += _decoded(values)
        records = task.changed(changelog)
        if not lo <= half < lo + poll:  # the objects of this poll, each once, where it goes
            assert sorted((p, k) for p, k, _ in records) == sorted(
                {(int(parts[r]) % 3, f"app/{objects[r]}".encode()) for r in rows.tolist()})
        written += records
        for k in rows.tolist():
            want += [tuple(json.loads(e.to_json()).get(f) for f in
                           ("object_id", "subscription_id", "kind", "publication_id",
                            "event_time", "reason"))
                     for e in engine.process(objects[k:k + 1], pubs.ids[k:k + 1],
                                             pubs.event_time[k:k + 1], pubs.geoms[k:k + 1])]
    assert len(want) > 100 and sum(e[2] == CROSS for e in want) >= 2
    assert sorted(got, key=str) == sorted(want, key=str)


def test_a_restore_keeps_the_objects_of_the_tasks_partitions_and_forgets_tombstones():
    states = {"a": ObjectState(5, (1, 2), (0, 0), 1.5, -2.0), "b": ObjectState(7),
              "c": ObjectState(9, (3,), (0,))}
    parts = {"a": 0, "b": 1, "c": 2}
    task = TaskEvents({1: 1, 2: 1, 3: 1}, DAY_MS, -1)
    task.restore(states, parts, 9)
    assert task.changed(Changelog({}, "t", "app", 0.0, partitions=2)) == []  # restored: clean
    task.held.objects.pop("c")  # the TTL expired it
    records = task.changed(Changelog({}, "t", "app", 0.0, partitions=2))
    assert records == [(0, b"app/c", None)] and "c" not in task.partition_of
    written = Changelog({}, "t", "app", 0.0, partitions=2).records(states, ["a", "b"], parts, 9)
    log = [(k, v) for _, k, v in written] + [(b"other/a", b"[0,1,[],[],1]")]
    # the place (the start of the next track, for cross) comes back too
    assert replay(log, "app", [0]) == ({"a": states["a"]}, {"a": 0}, 9)
    assert replay([*log, (b"app/a", None)], "app", [0, 1]) == ({"b": states["b"]}, {"b": 1}, 9)


@pytest.mark.parametrize("poll", [1, 13])
def test_expiry_by_the_heap_equals_a_look_at_every_object(poll):
    """Objects unseen for the TTL expire on the same poll whether the task finds them in its
    heap by last event time or looks at each one, positions out of order and a restore from
    the changelog mid-stream included."""
    w = generate_workload(seed=9, objects=60, subscriptions=300, publications=1_800,
                          interval_ms=1_000)
    subs, detect, distance = w.subscriptions, w.detect, np.round(w.distance_m, 1)
    fenced, _ = matched_as(subs, detect, distance, list(range(len(subs))))
    runner = LocalRunner(build_strategy("sPIS", fenced, 1))
    fences = dict(zip(subs.ids.tolist(), detect.tolist(), strict=True))
    pubs, objects = w.publications, np.asarray(w.object_ids, object)
    rng = np.random.default_rng(1)
    times = pubs.event_time + rng.integers(-3_000, 3_000, len(pubs))  # some out of order
    # every fifth object pauses for a while: the TTL (20 s) expires it before it goes on
    times = times + np.where(np.isin(objects, objects[:60:5]), (np.arange(len(pubs)) > 900)
                             * 60_000, 0)
    heap, scan = TaskEvents(fences, 20_000, -1), TaskEvents(fences, 20_000, -1)
    scan._due = None  # bucket_events looks at every held object
    changelog = Changelog({}, "object-state", "app", 0.0, partitions=2)
    written: list = []
    got: dict[str, list] = {"heap": [], "scan": []}
    for lo in range(0, len(pubs), poll):
        if lo <= len(pubs) // 2 < lo + poll:
            heap = TaskEvents(fences, 20_000, -1)
            heap.restore(*replay([(k, v) for _, k, v in written], "app", [0]))
        rows = np.arange(lo, min(lo + poll, len(pubs)))
        found = runner.match(rows, pubs.geoms[rows])
        counts, ids = hits_of(found, rows)
        for name, task in (("heap", heap), ("scan", scan)):
            _, values = task.events(objects[rows], pubs.ids[rows], times[rows], counts, ids,
                                    0, np.zeros(len(rows), np.int64))
            got[name] += _decoded(values)
        written += heap.changed(changelog)
    assert got["heap"] == got["scan"]
    assert sum(e[5] == "expired" for e in got["scan"]) > 5
