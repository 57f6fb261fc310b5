"""The real-time task's events, pure: positions matched against every subscription held in one
place (as a real-time task holds them), a few at a time in stream order, give the events of
``geops.events.EventEngine`` (the engine of ``geops match --events``), distance fences, fence
changes and cross included."""

from __future__ import annotations

import json

import numpy as np
import pytest

from app.realtime.events import TaskEvents
from app.realtime.task import hits_of
from geops.events import CROSS, EventEngine
from geops.model import DetectKind
from geops.offline import matched_as
from geops.strategies import BatchMatches, LocalRunner, build_strategy
from geops.workload import generate_workload
from schemas import codec

DAY_MS = 86_400_000  # a TTL no position of the workload outlives


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
    task = TaskEvents(dict(zip(subs.ids.tolist(), detect.tolist(), strict=True)), DAY_MS, -1,
                      dict(zip(fenced.ids.tolist(), fenced.geoms, strict=True)))
    engine = EventEngine(DAY_MS)
    assert not any(engine.set_fences(subs.ids, subs.geoms, detect, distance))
    pubs, objects = w.publications, np.asarray(w.object_ids, object)
    half = len(pubs) // 2
    got, want = [], []
    for lo in range(0, len(pubs), poll):
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
                                ids, 0, pubs.geoms[rows])
        got += _decoded(values)
        for k in rows.tolist():
            want += [tuple(json.loads(e.to_json()).get(f) for f in
                           ("object_id", "subscription_id", "kind", "publication_id",
                            "event_time", "reason"))
                     for e in engine.process(objects[k:k + 1], pubs.ids[k:k + 1],
                                             pubs.event_time[k:k + 1], pubs.geoms[k:k + 1])]
    assert len(want) > 100 and sum(e[2] == CROSS for e in want) >= 2
    assert sorted(got, key=str) == sorted(want, key=str)
