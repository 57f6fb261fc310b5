"""The stream side of a read task, outside Spark: decode, key, route (valid records only;
dead letters need a broker and are covered by tests/app/test_app_control.py)."""

from __future__ import annotations

import types

import numpy as np
import pytest
import shapely

from app.batch.tasks import KEY_PARTITION_SHIFT, Record, RouteContext, decode_route
from app.records import Items, Presence, ReadStats
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
