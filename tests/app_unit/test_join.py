"""A join task outside Spark: the stream items and static partitions of each worker, matched,
with the named records it returns (``app.records``)."""

from __future__ import annotations

import types

import numpy as np
import pytest

import app.batch.tasks
from app.batch.tasks import (
    JoinContext,
    Record,
    RouteContext,
    decode_route,
    join,
    resident_partitions,
)
from app.records import (
    Busy,
    Items,
    Matched,
    PartitionLoad,
    Presence,
    ReadStats,
    StaticPartition,
)
from geops.oracle import oracle_match
from geops.strategies import build_strategy, merge
from geops.workload import generate_workload
from schemas import codec
from schemas.records import publication_records


@pytest.fixture(autouse=True)
def no_resident_partitions():
    app.batch.tasks._RESIDENT.clear()
    yield
    app.batch.tasks._RESIDENT.clear()


def _routed(built, pubs) -> tuple[tuple[int, ...], list[Record], list]:
    """(assignment: partitions alternate between workers 0 and 1, the publications' records,
    what the stream-side task routes of them)."""
    assignment = tuple(p % 2 for p in range(built.num_partitions))
    rows = [Record("pubs", 0, i, None, codec().encode("Publication", r))
            for i, r in enumerate(publication_records(pubs))]
    ctx = RouteContext(router=types.SimpleNamespace(value=built.router()),
                       assignment=assignment, workers=2, with_presence=True,
                       dead_letter_topic="dead")
    return assignment, rows, list(decode_route(ctx, rows))


@pytest.mark.parametrize(("strategy", "mode"), [("sPIS", "STAL"), ("RIsPS", "STRL")])
def test_the_workers_join_tasks_find_the_oracles_matches(strategy, mode) -> None:
    wl = generate_workload(seed=5, subscriptions=200, publications=300)
    built = build_strategy(strategy, wl.subscriptions, 8)
    assignment, rows, routed = _routed(built, wl.publications)
    residency = {(p, assignment[p]): (1, 0) for p in range(built.num_partitions)}
    join_ctx = JoinContext(strategy, mode, residency)
    out = []
    for worker in (0, 1):
        static = [(worker, StaticPartition(p, built.partition_payload(p)))
                  for p in range(built.num_partitions) if assignment[p] == worker]
        stream = [(w, rec) for w, rec in routed if w == worker]
        got = list(join(join_ctx, worker, static + stream))
        assert isinstance(got[-1], Busy) and got[-1].worker == worker
        out += got

    loads = [r for r in out if isinstance(r, PartitionLoad)]
    items = {}
    for _, rec in routed:
        if isinstance(rec, Items):
            items[rec.partition] = items.get(rec.partition, 0) + len(rec.keys)
    assert {load.partition: load.items for load in loads} == items
    assert all(load.worker == assignment[load.partition] and load.index_builds == 1
               for load in loads)
    assert all((load.static_bytes > 0) == (mode == "STRL") for load in loads)
    assert sum(r.records for r in out if isinstance(r, ReadStats)) == len(rows)
    presence = np.concatenate([r.keys for r in out if isinstance(r, Presence)])

    keys, offsets, sub_ids = merge(presence, [r.partial for r in out if isinstance(r, Matched)],
                                   built.disjoint_ids())
    want_keys, want_offsets, want_ids = oracle_match(wl.subscriptions, np.arange(len(rows)),
                                                     wl.publications.geoms)
    assert keys.tolist() == want_keys.tolist()
    assert offsets.tolist() == want_offsets.tolist() and sub_ids.tolist() == want_ids.tolist()
    if mode == "STAL":  # the built indexes stay in this process for the next batch
        assert set(resident_partitions()) == set(residency)


class _Change:
    """A change's broadcast as a join task sees it (``value``), counting the loads."""

    def __init__(self, deltas):
        self._deltas, self.loads = deltas, 0

    @property
    def value(self):
        self.loads += 1
        return self._deltas


def test_a_resident_partition_applies_each_broadcast_change_once() -> None:
    """Two batches with subscription changes pending (``app.static.broadcasts``): each batch
    matches as the oracle over the set as of its changes, and in the second the resident
    partitions apply only the new change: the first one's broadcast is not loaded again."""
    from geops.model import Subscriptions
    from geops.strategies.churn import LiveSubscriptions

    wl = generate_workload(seed=5, subscriptions=200, publications=300)
    pool = generate_workload(seed=9, subscriptions=100, publications=10).subscriptions
    built = build_strategy("sPIS", wl.subscriptions, 8)
    live = LiveSubscriptions(built, wl.subscriptions)
    assignment, rows, routed = _routed(built, wl.publications)
    residency = {(p, assignment[p]): (1, 0) for p in range(built.num_partitions)}
    static = {w: [(w, StaticPartition(p, built.partition_payload(p)))
                  for p in range(built.num_partitions) if assignment[p] == w] for w in (0, 1)}
    changes = {}
    for seq, rows_ in ((1, np.arange(0, 50)), (2, np.arange(50, 100))):
        live.apply(Subscriptions(np.r_[wl.subscriptions.ids[rows_[:20]], 5000 + rows_[20:]],
                                 pool.geoms[rows_], pool.relations[rows_]),
                   wl.subscriptions.ids[100 + rows_[:10]])
        changes[seq] = _Change({p: ds[-1] for p, ds in live.pending.items()
                                if ds[-1].seq == seq})
        join_ctx = JoinContext("sPIS", "STAL", residency, (0,) * built.num_partitions,
                               {p: tuple(d.seq for d in ds) for p, ds in live.pending.items()},
                               dict(changes))
        loads_before = changes[1].loads
        out = [rec for w in (0, 1)
               for rec in join(join_ctx, w, static[w] + [(v, r) for v, r in routed if v == w])]
        presence = np.concatenate([r.keys for r in out if isinstance(r, Presence)])
        keys, offsets, sub_ids = merge(presence,
                                       [r.partial for r in out if isinstance(r, Matched)],
                                       live.disjoint_ids())
        want = oracle_match(live.subscriptions(), np.arange(len(rows)), wl.publications.geoms)
        assert keys.tolist() == want[0].tolist() and offsets.tolist() == want[1].tolist()
        assert sub_ids.tolist() == want[2].tolist()
        builds = sum(r.index_builds for r in out if isinstance(r, PartitionLoad))
        if seq == 1:
            assert builds == len(residency) and changes[1].loads > 0
        else:  # resident: no rebuild, and change 1 was not loaded again
            assert builds == 0 and changes[1].loads == loads_before
            assert changes[2].loads > 0
