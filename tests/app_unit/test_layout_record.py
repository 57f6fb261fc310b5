"""The PartitionLayout record the app writes: the partitioner's cells cut at the extent."""

from __future__ import annotations

import numpy as np
import pytest
import shapely

from app.metrics import layout_record
from geops.model import Envelopes
from geops.strategies.strategy import Layout
from geops.workload import generate_workload
from schemas import codec


@pytest.fixture(scope="module")
def envelopes() -> Envelopes:
    return Envelopes.of(generate_workload(seed=2, subscriptions=300, publications=10)
                        .subscriptions)


@pytest.mark.parametrize("partitioner", ["kdbtree", "quadtree", "grid"])
def test_cells_tile_the_extent_and_hold_every_subscription_centre(envelopes, partitioner):
    layout = Layout("sPIS", envelopes, 8, partitioner)
    rec = layout_record("a", layout, 2, layout.partition_sizes(), 123)
    assert codec().decode(codec().encode("PartitionLayout", rec)) == ("PartitionLayout", rec)
    p = layout.num_partitions
    cells = np.array(rec["cells"]).reshape(p, 4)
    b = envelopes.bounds
    assert rec["extent"] == [b[:, 0].min(), b[:, 1].min(), b[:, 2].max(), b[:, 3].max()]
    assert np.isfinite(cells).all()
    x0, y0, x1, y1 = rec["extent"]
    # the cells cover the extent without overlap: their areas add up to its area
    area = ((cells[:, 2] - cells[:, 0]) * (cells[:, 3] - cells[:, 1])).sum()
    assert area == pytest.approx((x1 - x0) * (y1 - y0))
    # each cell is the partitioner's, cut: a point inside it is placed in that partition
    centres = np.column_stack([(cells[:, 0] + cells[:, 2]) / 2,
                               (cells[:, 1] + cells[:, 3]) / 2])
    items, pids = layout.partitioner.place(shapely.points(centres))
    assert pids[np.argsort(items)].tolist() == list(range(p))
    assert rec["subscriptions"] == layout.partition_sizes().tolist()
    assert (rec["partitions"], rec["workers"], rec["partitioner"]) == (p, 2, partitioner)


def test_hash_partitions_have_no_cells(envelopes):
    layout = Layout("RIhPS", envelopes, 6)
    rec = layout_record("a", layout, 3, layout.partition_sizes(), 0)
    assert rec["partitioner"] == "hash" and rec["cells"] == []
    assert rec["partitions"] == 6 and len(rec["subscriptions"]) == 6


def test_geops_tail_prints_it_on_one_line(envelopes):
    from cli.render import to_text

    layout = Layout("sPIS", envelopes, 8, "grid")
    line = to_text("PartitionLayout", layout_record("a", layout, 2, np.arange(8) * 1000, 0))
    assert line.startswith("layout of app a: 8 grid partitions (sPIS, 2 workers) over [")
    assert line.endswith("subscriptions [0, 1,000, 2,000, 3,000, 4,000, 5,000, 6,000, 7,000]")
