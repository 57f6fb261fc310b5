"""The subscriptions topic scanned in slices and built on the executors equals the driver's
view of the whole topic read in order: the same live set (as envelopes), the same dead letters,
and byte for byte the payloads of a strategy built over the live set."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import shapely

from app.static.build import merge_pieces, place_pieces
from app.subscriptions.scan import TopicRange, merge_summaries, pieces_of, scan_records
from geops.model import DetectKind, Envelopes, Relation, Subscriptions
from geops.strategies import build_strategy
from geops.strategies import payload as payload_codec
from geops.strategies.strategy import Layout
from schemas import codec


class Msg:
    """A Kafka message as the scan reads it."""

    def __init__(self, offset: int, key: bytes | None, value: bytes | None, partition: int = 0):
        self._offset, self._key, self._value, self._partition = offset, key, value, partition

    def topic(self) -> str:
        return "subscriptions"

    def partition(self) -> int:
        return self._partition

    def offset(self) -> int:
        return self._offset

    def key(self) -> bytes | None:
        return self._key

    def value(self) -> bytes | None:
        return self._value


POOL = [shapely.box(0, 0, 2, 2), shapely.box(5, 5, 9, 6), shapely.Point(3, 7),
        shapely.box(1, 6, 4, 9)]
BOWTIE = shapely.Polygon([(0, 0), (1, 1), (1, 0), (0, 1)])


def _topic(n: int, seed: int) -> tuple[list[Msg], dict, set]:
    """Records of one topic partition: many subscriptions of a few shapes, then updates,
    tombstones, unusable records and re-adds; with the set a reader in offset order ends with
    and the offsets whose records must be dead-lettered."""
    c = codec()
    rng = np.random.default_rng(seed)
    msgs: list[Msg] = []
    live: dict[int, tuple[object, int]] = {}
    last: dict[int, int] = {}       # id -> offset of its last record
    unusable: set[int] = set()      # offsets of records with an unusable geometry

    def put(sid: int, geom, relation: int) -> None:
        value = c.encode("Subscription", {"id": sid, "geometry": shapely.to_wkb(geom),
                                          "relation": Relation(relation).name})
        last[sid] = len(msgs)
        msgs.append(Msg(len(msgs), str(sid).encode(), value))
        if shapely.is_valid(geom):
            live[sid] = (geom, relation)
        else:  # an unusable new version deletes the old one
            unusable.add(last[sid])
            live.pop(sid, None)

    for sid in range(n):
        put(sid * 5 + 1, POOL[rng.integers(len(POOL))], int(rng.integers(0, 10)))
    for _ in range(n):
        sid = int(rng.integers(n)) * 5 + 1
        action = rng.integers(5)
        if action == 0:
            last[sid] = len(msgs)
            msgs.append(Msg(len(msgs), str(sid).encode(), None))
            live.pop(sid, None)
        elif action == 1:
            put(sid, BOWTIE, 3)
        else:
            put(sid, POOL[rng.integers(len(POOL))], int(rng.integers(0, 10)))
    # dead whatever follows: a tombstone whose key is no id, undecodable bytes
    dead = {len(msgs), len(msgs) + 1}
    msgs += [Msg(len(msgs), b"not-an-id", None), Msg(len(msgs) + 1, b"6", b"\x01\x03junk")]
    # an unusable geometry is dead-lettered when it stays the last record of its id
    dead |= unusable & set(last.values())
    return msgs, live, dead


@pytest.mark.parametrize("strategy", ["sPIS", "RIhPS", "RIsPS"])
@pytest.mark.parametrize("per_slice", [7, 40, 10_000])
def test_slices_scanned_apart_make_the_live_sets_payloads(strategy, per_slice):
    msgs, live, dead = _topic(120, seed=per_slice)
    source = TopicRange({}, "subscriptions", {0: len(msgs)})
    slices = source.slices(per_slice)
    scanned = [scan_records(i, p, msgs[start:end]) for i, (p, start, end) in enumerate(slices)]
    found = merge_summaries([summary for summary, _ in scanned])

    ids = np.array(sorted(live), np.int64)
    want = Subscriptions(ids, np.array([live[i][0] for i in ids.tolist()], object),
                         np.array([live[i][1] for i in ids.tolist()], np.int8))
    expected = Envelopes.of(want)
    for name in ("ids", "bounds", "points", "relations"):
        np.testing.assert_array_equal(getattr(found.envelopes, name), getattr(expected, name))
    assert sorted(d.offset for d in found.dead) == sorted(dead)
    assert found.records == len(msgs) and found.skipped == len(dead)

    built = build_strategy(strategy, want, 4)
    layout = Layout(strategy, found.envelopes, 4)
    np.testing.assert_array_equal(layout.partition_sizes(), built.partition_sizes())
    partitioner = (None if layout.partitioner is None
                   else SimpleNamespace(value=layout.partitioner))
    pieces = list(place_pieces(strategy, layout.num_partitions, partitioner,
                               pieces_of([(s.index, payload_codec.encode(subs))
                                          for s, subs in scanned], found.stale)))
    got = dict(merge_pieces(partitioner, pieces[::-1]))
    assert got == {p: built.partition_payload(p) for p in range(built.num_partitions)
                   if built.partition_sizes()[p]}


def test_the_newest_record_wins_across_topic_partitions_and_slices():
    """An id whose records are in two topic partitions: the highest (partition, offset) wins,
    as ``app.subscriptions.feed`` decides for later changes."""
    c = codec()

    def rec(sid, geom, offset, partition):
        return Msg(offset, str(sid).encode(), c.encode("Subscription", {
            "id": sid, "geometry": shapely.to_wkb(geom), "relation": "WITHIN"}), partition)

    a = scan_records(0, 0, [rec(1, POOL[0], 0, 0), rec(2, POOL[1], 1, 0)])
    b = scan_records(1, 1, [rec(1, POOL[3], 0, 1), Msg(1, b"2", None, 1)])
    found = merge_summaries([b[0], a[0]])
    assert found.envelopes.ids.tolist() == [1]
    np.testing.assert_array_equal(found.envelopes.bounds[0], shapely.bounds(POOL[3]))
    assert {k: v.tolist() for k, v in found.stale.items()} == {0: [1, 2]}
    kept = list(pieces_of([(0, payload_codec.encode(a[1])), (1, payload_codec.encode(b[1]))],
                          found.stale))
    assert [s.ids.tolist() for s in kept] == [[1]]


def test_an_empty_topic_is_an_empty_set():
    found = merge_summaries([scan_records(0, 0, [])[0]])
    assert len(found.envelopes) == 0 and found.records == 0 and not found.dead


def test_a_fence_that_cannot_be_made_is_dead_lettered_by_name():
    """The scan refuses what ``geops subscribe`` refuses, for records written by anyone: a
    distance without detect kinds, a NaN or negative distance, a fence across a pole; the
    subscription is then unusable (an older version of it no longer matches) and its record
    goes to the dead letters with the reason naming the subscription and the field."""
    c = codec()

    def rec(offset, sid, geom, detect=(), distance=None):
        return Msg(offset, str(sid).encode(), c.encode("Subscription", {
            "id": sid, "geometry": shapely.to_wkb(geom), "relation": "INTERSECTS",
            "detect": list(detect), "distance_m": distance}))

    depot = shapely.Point(4.9, 52.4)
    msgs = [rec(0, 1, depot, ["ENTER"], 250.0),             # a circle: fine
            rec(1, 2, depot, [], 250.0),                    # a distance, nothing to detect
            rec(2, 3, depot, ["EXIT"], float("nan")),
            rec(3, 4, depot, ["INSIDE"], -5.0),
            rec(4, 5, shapely.Point(0, 89.99), ["ENTER"], 5_000.0),   # around the pole
            rec(5, 6, depot, ["ENTER", "EXIT"]),            # no distance: the geometry itself
            rec(6, 7, depot), rec(7, 7, depot, [], 10.0)]   # the newest version is refused
    summary, live = scan_records(0, 0, msgs)
    assert live.ids.tolist() == [1, 6]
    reasons = {d.offset: d.reason for d in summary.dead}
    assert sorted(reasons) == [1, 2, 3, 4, 7]
    assert all(r.startswith(f"subscription {sid}: ") for sid, r in
               zip([2, 3, 4, 5, 7], [reasons[o] for o in (1, 2, 3, 4, 7)], strict=True))
    assert "needs detect kinds" in reasons[1] and "distance_m" in reasons[1]
    assert "distance_m must be a finite number" in reasons[2] and "nan" in reasons[2]
    assert "-5.0" in reasons[3]
    assert "pole" in reasons[4]
    found = merge_summaries([summary])
    assert found.envelopes.ids.tolist() == [1, 6]


def test_a_roaming_fence_that_cannot_be_made_is_dead_lettered_by_name():
    """Roaming kinds without a roam, a roam with a bad distance or glob: unusable, the reason
    naming the subscription and the field; a good roaming fence is a plain subscription to
    the static side (its relation kept, no fixed kinds)."""
    c = codec()

    def rec(offset, sid, detect=(), roam=None):
        return Msg(offset, str(sid).encode(), c.encode("Subscription", {
            "id": sid, "geometry": shapely.to_wkb(shapely.Point(4.9, 52.4)),
            "relation": "WITHIN", "detect": list(detect), "roam": roam}))

    msgs = [rec(0, 1, ["NEARBY", "FARAWAY"], {"distance_m": 500.0, "match": "c-*"}),
            rec(1, 2, ["NEARBY"]),
            rec(2, 3, ["FARAWAY"], {"distance_m": -1.0, "match": "c-*"}),
            rec(3, 4, ["NEARBY"], {"distance_m": 50.0, "match": "c-[0"}),
            rec(4, 5, ["ENTER", "NEARBY"], {"distance_m": 50.0, "match": "*"})]
    summary, live = scan_records(0, 0, msgs)
    assert live.ids.tolist() == [1, 5]
    reasons = {d.offset: d.reason for d in summary.dead}
    assert reasons == {
        1: "subscription 2: detect NEARBY and FARAWAY need a roam (distance_m and match)",
        2: "subscription 3: roam distance_m must be a number of metres above zero and at most "
           "100,000, got -1.0",
        3: "subscription 4: roam match 'c-[0' has an unclosed '[' at 2 (write [[] for a "
           "literal '[')"}
    found = merge_summaries([summary])
    assert found.detect.tolist() == [0, int(DetectKind.ENTER)]
    assert found.envelopes.relations.tolist() == [int(Relation.WITHIN),
                                                  int(Relation.INTERSECTS)]
