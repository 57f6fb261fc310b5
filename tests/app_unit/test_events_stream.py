"""The events' way through the stream, without Spark or Kafka: the matching query's records
(``app.events.positions``), encoded and decoded as on the topic (the first batches as version 2 of
the record wrote them), through the bucket operator's logic
(``app.events.query.bucket_events``), give the events of the offline engine
(``geops.events.EventEngine``, expiring by the stream's clock after each batch), batch after
batch, while fences are added, changed, removed and added again, with positions out of order
and objects that go silent past the TTL."""

from __future__ import annotations

import pickle
from collections import defaultdict

import numpy as np
import pytest
import shapely

from app.events.positions import BUCKETS, FenceTable, bucket_key, bucket_records, position_hits
from app.events.query import EVENT_COLUMNS, Held, bucket_events
from app.records import Positions
from geops.events import CROSS, EventEngine, Fences, ObjectState, position_points
from geops.model import DetectKind
from schemas import codec
from schemas.event_encoder import KINDS
from schemas.int_pack import IntFrame
from tests.old_records import written_by


def rows(cols: dict) -> list[tuple]:
    """The operator's event columns as tuples of ``EVENT_COLUMNS`` (an expiry: no
    publication)."""
    return [tuple(None if name == "publication_id" and cols["expired"][k] else
                  cols[name][k].item() if hasattr(cols[name][k], "item") else cols[name][k]
                  for name in EVENT_COLUMNS) for k in range(len(cols["kind"]))]


def _boxes(rng: np.random.Generator, n: int) -> np.ndarray:
    x, y = rng.random(n) * 8, rng.random(n) * 8
    return shapely.box(x, y, x + 1 + rng.random(n) * 2, y + 1 + rng.random(n) * 2)


def _matched(keys: np.ndarray, geoms: np.ndarray, sub_ids: np.ndarray, sub_geoms: np.ndarray
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """What the join and merge give the driver: matched keys (sorted), CSR offsets, ids."""
    pos, sub = shapely.STRtree(sub_geoms).query(geoms, predicate="intersects")
    order = np.lexsort((sub_ids[sub], keys[pos]))
    k, s = keys[pos][order], sub_ids[sub][order]
    uniq, start = np.unique(k, return_index=True)
    return uniq, np.append(start, len(k)).astype(np.int64), s


def _as_v2(rec: dict) -> bytes:
    """``rec`` as version 2 of ``ObjectPositions`` wrote it: the fences each position is in as
    an array of longs, not packed."""
    old = {k: v for k, v in rec.items() if k not in ("hit_fences", "hit_base", "hit_width")}
    old["hit_ids"] = IntFrame(rec["hit_base"], rec["hit_width"]).unpack(
        rec["hit_fences"]).tolist()
    return written_by("ObjectPositions", 2, old)


def _cross_wkb(ids: np.ndarray, geoms: np.ndarray, detect: np.ndarray) -> dict[int, bytes]:
    """The shapes the matching query's driver holds: of the fences that ask for cross."""
    asks = (detect & int(DetectKind.CROSS)) > 0
    return dict(zip(ids[asks].tolist(), shapely.to_wkb(geoms[asks]).tolist(), strict=True))


@pytest.mark.parametrize("seed,cross", [(1, False), (2, False), (3, False), (1, True),
                                        (4, True)])
def test_the_stream_gives_the_offline_engines_events(seed, cross):
    """With ``cross`` fences ask for it too, the positions carry their places and the
    records the fences' shapes (as version 4 on writes them; before, the first half of the
    batches as version 2 wrote them), and a fence moves at each change."""
    rng = np.random.default_rng(seed)
    c = codec()
    ids = np.arange(40, dtype=np.int64)
    geoms = _boxes(rng, len(ids))
    detect = rng.integers(0, 32 if cross else 16, len(ids)).astype(np.uint8)
    detect[:5] = 0  # plain subscriptions, matched but no fences
    table = FenceTable(ids, detect, _cross_wkb(ids, geoms, detect) if cross else None)
    engine = EventEngine(ttl_ms=5_000)
    engine.set_fences(ids, geoms, detect)
    held: dict[int, Held] = defaultdict(Held)
    objects = [f"o{i}" for i in range(30)]
    expected, got = defaultdict(list), defaultdict(list)
    t = clock = 0
    for batch in range(12):
        if batch in (4, 8):  # fences change: kinds, a removal, a plain one becomes a fence
            gone, changed, joined = int(rng.integers(5, 40)), int(rng.integers(5, 40)), 2
            detect = detect.copy()
            detect[changed] = (detect[changed] % 15) + 1
            detect[joined] = 9
            keep = ids != gone
            deletes = np.array([gone])
            ids, geoms, detect = ids[keep], geoms[keep], detect[keep]
            if batch == 4:
                removed = gone
            else:  # the one removed at 4 comes back: it starts fresh
                ids, geoms = np.append(ids, removed), np.append(geoms, _boxes(rng, 1))
                detect = np.append(detect, np.uint8(15))
                order = np.argsort(ids)
                ids, geoms, detect = ids[order], geoms[order], detect[order]
            if cross:  # a fence that asks for cross moves
                geoms = geoms.copy()
                geoms[int(np.flatnonzero(detect & int(DetectKind.CROSS))[0])] = _boxes(rng, 1)[0]
            table.apply(ids, detect, deletes, geoms if cross else None)
            engine.set_fences(ids, geoms, detect)
        n = 60
        names = np.array(rng.choice(objects, n), object)
        times = t + rng.integers(0, 8_000, n)  # out of order within a batch; some gaps > TTL
        t += 3_000
        pids = np.arange(batch * 100, batch * 100 + n, dtype=np.int64)
        points = shapely.points(rng.random(n) * 10, rng.random(n) * 10)
        keys = pids + 7
        clock = max(clock, int(times.max()))
        for e in engine.process(names, pids, times, points) + engine.expire(clock):
            expected[e.object_id].append(e[:6])
        mk, offsets, sub_ids = _matched(keys, points, ids, geoms)
        places = position_points(points)
        hits = position_hits([Positions(keys[:25], pids[:25], names[:25], times[:25],
                                        places[:25] if cross else None),
                              Positions(keys[25:], pids[25:], names[25:], times[25:],
                                        places[25:] if cross else None)],
                             mk, offsets, sub_ids, table.ids)
        records = bucket_records("app", batch, 99, hits, table, clock)
        table.written()
        assert all(key == bucket_key("app", rec["bucket"]) for key, rec in records)
        by_bucket = defaultdict(list)
        for _, rec in records:  # the first half as an app before version 3 wrote them
            value = (_as_v2(rec) if batch < 6 and not cross else
                     c.encode("ObjectPositions", rec))
            by_bucket[rec["bucket"]].append(c.decode_as("ObjectPositions", value))
        for b, recs in by_bucket.items():
            held[b] = pickle.loads(pickle.dumps(held[b]))  # as the state store keeps it
            for row in rows(bucket_events(held[b], recs, 5_000)):
                kind = KINDS[row[2]].lower()
                got[row[0]].append((row[0], row[1], kind, row[4], row[5], row[3]))
                assert row[6:] == (99, batch)
    assert sum(len(v) for v in expected.values()) > 100
    assert any(e[5] == "expired" for v in expected.values() for e in v)
    assert dict(got) == dict(expected)
    assert sum(h.dropped for h in held.values()) == engine.dropped > 0
    assert any(e[2] == CROSS for v in expected.values() for e in v) == cross


def test_a_batch_after_a_restart_carries_every_fence_and_forgets_the_removed():
    """A new process sends the whole table first: a fence removed while it was down is
    forgotten by every object, so it never gives an exit."""
    held = Held()
    rec = {"batch_id": 0, "match_time": 1, "clock": 100, "fences_complete": True,
           "fence_ids": [1, 2], "fence_detect": [3, 3], "object_ids": ["a"],
           "publication_ids": [10], "event_times": [100], "hit_counts": [2], "hit_ids": [1, 2]}
    assert [KINDS[r[2]] for r in rows(bucket_events(held, [rec], None))] == ["ENTER", "ENTER"]
    after = {**rec, "batch_id": 1, "clock": 200, "fence_ids": [2], "fence_detect": [3],
             "publication_ids": [11], "event_times": [200], "hit_counts": [0], "hit_ids": []}
    assert [(r[1], KINDS[r[2]]) for r in rows(bucket_events(held, [after], None))] == [
        (2, "EXIT")]
    assert held.objects["a"].fence_ids == ()


def test_fence_table_reports_only_what_changed():
    table = FenceTable(np.array([1, 2, 3]), np.array([1, 0, 2]))
    assert table.pending() == (True, [1, 3], [1, 2], [])   # no shapes: none asks for cross
    table.written()
    assert table.pending() == (False, [], [], [])
    table.apply(np.array([2, 3]), np.array([4, 2]), np.array([1, 9]))
    assert table.pending() == (False, [1, 2], [0, 4], [])
    assert table.ids.tolist() == [2, 3]
    table.apply(np.array([2]), np.array([0]), np.array([], np.int64))
    assert table.pending() == (False, [1, 2], [0, 0], [])


def test_fence_table_carries_the_shapes_of_fences_that_ask_for_cross():
    """A fence asking for cross carries its shape (WKB); it changes when its shape does,
    and one that stops asking for cross, or is removed, carries none."""
    box, other = shapely.box(0, 0, 1, 1), shapely.box(2, 2, 3, 3)
    cross = int(DetectKind.CROSS)
    table = FenceTable(np.array([1, 2]), np.array([cross, 1]), {1: shapely.to_wkb(box)})
    assert table.pending() == (True, [1, 2], [cross, 1], [shapely.to_wkb(box), b""])
    table.written()
    table.apply(np.array([1, 2]), np.array([cross, 1]), np.empty(0, np.int64),
                np.array([box, other], object))
    assert table.pending() == (False, [], [], [])          # nothing changed
    table.apply(np.array([1, 2]), np.array([cross, 1 | cross]), np.empty(0, np.int64),
                np.array([other, other], object))
    assert table.pending() == (False, [1, 2], [cross, 1 | cross],
                               [shapely.to_wkb(other), shapely.to_wkb(other)])
    table.written()
    table.apply(np.array([2]), np.array([1]), np.array([1]), np.array([other], object))
    assert table.pending() == (False, [1, 2], [0, 1], [])  # no fence asks for cross now


def test_positions_without_a_match_have_no_fences():
    hits = position_hits([Positions(np.array([5, 6]), np.array([50, 60]),
                                    np.array(["a", "b"], object), np.array([1, 2]))],
                         np.empty(0, np.int64), np.zeros(1, np.int64),
                         np.empty(0, np.int64), np.array([1]))
    assert hits.counts.tolist() == [0, 0] and hits.hits.tolist() == []
    records = bucket_records("x", 0, 0, hits, FenceTable(np.array([1]), np.array([1])), 2)
    assert len(records) == BUCKETS  # the first batch tells every bucket the fences
    assert sum(len(r["object_ids"]) for _, r in records) == 2


def test_the_held_state_pickles_compactly_and_reads_the_earlier_form():
    held = Held(fences={7: 3, 9: 1, 1_000_000: 4},
                objects={"a": ObjectState(5, (7, 9), (0, 0)), "b": ObjectState(6)})
    again = pickle.loads(pickle.dumps(held))
    # a state without a place (the stream's) is kept as its three fields
    assert again.fences == held.fences and again.objects == {
        name: tuple(st[:3]) for name, st in held.objects.items()}
    placed = Held(objects={"c": ObjectState(5, (7,), (0,), 1.5, 2.5)})
    assert pickle.loads(pickle.dumps(placed)).objects == placed.objects
    assert again.table().ids.tolist() == [7, 9, 1_000_000]
    state = held.__getstate__()
    assert state["gaps"].dtype == np.uint32 and state["objects"]["a"] == (5, (7, 9), (0, 0))
    earlier = {"fences": held.fences, "objects": held.objects, "dropped": 2, "clock": 8,
               "table": (np.array([7, 9, 1_000_000]), np.array([3, 1, 4], np.uint8))}
    old = Held.__new__(Held)
    old.__setstate__(earlier)
    assert old.fences == held.fences and old.dropped == 2 and old.clock == 8
    assert Held().__getstate__()["gaps"].tolist() == []
    assert pickle.loads(pickle.dumps(Held())).table().ids.tolist() == []


def test_fences_need_no_shapes_in_the_stream():
    fences = Held(fences={4: 1, 2: 2}).table()
    assert isinstance(fences, Fences) and fences.ids.tolist() == [2, 4]


def test_a_silent_object_expires_by_the_streams_clock():
    """An object that never comes back is forgotten once the clock (carried by every
    bucket's record, also one without positions) passes its last event time plus the TTL,
    with an exit from each fence it was in that asks for exits."""
    held = Held()
    first = {"batch_id": 0, "match_time": 1, "clock": 1_000, "fences_complete": True,
             "fence_ids": [1, 2], "fence_detect": [3, 1], "object_ids": ["a"],
             "publication_ids": [10], "event_times": [1_000], "hit_counts": [2],
             "hit_ids": [1, 2]}
    bucket_events(held, [first], 5_000)
    quiet = {**first, "batch_id": 1, "clock": 6_000, "fences_complete": False,
             "fence_ids": [], "fence_detect": [], "object_ids": [], "publication_ids": [],
             "event_times": [], "hit_counts": [], "hit_ids": []}
    assert rows(bucket_events(held, [quiet], 5_000)) == []  # 1,000 + 5,000 is not before 6,000
    later = {**quiet, "batch_id": 2, "clock": 6_001}
    assert rows(bucket_events(held, [later], 5_000)) == [
        ("a", 1, KINDS.index("EXIT"), "expired", None, 6_000, 1, 2)]  # fence 2: enter only
    assert held.objects == {}
