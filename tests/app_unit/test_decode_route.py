"""The stream side of a read task, outside Spark: decode, key, route (valid records only;
dead letters need a broker and are covered by tests/app/test_app_control.py)."""

from __future__ import annotations

import types

import numpy as np
import pytest
import shapely

from app.records import Items, Presence, ReadStats
from app.tasks import (
    KEY_PARTITION_SHIFT,
    ReadColumns,
    Record,
    RouteContext,
    decode_route,
    decode_route_arrow,
    routed_item,
)
from geops.strategies import build_strategy
from geops.workload import generate_workload
from schemas import codec
from schemas.records import publication_records


@pytest.mark.parametrize("strategy", ["sPS", "RIsPS"])
def test_every_publication_reaches_the_owners_of_its_partitions(strategy):
    wl = generate_workload(seed=3, subscriptions=300, publications=500)
    built = build_strategy(strategy, wl.subscriptions, 8)
    router = built.router()
    records = list(publication_records(wl.publications))
    rows = [Record("pubs", i % 3, 1000 + i, None, codec().encode("Publication", r))
            for i, r in enumerate(records)]
    assignment = tuple(p % 2 for p in range(built.num_partitions))
    ctx = RouteContext(router=types.SimpleNamespace(value=router), assignment=assignment,
                       workers=2, with_presence=True, dead_letter_topic="dead")
    out = list(decode_route(ctx, iter(rows)))

    assert out[0] == (0, ReadStats(len(rows), 0))
    by_key = {(row.partition << KEY_PARTITION_SHIFT) | row.offset: rec
              for row, rec in zip(rows, records, strict=True)}
    expected = router.route(wl.publications.geoms)
    want = sorted((int(p), int(records[i]["id"])) for i, p in
                  zip(expected.pub_index, expected.partition, strict=True))
    got, present = [], []
    for worker, rec in out[1:]:
        if isinstance(rec, Presence):
            present += rec.keys.tolist()
            assert (rec.keys % 2 == worker).all()
            continue
        assert isinstance(rec, Items) and worker == assignment[rec.partition]
        pid = rec.partition
        assert rec.keys.dtype == np.int64
        for key, pub_id, wkb, t in zip(rec.keys.tolist(), rec.ids.tolist(), rec.wkbs,
                                       rec.event_ms.tolist(), strict=True):
            src = by_key[key]
            assert (pub_id, t) == (src["id"], src["event_time"])
            assert shapely.equals(shapely.from_wkb(wkb), shapely.from_wkb(src["geometry"]))
            got.append((pid, pub_id))
    assert sorted(got) == want
    assert sorted(present) == sorted(by_key)


def _arrow_batches(rows: list[Record], size: int) -> list:
    """The connector's columns of ``rows`` in Arrow batches of ``size`` records."""
    import pyarrow as pa

    cols = {f: [getattr(r, f) for r in rows] for f in Record._fields}
    types_ = {"topic": pa.string(), "partition": pa.int32(), "offset": pa.int64(),
              "key": pa.binary(), "value": pa.binary()}
    table = pa.table({f: pa.array(v, types_[f]) for f, v in cols.items()})
    return table.to_batches(max_chunksize=size)


def test_the_arrow_path_routes_as_the_record_path_does():
    """mapInArrow's function gives, row by row, the records decode_route gives; a dead
    record is whole again from the Arrow columns."""
    wl = generate_workload(seed=4, subscriptions=200, publications=300)
    built = build_strategy("sPIS", wl.subscriptions, 8)
    rows = [Record("pubs", i % 2, 7 + i, str(i).encode(), codec().encode("Publication", r))
            for i, r in enumerate(publication_records(wl.publications))]
    ctx = RouteContext(router=types.SimpleNamespace(value=built.router()),
                       assignment=tuple(p % 2 for p in range(built.num_partitions)),
                       workers=2, with_presence=True, dead_letter_topic="dead")
    want = list(decode_route(ctx, rows))
    (out,) = decode_route_arrow(ctx, iter(_arrow_batches(rows, 128)))
    got = [routed_item((w, item)) for w, item in zip(out.column("worker").to_pylist(),
                                                     out.column("item").to_pylist(),
                                                     strict=True)]
    assert len(got) == len(want) > 2
    for (gw, g), (ww, w) in zip(got, want, strict=True):
        assert gw == ww and type(g) is type(w)
        for a, b in zip(g, w, strict=True):
            assert np.array_equal(a, b) if isinstance(a, np.ndarray) else a == b
    cols = ReadColumns.of_arrow(_arrow_batches(rows, 100))
    assert cols.record(150) == rows[150]
    (empty,) = decode_route_arrow(ctx, iter([]))
    assert [routed_item(r) for r in zip(*empty.to_pydict().values(), strict=True)] == [
        (0, ReadStats(0, 0))]
