"""The app on Apache Kafka and a local Spark session: matches equal the oracle, for every
strategy and join, with replicated partitions in force and changing mid-stream.

Each run starts with a command on the control topic that replicates the three busiest partitions
on both workers; the publications are written while the app runs, and between them a command
replicates a fourth partition (and moves another), then one removes that replica and one of
the first. Every publication is answered once with the oracle's matches (about 10 % of the
subscriptions are DISJOINT); each batch reports one load per (partition, owner) of its epoch,
and a replicated partition's items are split among its owners.

Also checks what the metrics say about the static side: in STAL a partition's index is built
once per residency on each owner (per Python worker process that joins it), not once per batch,
and no static data is shipped; a new replica is shipped once (MoveReport); in STRL every
partition that gets items is shipped to each owner and rebuilt every batch.
"""

from __future__ import annotations

import logging
from collections import Counter, defaultdict

import pytest

from geops.strategies import build_strategy
from kafkaio.sender import Sender
from schemas.assignment import command_fields
from tests.app.conftest import matches, metrics, run_app
from tests.app.live import load_subscriptions_only
from tests.app.replicas import P, SteppedProducer, busiest, replica_command, replica_plan

pytestmark = [pytest.mark.integration, pytest.mark.slow]


# Every strategy once, each join twice; tests/app/test_app_subscription_churn.py runs the other
# four pairs. Batches of 250 records run in one stage (app.read.ranges) under STAL; under STRL in
# two, the app's read tasks reading them; sPIS STAL runs every batch through the connector's
# read stage (--one-stage-records 0 --large-batch-read connector).
@pytest.mark.parametrize(("strategy", "join", "flags"), [
    ("sPS", "STRL", ()),
    ("sPIS", "STAL", ("--one-stage-records", "0", "--large-batch-read", "connector")),
    ("RIhPS", "STRL", ()), ("RIsPS", "STAL", ())])
def test_matches_equal_oracle_with_replicas_added_and_removed(strategy, join, flags, workload,
                                                              kafka_cfg, caplog):
    built = build_strategy(strategy, workload.subs, P, "kdbtree")
    plan = replica_plan(busiest(built.router(), workload.pubs))
    load_subscriptions_only(kafka_cfg, workload.subs)
    s = Sender(kafka_cfg.kafka_client())
    # in force at start
    s.send(kafka_cfg.topic("control"), replica_command(1, plan.owners[1]), key=b"geops")
    s.close()
    n = len(workload.pubs)
    producer = SteppedProducer(kafka_cfg, workload.pubs, [
        (n // 3, 2, replica_command(2, plan.owners[2])),
        (2 * n // 3, 3, replica_command(3, plan.owners[3]))]).start()
    with caplog.at_level(logging.INFO, logger="geops.app"):
        assert run_app("--strategy", strategy, "--join", join, "--partitions", str(P),
                       "--max-records-per-trigger", "250", "--stop-after-idle", "3s",
                       *flags) == 0
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("batch ")
             and " records, " in r.getMessage()]
    read = ("one stage" if join == "STAL" and not flags
            else "read by the connector" if flags else "two stages, read directly")
    assert lines and all(read in line for line in lines), lines[:3]
    producer.join()

    got = matches(kafka_cfg)
    # no replays in a clean run: one record per matched publication
    assert all(len(v) == 1 for v in got.values())
    assert {k: v[0] for k, v in got.items()} == workload.oracle

    m = metrics(kafka_cfg)
    summaries = m["BatchSummary"]
    assert sum(s["records"] for s in summaries) == n
    assert sum(s["dead_letters"] for s in summaries) == 0
    assert sum(s["matched_publications"] for s in summaries) == len(workload.oracle)
    assert len(summaries) >= 6
    epochs = [s["epoch"] for s in summaries]
    assert epochs == sorted(epochs) and set(epochs) == {1, 2, 3}
    print(f"\n{strategy} {join}: {len(summaries)} batches, per epoch "
          f"{dict(sorted(Counter(epochs).items()))}")
    epoch_of = {s["batch_id"]: s["epoch"] for s in summaries}
    for s in summaries:
        assert s["replicas"] == command_fields(plan.owners[s["epoch"]])[1]

    # one load per (partition, owner) of the epoch in force, every batch
    loads = m["PartitionLoad"]
    assert all(r["epoch"] == epoch_of[r["batch_id"]] for r in loads)
    per_batch = defaultdict(set)
    for r in loads:
        per_batch[r["batch_id"]].add((r["partition"], r["worker"]))
    for batch, held in per_batch.items():
        owners = plan.owners[epoch_of[batch]]
        assert held == {(p, w) for p, o in enumerate(owners) for w in o}
    # a replicated partition's items are split among its owners
    items = Counter()
    for r in loads:
        items[r["epoch"], r["partition"], r["worker"]] += r["items"]
    for epoch, owners in plan.owners.items():
        for p, o in enumerate(owners):
            total = sum(items[epoch, p, w] for w in o)
            if len(o) > 1 and total >= 40:
                assert all(items[epoch, p, w] >= total / 4 for w in o), (epoch, p, items)
    assert all(items[e, p, w] for e in (1, 2) for p in plan.first for w in (0, 1))

    # a new replica ships once, a removed one ships nothing
    moves = {r["epoch"]: r for r in m.get("MoveReport", [])}
    assert sorted(moves) == [2, 3]
    assert moves[2]["partitions_moved"] == sorted([plan.added, plan.moved])
    assert moves[3]["partitions_moved"] == []
    shipped = sum(len(built.partition_payload(p)) for p in (plan.added, plan.moved))
    assert moves[2]["bytes"] == (shipped if join == "STAL" else 0)
    assert moves[3]["bytes"] == 0

    with_items = [r for r in loads if r["items"]]
    assert all(r["processing_ns"] > 0 for r in with_items)
    if join == "STAL":
        # residency of (partition, owner): the epoch since which the owner holds it
        since = {}
        for epoch in sorted(plan.owners):
            for p, o in enumerate(plan.owners[epoch]):
                for w in o:
                    if w not in plan.owners.get(epoch - 1, [()] * P)[p]:
                        since[epoch, p, w] = epoch
                    else:
                        since[epoch, p, w] = since[epoch - 1, p, w]
        builds = Counter()
        batches_with_items = Counter()
        for r in loads:
            residency = (r["partition"], r["worker"], since[r["epoch"], r["partition"],
                                                            r["worker"]])
            builds[residency] += r["index_builds"]
            batches_with_items[residency] += bool(r["items"])
        assert all(r["static_bytes"] == 0 for r in loads)
        # Built at most once per Python worker process that served it (local[2]: a few),
        # while partitions are used in many batches.
        assert max(builds.values()) <= 3
        assert sum(builds.values()) < sum(batches_with_items.values()) / 2
        # the new owners built what reached them
        for p, w in [(plan.added, 1 - plan.owners[1][plan.added][0]),
                     (plan.moved, plan.owners[2][plan.moved][0])]:
            assert builds[p, w, 2] >= 1 or not batches_with_items[p, w, 2]
    else:
        assert all(r["index_builds"] == 1 and r["static_bytes"] > 0 for r in with_items)
        shipped_sizes = defaultdict(set)
        for r in with_items:
            shipped_sizes[r["partition"]].add(r["static_bytes"])
        assert all(len(sizes) == 1 for sizes in shipped_sizes.values())  # the whole partition
