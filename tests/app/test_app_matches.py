"""The app on the embedded broker and a local Spark session: matches equal the oracle.

Also checks what the metrics say about the static side: in STAL a partition's index is built
once per residency (per Python worker process that joins it), not once per batch, and no static
data is shipped; in STRL every partition that gets items is shipped and rebuilt every batch.
"""

from __future__ import annotations

from collections import Counter, defaultdict

import pytest

from tests.app.conftest import load, matches, metrics, run_app

pytestmark = pytest.mark.integration

STRATEGIES = ("sPS", "sPIS", "RIhPS", "RIsPS")


@pytest.mark.parametrize("join", ["STAL", "STRL"])
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_matches_equal_oracle(strategy, join, workload, kafka_cfg):
    load(kafka_cfg, workload)
    assert run_app("--strategy", strategy, "--join", join,
                   "--max-records-per-trigger", "250") == 0
    got = matches(kafka_cfg)
    # no replays in a clean run: one record per matched publication
    assert all(len(v) == 1 for v in got.values())
    assert {k: v[0] for k, v in got.items()} == workload.oracle

    m = metrics(kafka_cfg)
    summaries = m["BatchSummary"]
    assert sum(s["records"] for s in summaries) == len(workload.pubs)
    assert sum(s["dead_letters"] for s in summaries) == 0
    assert sum(s["matched_publications"] for s in summaries) == len(workload.oracle)
    assert len(summaries) >= 6
    loads = m["PartitionLoad"]
    partitions = summaries[0]["partitions"]
    assert len(loads) == partitions * len(summaries)  # every partition, every batch
    with_items = [r for r in loads if r["items"]]
    assert all(r["processing_ns"] > 0 for r in with_items)
    if join == "STAL":
        builds = Counter()
        batches_with_items = Counter()
        for r in loads:
            builds[r["partition"]] += r["index_builds"]
            batches_with_items[r["partition"]] += bool(r["items"])
        assert all(r["static_bytes"] == 0 for r in loads)
        # Built at most once per Python worker process that served it (local[2]: a few),
        # while partitions are used in many batches.
        assert max(builds.values()) <= 3
        assert sum(builds.values()) < sum(batches_with_items.values()) / 2
    else:
        assert all(r["index_builds"] == 1 and r["static_bytes"] > 0 for r in with_items)
        shipped = defaultdict(set)
        for r in with_items:
            shipped[r["partition"]].add(r["static_bytes"])
        assert all(len(sizes) == 1 for sizes in shipped.values())  # the whole partition
