"""The static side's snapshot without Spark or Kafka: written whole, folded with changes to the
same partitions a live set holds, and refused with its one reason when it does not match."""

from __future__ import annotations

import functools
import json
from pathlib import Path

import numpy as np
import pytest

from app.static.snapshot import (
    CURRENT,
    Identity,
    keep_payload,
    new_stage,
    payload_name,
    root_of,
    verify,
)
from app.static.snapshot_writer import Built, Changed, SnapshotWriter
from geops.model import Envelopes, Subscriptions
from geops.strategies import payload
from geops.strategies.churn import LiveSubscriptions
from geops.strategies.strategy import Strategy, build_strategy
from geops.workload import generate_workload

IDENTITY = Identity("app", "subs", "id-1", "sPIS", "kdbtree", 8)


def partition_ids(data: bytes) -> list[int]:
    return payload.decode(data)[0].ids.tolist()


@functools.cache
def workload() -> tuple[Subscriptions, Strategy]:
    subs = generate_workload(seed=5, subscriptions=200, publications=1).subscriptions
    return subs, build_strategy("sPIS", subs, 8)


@pytest.fixture
def written(tmp_path: Path, monkeypatch):
    """A snapshot of 200 subscriptions as a build from the topic leaves it, and its strategy."""
    monkeypatch.setattr(SnapshotWriter, "MIN_INTERVAL_S", 0.0)
    subs, strategy = workload()
    root = root_of(tmp_path)
    writer = SnapshotWriter(root, IDENTITY)
    stage = new_stage(root)
    sizes = np.zeros(strategy.num_partitions, np.int64)
    for pid in range(strategy.num_partitions):
        data = strategy.partition_payload(pid)
        keep_payload(str(stage), pid, data)  # as the executors do while they build
        sizes[pid] = len(data)
    detect = np.zeros(len(subs), np.uint8)
    detect[3] = 1
    writer.built(Built(stage, {0: 200}, Envelopes.of(subs), detect, strategy.partitioner,
                       strategy.num_partitions, sizes))
    assert writer.wait_written(1, 30)
    yield writer, strategy, subs
    writer.close()


def test_a_written_snapshot_gives_back_the_static_side(written):
    writer, strategy, subs = written
    snap, reason = verify(writer.root, IDENTITY, {0: 200})
    assert reason is None and snap is not None
    assert snap.offsets == {0: 200}
    assert snap.envelopes.ids.tolist() == sorted(subs.ids.tolist())
    assert snap.detect[3] == 1 and snap.detect.sum() == 1
    assert np.array_equal(snap.partitioner.cells, strategy.partitioner.cells)
    for pid in range(strategy.num_partitions):
        assert snap.path(pid).read_bytes() == strategy.partition_payload(pid)
    assert not [p for p in writer.root.iterdir() if p.name.startswith(".stage-")]


def test_changes_are_folded_into_the_partitions_they_touch(written):
    writer, strategy, subs = written
    live = LiveSubscriptions(strategy, subs)
    fresh = generate_workload(seed=6, subscriptions=30, publications=1).subscriptions
    ups = Subscriptions(np.arange(1000, 1030), fresh.geoms, fresh.relations)
    for upserts, deletes, ends in ((ups, subs.ids[:10], 230), (ups.take(np.arange(5)),
                                                               np.array([1001, 20]), 240)):
        result = live.apply(upserts, deletes)
        writer.changed(Changed(upserts, np.zeros(len(upserts), np.uint8), deletes,
                               result.partitions, {0: ends}))
    assert writer.wait_written(2, 30)
    snap, reason = verify(writer.root, IDENTITY, {0: 240})
    assert reason is None and snap is not None
    if snap.offsets != {0: 240}:  # the two changes went into two snapshots
        assert writer.wait_written(3, 30)
        snap, reason = verify(writer.root, IDENTITY, {0: 240})
    assert snap.offsets == {0: 240}
    assert snap.envelopes.ids.tolist() == sorted(live.subscriptions().ids.tolist())
    for pid in range(strategy.num_partitions):
        assert partition_ids(snap.path(pid).read_bytes()) == \
            live.partition_subscriptions(pid).ids.tolist()
    assert len([p for p in writer.root.iterdir() if p.name.startswith("s-")]) == 1


def _damage(snap_dir: Path) -> None:
    path = snap_dir / payload_name(2)
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


def _truncate(snap_dir: Path) -> None:
    path = snap_dir / payload_name(2)
    path.write_bytes(path.read_bytes()[:-7])


def _old_format(snap_dir: Path) -> None:
    meta = json.loads((snap_dir / "meta.json").read_text())
    (snap_dir / "meta.json").write_text(json.dumps({**meta, "format": 0}))


def _cut_description(snap_dir: Path) -> None:
    text = (snap_dir / "meta.json").read_text()
    (snap_dir / "meta.json").write_text(text[: len(text) // 2])


@pytest.mark.parametrize(("spoil", "identity", "ends", "reason"), [
    (_damage, IDENTITY, {0: 200}, "p2.bin is damaged (CRC-32"),
    (_truncate, IDENTITY, {0: 200}, "p2.bin is truncated or grown"),
    (_old_format, IDENTITY, {0: 200}, "of format 0, written by another version"),
    (_cut_description, IDENTITY, {0: 200}, "its description"),
    (None, Identity("app", "other-subs", "id-2", "sPIS", "kdbtree", 8), {0: 200},
     "written for topic 'subs', not 'other-subs', topic id 'id-1', not 'id-2'"),
    (None, Identity("app", "subs", "id-1", "RIsPS", "grid", 8), {0: 200},
     "written for strategy 'sPIS', not 'RIsPS', partitioner 'kdbtree', not 'grid'"),
    (None, IDENTITY, {0: 150}, "past those the checkpoint starts from (partition 0: 200 > 150)"),
])
def test_a_snapshot_that_does_not_match_is_named(written, spoil, identity, ends, reason):
    writer, _, _ = written
    snap, why = verify(writer.root, IDENTITY, {0: 200})
    assert why is None
    if spoil is not None:
        spoil(snap.dir)
    again, why = verify(writer.root, identity, ends)
    assert again is None and why is not None and reason in why, why


def test_no_snapshot_is_no_reason(tmp_path):
    assert verify(root_of(tmp_path), IDENTITY, {0: 1}) == (None, None)
    root_of(tmp_path).mkdir()
    (root_of(tmp_path) / CURRENT).write_text("s-gone\n")
    snap, why = verify(root_of(tmp_path), IDENTITY, {0: 1})
    assert snap is None and "cannot be read" in why


def test_a_build_whose_payloads_are_not_there_keeps_no_snapshot(tmp_path):
    root = root_of(tmp_path)
    writer = SnapshotWriter(root, IDENTITY)
    stage = new_stage(root)
    subs = workload()[0]
    writer.built(Built(stage, {0: 200}, Envelopes.of(subs), np.zeros(200, np.uint8), None, 8,
                       np.full(8, 100, np.int64)))
    assert not writer.wait_written(1, 10)
    writer.close()
    assert verify(root, IDENTITY, {0: 200}) == (None, None)


def test_the_shapes_of_fences_that_ask_for_cross_come_from_the_payloads(written):
    import shapely

    from app.static.snapshot import cross_shapes
    from geops.model import DetectKind

    writer, _, subs = written
    snap, _ = verify(writer.root, IDENTITY, {0: 200})
    asks = [int(snap.envelopes.ids[5]), int(snap.envelopes.ids[150])]
    snap.detect[[5, 150]] = int(DetectKind.CROSS) | int(DetectKind.ENTER)
    geom = dict(zip(subs.ids.tolist(), subs.geoms, strict=True))
    assert cross_shapes(snap) == {i: shapely.to_wkb(geom[i]) for i in asks}
