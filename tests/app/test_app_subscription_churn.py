"""Subscriptions change while the app runs: each batch is matched against the subscription set
as of the offsets it recorded (a versioned oracle), for every strategy and join.

A producer thread interleaves publications with subscription changes once the query runs: new
subscriptions (some DISJOINT, one far outside the partitioner's extent), updates of existing
ids to a new geometry and relation, tombstones, re-adds of removed ids, one invalid record and
one update whose distance makes no fence (both dead-lettered; the update deletes). The
expected matches of every publication are the oracle's over the set as of its batch's
``subscription_offsets``, replayed from the subscriptions topic itself.

Half the partitions are replicated on both workers from the start: a replicated
partition's items are split between its owners, so a change that reached only one copy would
show as a wrong match.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
import shapely

from app.main import checkpoint_dir, ready_path
from geops.model import Relation, Subscriptions
from geops.oracle import oracle_answers
from geops.workload import generate_workload
from kafkaio.dump import by_schema
from kafkaio.offsets import read_to_end
from kafkaio.sender import Sender
from schemas import codec
from schemas.assignment import initial_assignment
from schemas.errors import DecodeError
from schemas.records import publication_records, subscription_records
from tests.app.conftest import matches, metrics, run_app
from tests.app.live import load_subscriptions_only
from tests.app.replicas import replica_command
from tests.app.snapshots import FROM_SNAPSHOT, current, snapshot_ids

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ROUNDS = 4
PER_ROUND = 120


def change_rounds(subs: Subscriptions, seed: int):
    """Per round (upserts, tombstone ids): adds, updates, deletes and re-adds."""
    rng = np.random.default_rng(seed)
    pool = generate_workload(seed=seed + 1, subscriptions=40 * ROUNDS, publications=1)
    fresh = pool.subscriptions
    live = set(subs.ids.tolist())
    removed: list[int] = []
    next_id = 10_000
    for r in range(ROUNDS):
        take = fresh.take(np.arange(r * 40, r * 40 + 25))
        ids = np.arange(next_id, next_id + 20)
        next_id += 20
        upd = rng.choice(sorted(live), 5, replace=False)
        ids = np.concatenate([ids, upd])
        if removed and r % 2:
            ids[0] = removed.pop()  # re-add
        geoms = take.geoms.copy()
        rels = rng.integers(0, len(Relation), len(ids)).astype(np.int8)
        rels[:3] = int(Relation.DISJOINT)
        if r == 1:
            geoms[3] = shapely.box(5e5, 5e5, 5e5 + 1, 5e5 + 1)  # far outside the extent
        dels = rng.choice(sorted(live - set(upd.tolist())), 8, replace=False)
        live = (live - set(dels.tolist())) | set(ids.tolist())
        removed.extend(dels.tolist())
        yield Subscriptions(ids, geoms, rels), dels


def wait_processed(cfg, n: int, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while sum(s["records"] for s in metrics(cfg).get("BatchSummary", [])) < n:
        assert time.monotonic() < deadline, f"the app did not process {n} publications"
        time.sleep(0.3)


def produce_live(cfg, pubs, subs: Subscriptions, seed: int) -> threading.Thread:
    c = codec()
    pub_records = list(publication_records(pubs))

    def run() -> None:
        marker = ready_path(checkpoint_dir(cfg))
        while not marker.exists():
            time.sleep(0.1)
        sender = Sender(cfg.kafka_client())
        for r, (ups, dels) in enumerate(change_rounds(subs, seed)):
            for rec in pub_records[r * PER_ROUND:(r + 1) * PER_ROUND]:
                sender.send(cfg.topic("publications"), c.encode("Publication", rec),
                            key=str(rec["id"]).encode())
            sender.flush()
            wait_processed(cfg, (r + 1) * PER_ROUND)  # the next change comes between batches
            for rec in subscription_records(ups):
                sender.send(cfg.topic("subscriptions"), c.encode("Subscription", rec),
                            key=str(rec["id"]).encode())
            for sid in dels.tolist():
                sender.send(cfg.topic("subscriptions"), None, key=str(sid).encode())
            if r == 2:
                sender.send(cfg.topic("subscriptions"), b"\x00not a subscription", key=b"77")
                # a newer version of a live subscription whose distance makes no fence (no
                # detect kinds): dead-lettered, and the subscription no longer matches
                bad = {**next(subscription_records(ups.take(np.array([5])))),
                       "distance_m": 100.0}
                sender.send(cfg.topic("subscriptions"), c.encode("Subscription", bad),
                            key=str(bad["id"]).encode())
            sender.flush()
        for rec in pub_records[ROUNDS * PER_ROUND:]:
            sender.send(cfg.topic("publications"), c.encode("Publication", rec),
                        key=str(rec["id"]).encode())
        sender.close()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def subscription_set(records: list, ends: dict[str, int]) -> Subscriptions:
    """The live set after the subscriptions topic's records before ``ends``."""
    c = codec()
    latest: dict[int, tuple | None] = {}
    for msg in records:
        if msg.offset() >= ends.get(str(msg.partition()), 0):
            continue
        if msg.value() is None:
            latest[int(msg.key())] = None
            continue
        try:
            rec = c.decode_as("Subscription", msg.value())
        except DecodeError:  # the invalid record, dead-lettered by the app
            continue
        if rec["distance_m"] is not None and not rec["detect"]:  # no fence: unusable
            latest[rec["id"]] = None
            continue
        latest[rec["id"]] = (shapely.from_wkb(rec["geometry"]), int(Relation[rec["relation"]]))
    live = sorted((k, v) for k, v in latest.items() if v is not None)
    return Subscriptions(np.array([k for k, _ in live], np.int64),
                         np.array([v[0] for _, v in live], object),
                         np.array([v[1] for _, v in live], np.int8))


def versioned_oracle(cfg, summaries: list[dict], publications) -> dict[int, tuple[int, ...]]:
    """The oracle's matches of every publication over the subscription set as of the offsets
    its batch recorded (the batch found from the publication's offset and the batches' end
    offsets); a replayed batch has the same offsets, so any of its summaries will do."""
    sub_records = list(read_to_end(cfg.kafka_client(), cfg.topic("subscriptions")))
    pubs = {(m.partition(), m.offset()): int(codec().decode_as("Publication", m.value())["id"])
            for m in read_to_end(cfg.kafka_client(), cfg.topic("publications"))}
    geom_of = dict(zip(publications.ids.tolist(), publications.geoms, strict=True))
    by_batch = {s["batch_id"]: s for s in summaries}
    expected: dict[int, tuple[int, ...]] = {}
    previous: dict[str, int] = {}
    for b in sorted(by_batch):
        s = by_batch[b]
        ends = s["source_end_offsets"]
        ids = [pid for (p, o), pid in pubs.items()
               if previous.get(str(p), 0) <= o < ends.get(str(p), 0)]
        previous = ends
        live = subscription_set(sub_records, s["subscription_offsets"])
        expected.update(oracle_answers(live, np.array(ids, np.int64),
                                       np.array([geom_of[i] for i in ids], object)))
    return expected


# Each join once, with the default strategy and the hierarchical one: every strategy's handling
# of changes (apply, fold, catch up) is checked against the oracle in tests/geops/test_churn.py,
# so here the app's plumbing of changes (per batch, folds, replicas) is what is under test.
@pytest.mark.parametrize(("strategy", "join"), [("sPIS", "STRL"), ("RIhPS", "STAL")])
def test_changes_take_effect_per_batch_exactly(strategy, join, kafka_cfg, caplog):
    w = generate_workload(seed=61, subscriptions=300, publications=(ROUNDS + 1) * PER_ROUND)
    rels = w.subscriptions.relations.copy()
    rels[::10] = int(Relation.DISJOINT)
    subs = Subscriptions(w.subscriptions.ids, w.subscriptions.geoms, rels)
    load_subscriptions_only(kafka_cfg.with_overrides({"topics.publications.partitions": "2"}),
                            subs)
    owners = [(o,) if p % 2 else (o, 1 - o) for p, o in enumerate(initial_assignment(8, 2))]
    control = Sender(kafka_cfg.kafka_client())
    control.send(kafka_cfg.topic("control"), replica_command(1, owners), key=b"geops")
    control.close()
    thread = produce_live(kafka_cfg, w.publications, subs, seed=7)
    # --fold-bytes 0: changes are folded into the payloads as soon as they pass a tenth of the
    # static side, so folds (which keep the newest changes pending) happen mid-stream
    with caplog.at_level(logging.INFO, logger="geops.app"):
        assert run_app("--strategy", strategy, "--join", join, "--partitions", "8",
                       "--stop-after-idle", "4s", "--fold-bytes", "0") == 0
    thread.join(30)
    folds = sum("partitions folded" in r.getMessage() for r in caplog.records)
    assert folds, "no fold of subscription changes happened"

    m = metrics(kafka_cfg)
    assert {s["epoch"] for s in m["BatchSummary"]} == {1}
    fed = {(r["partition"], r["worker"]) for r in m["PartitionLoad"] if r["items"]}
    assert any({(p, 0), (p, 1)} <= fed for p in range(0, 8, 2)), "no replica got items"
    summaries = [s for s in m["BatchSummary"] if s["records"]]
    assert sum(s["records"] for s in summaries) == len(w.publications)
    versions = {tuple(sorted(s["subscription_offsets"].items())) for s in summaries}
    assert len(versions) >= 3, "the changes were not applied while the stream ran"
    expected = versioned_oracle(kafka_cfg, summaries, w.publications)
    got = matches(kafka_cfg)
    assert all(len(v) == 1 for v in got.values())
    assert {k: v[0] for k, v in got.items()} == expected
    dead = by_schema(kafka_cfg.kafka_client(), kafka_cfg.topic("dead_letter"))["DeadLetter"]
    assert [d["topic"] for d in dead] == [kafka_cfg.topic("subscriptions")] * 2
    assert "distance_m (100) needs detect kinds" in dead[1]["reason"], dead
    # the snapshot the app kept while the changes came is the set as of its offsets
    offsets, envelope_ids, payload_ids = snapshot_ids(
        checkpoint_dir(kafka_cfg), strategy, 8, kafka_cfg.topic("subscriptions"))
    assert offsets != {"0": len(subs)}, "no change reached the snapshot"
    at = subscription_set(list(read_to_end(kafka_cfg.kafka_client(),
                                           kafka_cfg.topic("subscriptions"))), offsets)
    assert envelope_ids == payload_ids == at.ids.tolist()
    print(f"\n{strategy} {join}: {len(summaries)} batches over {len(versions)} subscription "
          f"versions, {folds} folds; {len(expected)} publications matched")


def test_kill_9_between_a_change_and_the_next_batch(kafka_cfg, geops_env, tmp_path):
    """The driver dies after a subscription change reached Kafka and before a batch applied
    it, and more changes come while it is down; the app restarts from its static side's
    snapshot while publications arrive, and matches every batch against the set its recorded
    offsets name: the snapshot's and every change after it."""
    w = generate_workload(seed=62, subscriptions=300, publications=3 * PER_ROUND)
    subs = w.subscriptions
    load_subscriptions_only(kafka_cfg, subs)
    args = [sys.executable, "-m", "cli.main", "app", "--master", "local[2]", "--workers", "2",
            "--strategy", "sPIS", "--trigger", "200ms", "--partitions", "8",
            "--stop-after-idle", "4s"]
    env = {**os.environ, **geops_env}
    c = codec()
    records = list(publication_records(w.publications))
    checkpoint = checkpoint_dir(kafka_cfg)
    marker = ready_path(checkpoint)
    rounds = change_rounds(subs, seed=3)

    def publish(rows) -> None:
        sender = Sender(kafka_cfg.kafka_client())
        for rec in rows:
            sender.send(kafka_cfg.topic("publications"), c.encode("Publication", rec),
                        key=str(rec["id"]).encode())
        sender.close()

    def change() -> None:
        ups, dels = next(rounds)
        sender = Sender(kafka_cfg.kafka_client())
        for rec in subscription_records(ups):
            sender.send(kafka_cfg.topic("subscriptions"), c.encode("Subscription", rec),
                        key=str(rec["id"]).encode())
        for sid in dels.tolist():
            sender.send(kafka_cfg.topic("subscriptions"), None, key=str(sid).encode())
        sender.close()

    with open(tmp_path / "first.log", "w") as log:
        first = subprocess.Popen(args, env=env, stdout=log, stderr=subprocess.STDOUT,
                                 start_new_session=True)
        try:
            deadline = time.monotonic() + 180
            while not marker.exists():
                assert first.poll() is None and time.monotonic() < deadline
                time.sleep(0.1)
            publish(records[:PER_ROUND])
            wait_processed(kafka_cfg, PER_ROUND)
            current(checkpoint)  # the snapshot written after the build
            change()
        finally:
            # No publication came since the change, so no batch has applied it yet.
            os.killpg(first.pid, signal.SIGKILL)
            first.wait(30)
    change()  # while the app is down
    later = threading.Thread(target=publish, args=(records[PER_ROUND:],))
    later.start()  # while it restarts
    second = subprocess.run(args, env=env, capture_output=True, text=True, timeout=600)
    later.join(60)
    assert second.returncode == 0, second.stderr[-3000:]
    said = second.stdout + second.stderr
    assert FROM_SNAPSHOT in said, [line for line in said.splitlines() if "geops." in line]
    summaries = [s for s in metrics(kafka_cfg)["BatchSummary"] if s["records"]]
    assert sum(s["records"] for s in summaries) >= len(records)
    expected = versioned_oracle(kafka_cfg, summaries, w.publications)
    got = matches(kafka_cfg)
    assert set(got) == set(expected)
    for pub, lists in got.items():
        assert all(found == expected[pub] for found in lists)  # a replay repeats the same
    versions = {tuple(sorted(s["subscription_offsets"].items())) for s in summaries}
    assert len(versions) >= 2
    tail = {str(m.partition()): m.offset() + 1
            for m in read_to_end(kafka_cfg.kafka_client(), kafka_cfg.topic("subscriptions"))}
    # the changes made while the app was down are in force: the last batch read them all
    assert summaries[-1]["subscription_offsets"] == tail
