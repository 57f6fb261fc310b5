"""A batch's task output gathered by record type (``app.batch.collect``)."""

from __future__ import annotations

import numpy as np

from app.batch.collect import Collected
from app.records import (
    Busy,
    Matched,
    PartitionLoad,
    Payloads,
    Positions,
    Presence,
    ReadStats,
    StaticPartition,
)


def arr(*values: int) -> np.ndarray:
    return np.array(values, np.int64)


def test_every_record_reaches_its_collector() -> None:
    out = [
        Matched(0, "partial-0", arr(1, 2), arr(11, 12), arr(100, 200)),
        Presence(arr(3), arr(13), arr(300)),
        PartitionLoad(1, 1, items=5),
        Positions(arr(1), arr(11), np.array(["o"], object), arr(100)),
        ReadStats(7, 2), ReadStats(3, 1),
        Busy(0, 50), Busy(1, 80),
        Payloads(0, {0: 10}), Payloads(1, {1: 20}),
        StaticPartition(0, b"kept by no collector"),
    ]
    got = Collected.of(out, [(0,), (1, 0)])
    assert got.partials == ["partial-0"]
    assert [k.tolist() for k in got.known_keys] == [[1, 2], [3]]
    assert [t.tolist() for t in got.known_times] == [[100, 200], [300]]
    assert sorted(got.loads) == [(0, 0), (1, 0), (1, 1)]  # every owner of each partition
    assert got.loads[(1, 1)].items == 5 and got.loads[(1, 0)].items == 0
    assert len(got.positions) == 1
    assert (got.records, got.dead, got.busiest_ns) == (10, 3, 80)
    assert got.sizes == {0: 10, 1: 20}
