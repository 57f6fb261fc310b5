"""Replicated static partitions outside Spark: the commands the app accepts, the
routing split among a partition's owners, the join of every owner, and the static side's
copies (STAL resident on each owner, STRL shipped to each) as owners come and go."""

from __future__ import annotations

import logging
import types
from collections import defaultdict

import numpy as np
import pytest

import app.batch.tasks
from app.batch.control import ControlChannel
from app.batch.runner import BatchState
from app.batch.tasks import KEY_PARTITION_SHIFT as SHIFT
from app.batch.tasks import (
    JoinContext,
    Record,
    RouteContext,
    decode_route,
    join,
    resident_partitions,
)
from app.records import Items, Matched, PartitionLoad, Presence, StaticPartition
from app.static.side import StaticSide, shipping_plan
from geops.oracle import oracle_match
from geops.strategies import build_strategy, merge
from geops.strategies import payload as payload_codec
from geops.strategies.churn import PartitionDelta, fold_deltas
from geops.workload import generate_workload
from schemas import codec
from schemas.assignment import command_fields, owner_index
from schemas.records import publication_records

STRATEGIES = ("sPS", "sPIS", "RIhPS", "RIsPS")
W = 3
# 8 partitions on 3 workers: p0 on all three, p1 and p5 on two (primary first), the rest one.
OWNERS = [(0, 1, 2), (0, 2), (0,), (1,), (1,), (1, 0), (2,), (2,)]


@pytest.fixture(autouse=True)
def no_resident_partitions():
    app.batch.tasks._RESIDENT.clear()
    yield
    app.batch.tasks._RESIDENT.clear()


@pytest.fixture(scope="module")
def wl():
    return generate_workload(seed=7, subscriptions=300, publications=400)


def rows_of(wl) -> list[Record]:
    """The publications as records of two Kafka partitions (keys differ in both halves)."""
    return [Record("pubs", i % 2, 500 + i // 2, None, codec().encode("Publication", r))
            for i, r in enumerate(publication_records(wl.publications))]


def route(built, rows, owners, presence=True):
    assignment, replicas = command_fields(owners)
    ctx = RouteContext(router=types.SimpleNamespace(value=built.router()),
                       assignment=tuple(assignment), workers=W, with_presence=presence,
                       dead_letter_topic="dead",
                       replicas={r["partition"]: tuple(r["workers"]) for r in replicas})
    return list(decode_route(ctx, rows))


def items_by_partition(out) -> dict[int, list[tuple[int, tuple[int, ...]]]]:
    """pid -> sorted (key, candidates) of every item routed to it, whatever the worker."""
    got = defaultdict(list)
    for _, rec in out:
        if isinstance(rec, Items):
            for i, key in enumerate(rec.keys.tolist()):
                cands = () if rec.cand_offsets is None else tuple(
                    rec.cand_ids[rec.cand_offsets[i]:rec.cand_offsets[i + 1]].tolist())
                got[rec.partition].append((key, cands))
    return {p: sorted(v) for p, v in got.items()}


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_a_replicated_partitions_items_are_split_among_its_owners_by_key(strategy, wl):
    built = build_strategy(strategy, wl.subscriptions, len(OWNERS))
    rows = rows_of(wl)
    single = route(built, rows, [(o[0],) for o in OWNERS])
    out = route(built, rows, OWNERS)

    # every item reaches exactly one owner, the one owner_index names for its key
    shares = defaultdict(int)
    for worker, rec in out:
        if isinstance(rec, Items):
            owners = OWNERS[rec.partition]
            expected = np.asarray(owners)[owner_index(rec.keys, len(owners))]
            assert (expected == worker).all()
            shares[rec.partition, worker] += len(rec.keys)
    # the same items, with the same candidates, as without replicas
    assert items_by_partition(out) == items_by_partition(single)
    # the split is even enough that every owner of a busy partition gets items
    for p, owners in enumerate(OWNERS):
        total = sum(shares[p, w] for w in owners)
        if total >= 30:
            assert all(shares[p, w] >= total / len(owners) / 2 for w in owners), (p, shares)
    # presence (DISJOINT) does not depend on owners
    assert [(w, r.keys.tolist()) for w, r in out if isinstance(r, Presence)] == \
        [(w, r.keys.tolist()) for w, r in single if isinstance(r, Presence)]


def test_a_replayed_batch_splits_exactly_as_before(wl):
    built = build_strategy("RIsPS", wl.subscriptions, len(OWNERS))
    rows = rows_of(wl)
    first = route(built, rows, OWNERS)
    again = route(built, list(reversed(rows)), OWNERS)  # even read in another order

    def split(out):
        return {(w, r.partition): sorted(r.keys.tolist()) for w, r in out
                if isinstance(r, Items)}

    assert split(first) == split(again)


def static_of(built, owners, worker):
    return [(worker, StaticPartition(p, built.partition_payload(p)))
            for p, o in enumerate(owners) if worker in o]


@pytest.mark.parametrize(("strategy", "mode"), [("sPS", "STRL"), ("sPIS", "STAL"),
                                                ("RIhPS", "STAL"), ("RIsPS", "STRL")])
def test_every_owner_joins_its_share_and_the_merge_equals_the_oracle(strategy, mode, wl):
    built = build_strategy(strategy, wl.subscriptions, len(OWNERS))
    rows = rows_of(wl)
    routed = route(built, rows, OWNERS)
    residency = {(p, w): (1, 0) for p, o in enumerate(OWNERS) for w in o}
    ctx = JoinContext(strategy, mode, residency)
    out = []
    for worker in range(W):
        stream = [(w, rec) for w, rec in routed if w == worker]
        out += list(join(ctx, worker, static_of(built, OWNERS, worker) + stream))

    loads = {(r.partition, r.worker): r for r in out if isinstance(r, PartitionLoad)}
    sent = defaultdict(int)
    for w, rec in routed:
        if isinstance(rec, Items):
            sent[rec.partition, w] += len(rec.keys)
    assert {k: r.items for k, r in loads.items()} == dict(sent)  # one load per (p, owner)
    assert {w for p, w in loads if p == 0} == {0, 1, 2}
    presence = np.concatenate([r.keys for r in out if isinstance(r, Presence)])
    keys, offsets, sub_ids = merge(presence, [r.partial for r in out if isinstance(r, Matched)],
                                   built.disjoint_ids())
    order = np.argsort([(r.partition << SHIFT) | r.offset for r in rows])
    want_keys, want_offsets, want_ids = oracle_match(
        wl.subscriptions,
        np.array([(r.partition << SHIFT) | r.offset for r in rows])[order],
        wl.publications.geoms[order])
    assert keys.tolist() == want_keys.tolist()
    assert offsets.tolist() == want_offsets.tolist() and sub_ids.tolist() == want_ids.tolist()
    if mode == "STAL":  # each owner holds its own copy of a replicated partition
        assert set(resident_partitions()) == set(sent)


def test_a_removed_replica_is_dropped_by_its_former_owner_and_a_new_one_built(wl):
    built = build_strategy("sPIS", wl.subscriptions, len(OWNERS))
    rows = rows_of(wl)
    residency = {(p, w): (1, 0) for p, o in enumerate(OWNERS) for w in o}
    routed = route(built, rows, OWNERS, presence=False)
    for worker in range(W):
        list(join(JoinContext("sPIS", "STAL", residency), worker,
                  static_of(built, OWNERS, worker) + [r for r in routed if r[0] == worker]))
    assert (0, 2) in resident_partitions() and (1, 2) in resident_partitions()
    # epoch 4: p0 loses owner 2, p1 gains owner 1 (its new copy resident since epoch 4)
    owners = list(OWNERS)
    owners[0], owners[1] = (0, 1), (0, 2, 1)
    residency = {(p, w): residency.get((p, w), (1, 4)) for p, o in enumerate(owners) for w in o}
    routed = route(built, rows, owners, presence=False)
    out = list(join(JoinContext("sPIS", "STAL", residency), 1,
                    static_of(built, owners, 1) + [r for r in routed if r[0] == 1]))
    builds = {r.partition: r.index_builds for r in out if isinstance(r, PartitionLoad)}
    assert builds[1] == 1 and builds[0] == 0  # the new replica built, the kept one resident
    held = resident_partitions()
    assert (0, 2) not in held and held[(1, 1)] == (1, 4)


# --- commands and the owners state ---------------------------------------------------------

def command(epoch, assignment, replicas=()):
    return codec().encode("RebalanceCommand", {
        "epoch": epoch, "assignment": list(assignment), "moves": [], "mldc_before": 1.0,
        "mldc_predicted": 0.1, "metric": "LB", "reason": "test", "time": 0, "app_id": "",
        "replicas": [{"partition": p, "workers": list(w)} for p, w in replicas]})


def test_the_app_takes_a_commands_owners_and_rejects_replicas_that_do_not_fit(caplog):
    channel = ControlChannel({}, "control", "geops", 4, 2)
    cmd = channel.check(command(2, [0, 0, 1, 1], [(1, (0, 1))]), 1, "here")
    assert cmd is not None and cmd.owners == ((0,), (0, 1), (1,), (1,))
    assert channel.check(command(3, [0, 0, 1, 1]), 1, "here").owners == ((0,), (0,), (1,), (1,))
    caplog.set_level(logging.WARNING, "geops.app.control")
    for replicas, reason in [([(1, (1, 0))], "must start with its owner 0"),
                             ([(1, (0, 0))], "not repeat a worker"),
                             ([(1, (0, 2))], "replica worker ids [2] outside 0..1"),
                             ([(7, (0, 1))], "replica of partition 7 outside 0..3")]:
        assert channel.check(command(4, [0, 0, 1, 1], replicas), 1, "here") is None
        assert reason in caplog.records[-1].getMessage()
    assert channel.ignored == 4

    state = BatchState(2, list(cmd.owners))
    assert state.assignment == [0, 0, 1, 1] and state.replicas() == {1: (0, 1)}


def test_shipping_plan_sends_each_new_owner_one_copy():
    old = [(0,), (0, 1), (1,), (0,), (1, 0)]
    new = [(1,), (0,), (1, 0), (0, 1), (0, 1)]
    assert shipping_plan(old, new) == {
        (0, 0): [1],   # a plain move: from the owner that gives it up
        (2, 1): [0],   # a new replica: from the owner that keeps it
        (3, 0): [1],
    }  # p1 loses a replica, p4 only swaps its primary: nothing to ship
    assert shipping_plan([(0,), (2, 1)], [(1, 2), (0, 1)]) == {(0, 0): [1, 2], (1, 2): [0]}


class FakeRDD:
    """Just what StaticSide calls on an RDD, in memory; ``by_worker`` only when partitioned."""

    def __init__(self, records, log):
        self.records, self.log = list(records), log

    def partitionBy(self, n, f):  # Spark's name
        assert all(0 <= f(k) < n for k, _ in self.records)
        return FakeRDD(self.records, self.log)

    def map(self, f):
        return FakeRDD(map(f, self.records), self.log)

    def flatMap(self, f):
        return FakeRDD([r for rec in self.records for r in f(rec)], self.log)

    def filter(self, f):
        return FakeRDD(filter(f, self.records), self.log)

    def distinct(self):
        return FakeRDD(dict.fromkeys(self.records), self.log)

    def collect(self):
        return list(self.records)

    def persist(self, level):
        self.log.append("cached")
        return self

    def count(self):
        return len(self.records)

    def unpersist(self):
        pass


@pytest.fixture
def fake_sc():
    log: list[str] = []
    return types.SimpleNamespace(parallelize=lambda recs, n: FakeRDD(recs, log), log=log)


def held(static: StaticSide) -> dict[int, list[int]]:
    """worker -> the partitions whose static records are keyed to it this batch."""
    out = defaultdict(list)
    for w, rec in static.for_batch().records:
        out[w].append(rec.partition)
    return {w: sorted(ps) for w, ps in sorted(out.items())}


SUBS = generate_workload(seed=2, subscriptions=10, publications=1).subscriptions
# partition p holds the first p + 1 subscriptions: four payloads of different sizes
PAYLOADS = [payload_codec.encode(SUBS.take(np.arange(p + 1))) for p in range(4)]
SPEC = types.SimpleNamespace(num_partitions=4)


def fake_build(sc, spec, workers, targets, partition_func):
    """What ``build_payloads`` gives, from ``PAYLOADS`` instead of the subscriptions topic."""
    return sc.parallelize([(t, StaticPartition(p, PAYLOADS[p])) for p in range(4)
                           for t in targets(p)], workers).partitionBy(workers, partition_func)


def static_side(sc, join: str, owners) -> StaticSide:
    return StaticSide(sc, SPEC, join, 2, owners, 0, build=fake_build)


def test_stal_ships_a_new_replica_once_and_drops_a_removed_one(fake_sc):
    static = static_side(fake_sc, "STAL", [(0,), (0,), (1,), (1,)])
    assert held(static) == {0: [0, 1], 1: [2, 3]}
    move = static.apply([(0, 1), (0,), (1,), (1,)], 2)  # p0 replicated on worker 1
    assert (move.partitions, move.bytes, move.dropped) == ([0], len(PAYLOADS[0]), [])
    assert held(static) == {0: [0, 1], 1: [0, 2, 3]}
    assert static.residency()[0, 1] == (1, 2) and static.residency()[0, 0] == (1, 0)

    cached = len(fake_sc.log)
    assert static.apply([(1, 0), (0,), (1,), (1,)], 3).partitions == []  # primary swap only
    assert len(fake_sc.log) == cached  # nothing re-partitioned
    assert static.residency()[0, 1] == (1, 2)

    move = static.apply([(1,), (1,), (1,), (1,)], 4)  # p0's replica on 0 removed, p1 moved
    assert (move.partitions, move.bytes, move.dropped) == ([1], len(PAYLOADS[1]),
                                                           [(0, 0), (1, 0)])
    assert held(static) == {1: [0, 1, 2, 3]}
    assert set(static.residency()) == {(0, 1), (1, 1), (2, 1), (3, 1)}

    # folding subscription changes (where the payloads live) keeps every copy
    delta = PartitionDelta.of(7, SUBS.take(np.arange(5, 7)), SUBS.ids[:1].copy())
    static.rebase({0: (delta,)}, seq=7)
    folded = fold_deltas(PAYLOADS[0], [delta])
    assert static.base_seq[0] == 7 and static.sizes[0] == len(PAYLOADS[0])  # not measured yet
    static.measured({r.partition: len(r.payload) for _, r in static.for_batch().records})
    assert static.sizes[0] == len(folded) and not static._replaced
    static.apply([(1, 0), (1,), (1,), (1,)], 5)
    assert held(static) == {0: [0], 1: [0, 1, 2, 3]}
    assert [r.payload for w, r in static.for_batch().records if r.partition == 0] == [folded] * 2


def test_strl_ships_a_replicated_partition_to_each_owner_every_batch(fake_sc):
    static = static_side(fake_sc, "STRL", [(0,), (0, 1), (1,), (1,)])
    assert held(static) == {0: [0, 1], 1: [1, 2, 3]}
    move = static.apply([(0,), (0,), (1, 0), (1,)], 1)
    assert (move.partitions, move.bytes, move.dropped) == ([2], 0, [(1, 1)])
    assert held(static) == {0: [0, 1, 2], 1: [2, 3]}
