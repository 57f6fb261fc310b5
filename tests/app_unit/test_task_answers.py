"""Join tasks that write their own matches (``app.batch.answers``, ``app.batch.task_output``),
outside Spark: what the tasks answer alone and what the driver merges of the shared
publications are, together, the oracle's matches, each publication answered once."""

from __future__ import annotations

import types

import numpy as np
import pytest

import app.batch.tasks
from app.batch.answers import span_records
from app.batch.runner import _without
from app.batch.task_output import TaskOutput, written_header, written_keys
from app.batch.tasks import JoinContext, Record, RouteContext, decode_route, join
from app.records import Matched, PartitionLoad, Presence, Shared, Unrouted, Wrote
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


def _output(disjoint: np.ndarray) -> TaskOutput:
    return TaskOutput("at-least-once", {}, 1.0, "", "", 7, 0, "app", "m", "x", disjoint)


@pytest.mark.parametrize(("strategy", "mode", "replicas"),
                         [("sPIS", "STAL", {}), ("RIsPS", "STRL", {}),
                          ("sPIS", "STAL", {3: (1, 0)})])
def test_tasks_and_driver_together_answer_each_publication_once(monkeypatch, strategy, mode,
                                                                replicas) -> None:
    wl = generate_workload(seed=5, subscriptions=200, publications=300)
    built = build_strategy(strategy, wl.subscriptions, 8)
    assignment = tuple(p % 2 for p in range(built.num_partitions))
    rows = [Record("pubs", 0, i, None, codec().encode("Publication", r))
            for i, r in enumerate(publication_records(wl.publications))]
    route = RouteContext(router=types.SimpleNamespace(value=built.router()),
                         assignment=assignment, workers=2, with_presence=True,
                         dead_letter_topic="dead", replicas=replicas, spans=True)
    routed = list(decode_route(route, rows))
    assert any(isinstance(r, Shared) for _, r in routed)
    written: list[tuple] = []

    def capture(out, worker, keys, ids, times, offsets, sub_ids, loads):
        written.append((keys, offsets, sub_ids))
        assert loads and all(load.worker == worker for load in loads)
        return Wrote(worker, len(keys), np.zeros(len(keys), np.int64),
                     tuple((load.partition, load.worker) for load in loads))

    monkeypatch.setattr(app.batch.tasks, "write_matches", capture)
    residency = {(p, w): (1, 0) for p in range(built.num_partitions)
                 for w in replicas.get(p, (assignment[p],))}
    ctx = JoinContext(strategy, mode, residency, output=_output(built.disjoint_ids()))
    out = []
    for worker in (0, 1):
        static = [(worker, app.records.StaticPartition(p, built.partition_payload(p)))
                  for p in range(built.num_partitions)
                  if worker in replicas.get(p, (assignment[p],))]
        out += list(join(ctx, worker, static + [(w, r) for w, r in routed if w == worker]))
    assert sum(isinstance(r, Wrote) for r in out) == 2
    assert sum(isinstance(r, PartitionLoad) for r in out) >= 2
    presence = [r.keys for r in out if isinstance(r, Presence)]
    shared = merge(np.concatenate([np.empty(0, np.int64), *presence]),
                   [r.partial for r in out if isinstance(r, Matched)], built.disjoint_ids())
    parts = [*written, shared]
    keys = np.concatenate([k for k, _, _ in parts])
    assert len(np.unique(keys)) == len(keys), "a publication answered twice"
    got = {int(k): sorted(s[o[i]:o[i + 1]].tolist()) for k, o, s in parts
           for i, k in enumerate(k)}
    want_keys, want_offsets, want_ids = oracle_match(wl.subscriptions, np.arange(len(rows)),
                                                     wl.publications.geoms)
    want = {int(k): want_ids[want_offsets[i]:want_offsets[i + 1]].tolist()
            for i, k in enumerate(want_keys)}
    assert got == want
    assert 0 < len(shared[0]) < len(want)  # both sides answered some


def test_span_records_name_one_answerer_per_publication() -> None:
    """Items of publication 0 on worker 0 only, 1 on both, 2 nowhere, 3 a position on worker
    1: 1 and 3 are shared (Presence to ``key mod 2``), 2 is worker 0's ``Unrouted``."""
    keys = np.array([10, 11, 12, 13], np.int64)
    pub_index = np.array([0, 0, 1, 1, 3])
    workers = np.array([0, 0, 0, 1, 1])
    got = list(span_records(pub_index, workers, keys, keys * 2, keys * 3, np.array([3]), 2, True))
    shared = {w: r.keys.tolist() for w, r in got if isinstance(r, Shared)}
    assert shared == {0: [11], 1: [11, 13]}
    presence = {w: r.keys.tolist() for w, r in got if isinstance(r, Presence)}
    assert presence == {1: [11, 13]}
    unrouted = {w: r.keys.tolist() for w, r in got if isinstance(r, Unrouted)}
    assert unrouted == {0: [12]}


def test_the_written_header_names_the_keys() -> None:
    keys = np.array([(1 << 40) | 5, 3, 4, 9, (2 << 40)], np.int64)
    assert written_keys([written_header(keys)]).tolist() == sorted(keys.tolist())
    assert written_keys(None).tolist() == []


def test_without_leaves_out_the_given_publications() -> None:
    keys, offsets, subs = np.array([1, 2, 3]), np.array([0, 2, 3, 5]), np.array([7, 8, 9, 1, 2])
    k, o, s = _without(keys, offsets, subs, np.array([2]))
    assert k.tolist() == [1, 3] and o.tolist() == [0, 2, 4] and s.tolist() == [7, 8, 1, 2]
