"""The real-time path (``geops app --mode real-time``) on Apache Kafka and a real Spark session,
live: publications written while the app runs are answered as the brute-force oracle answers
them, subscription changes made mid-stream are in force for what comes after them, a bad record
goes to the dead-letter topic with its reason, and a driver killed with ``kill -9`` answers,
once restarted, every publication it had not (at least once: an answer may come twice, always
the oracle's). Geofence events equal ``geops match --events``' across a driver killed and a
task failed: none missing at least once, each once under exactly-once (the objects' states
restored from the object-state topic)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import shapely

from app.faults import FAIL_TASK_VAR
from app.main import checkpoint_dir, ready_path
from config.exitcodes import EXIT_USAGE
from geops.events import EventEngine
from geops.model import DetectKind, Publications, Relation, Subscriptions
from geops.offline import matched_as
from geops.workload import generate_workload
from kafkaio.dump import by_schema
from kafkaio.offsets import read_to_end
from kafkaio.sender import Sender, produce_records, record_key
from kafkaio.topics import create_topics
from schemas import codec
from schemas.records import publication_records, subscription_records
from tests.app.conftest import matches, metrics
from tests.faults.stack import (
    Procs,
    Publisher,
    assert_matches_oracle,
    live_env,
    oracle_of,
    processed,
    wait_answered,
    wait_for,
    wait_ready,
)

pytestmark = [pytest.mark.integration, pytest.mark.slow]

FLAGS = ["--mode", "real-time"]
# a failed task is retried once (local mode takes its attempts from the master)
RETRIED = ["--master", "local[2,2]"]
# A region far from the generated world: sentinel points there match the sentinel
# subscriptions only, so each one answered tells that a change is in force.
FAR = (170.0, -80.0)


def _sentinel(sid: int) -> Subscriptions:
    box = shapely.box(FAR[0] - 1, FAR[1] - 1, FAR[0] + 1, FAR[1] + 1)
    return Subscriptions(np.array([sid], np.int64), np.array([box], object),
                         np.array([Relation.INTERSECTS], np.int8))


def _change(cfg, upserts: Subscriptions, deletes: list[int]) -> None:
    """Subscription changes in one partition of the topic, in this order: the sentinel last."""
    sender = Sender(cfg.kafka_client())
    topic, c = cfg.topic("subscriptions"), codec()
    for sid in deletes:
        sender.send(topic, None, key=str(sid).encode(), partition=0)
    for rec in subscription_records(upserts):
        sender.send(topic, c.encode("Subscription", rec), key=str(rec["id"]).encode(),
                    partition=0)
    sender.close()


def _in_force(cfg, sentinel: int, running, first_id: int) -> int:
    """Publish a round of sentinel points, one to each publications partition, until a whole
    round is answered with ``sentinel``: then every task applies what came before it in the
    subscriptions topic. Returns the next free publication id."""
    parts = list(range(cfg["topics.publications.partitions"]))
    state: dict = {"next": first_id, "round": []}

    def answered() -> bool:
        got = matches(cfg)
        if state["round"] and all(any(sentinel in ids for ids in got.get(pid, []))
                                  for pid in state["round"]):
            return True
        ids = np.arange(state["next"], state["next"] + len(parts), dtype=np.int64)
        points = Publications(ids, np.array([shapely.Point(*FAR)] * len(parts), object),
                              np.zeros(len(parts), np.int64))
        round_ = Publisher(cfg, points, rate=1_000)
        round_.publish(len(parts), parts)
        round_.close()
        state["round"], state["next"] = ids.tolist(), state["next"] + len(parts)
        return False

    wait_for("the subscription change to be in force", answered, 120, running)
    return state["next"]


def test_real_time_answers_live_follows_changes_and_survives_a_kill(broker, tmp_path,
                                                                   monkeypatch):
    env, cfg = live_env(broker, tmp_path, "rt-", monkeypatch)
    failed = tmp_path / "task-failed"
    w = generate_workload(seed=65, subscriptions=400, publications=3_000)
    create_topics(cfg)
    _change(cfg, w.subscriptions, [])
    procs = Procs(tmp_path / "logs")
    try:
        # the first task to answer records fails once after writing them
        app = procs.app({**env, FAIL_TASK_VAR: str(failed)}, *FLAGS, *RETRIED)
        wait_ready(cfg, app)
        pubs = w.publications
        first, second = pubs.take(np.arange(0, 1_500)), pubs.take(np.arange(1_500, len(pubs)))
        publisher = Publisher(cfg, first, rate=1_000)
        publisher.publish(len(first))
        publisher.close()
        oracle = oracle_of(w.subscriptions, first)
        wait_answered(cfg, oracle, [app])
        assert_matches_oracle(cfg, oracle)  # a repeat is the same answer
        assert failed.exists() and "injected task failure" in app.logs()
        # the failed task's answers came before it failed; its retry answers its records again
        # from the start (nothing was committed) and must be done before the subscriptions
        # change, or it would answer them by the changed ones
        wait_for("the failed task's retry", lambda: processed(cfg) >= len(first), 120, [app])

        # mid-stream: a fifth deleted, a fifth moved, then the sentinel
        ids = w.subscriptions.ids
        deleted = ids[::5].tolist()
        moved = w.subscriptions.take(np.arange(1, len(ids), 5))
        moved = Subscriptions(moved.ids, shapely.transform(moved.geoms, lambda xy: xy + 0.05),
                              moved.relations)
        sentinel = int(ids.max()) + 1
        _change(cfg, Subscriptions.concat([moved, _sentinel(sentinel)]), deleted)
        next_id = _in_force(cfg, sentinel, [app], int(pubs.ids.max()) + 1)
        keep = ~np.isin(ids, deleted) & ~np.isin(ids, moved.ids)
        now = Subscriptions.concat([w.subscriptions.take(np.flatnonzero(keep)), moved])

        # a bad record, then the second half, with the driver killed midway
        bad = Sender(cfg.kafka_client())
        bad.send(cfg.topic("publications"), b"not avro", key=b"bad")
        bad.close()
        publisher = Publisher(cfg, second, rate=1_000)
        publisher.publish(len(second) // 2)
        wait_for("some answers of the second half",
                 lambda: len(set(matches(cfg)) & set(second.ids.tolist())) > 100, 120, [app])
        app.kill9()
        publisher.publish(publisher.left)
        publisher.close()
        app.start()
        both = {**oracle_of(w.subscriptions, first), **oracle_of(now, second)}
        wait_answered(cfg, both, [app])
        got = matches(cfg)
        for pid in both:  # every answer the oracle's, at least once
            assert all(found == both[pid] for found in got[pid]), (pid, got[pid], both[pid])
        unexpected = set(got) - set(both) - set(range(int(pubs.ids.max()) + 1, next_id))
        assert not unexpected, sorted(unexpected)[:20]
        dead = by_schema(cfg.kafka_client(), cfg.topic("dead_letter")).get("DeadLetter", [])
        assert [d["key"] for d in dead] == [b"bad"] and dead[0]["reason"], dead
        # each task's summary per period, read as a micro-batch app's summaries are
        wait_for("the summaries of every publication", lambda: sum(
            s["records"] for s in metrics(cfg).get("BatchSummary", [])) >= len(pubs) + 1,
            60, [app])
        summaries = metrics(cfg)["BatchSummary"]
        assert {s["join"] for s in summaries} == {"real-time"}
        assert len({s["batch_id"] for s in summaries}) == len(summaries)
        assert any(s["latency_p50_ms"] is not None for s in summaries)
        # each task's load with it, as a worker's: its share of the time and the items
        loads = metrics(cfg)["PartitionLoad"]
        assert {r["worker"] for r in loads} == {0, 1}, loads[:3]
        by_batch = {r["batch_id"]: r for r in loads}
        assert all(by_batch[s["batch_id"]]["items"] == s["records"] for s in summaries
                   if s["records"])
        stats = subprocess.run([sys.executable, "-m", "cli.main", "stats"], env=env,
                               capture_output=True, text=True, timeout=120)
        assert stats.returncode == 0 and "epoch" in stats.stdout, stats.stdout + stats.stderr
        epoch = stats.stdout.splitlines()[2].split()  # epoch 0: time share, item share
        assert epoch[0] == "0" and epoch[6] == "/" and epoch[9] == "/", stats.stdout
        assert app.stop() == 0, app.logs()[-3000:]
    finally:
        procs.reap()


def test_real_time_refuses_without_a_slot_per_worker_or_room_for_static(broker, tmp_path,
                                                                      monkeypatch):
    env, cfg = live_env(broker, tmp_path, "rt-slots-", monkeypatch)
    create_topics(cfg)
    done = subprocess.run([sys.executable, "-m", "cli.main", "app", *FLAGS, "--master",
                           "local[1]", "--workers", "2"], env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == EXIT_USAGE, done.stdout[-3000:] + done.stderr[-3000:]
    errors = [line for line in done.stdout.splitlines() + done.stderr.splitlines()
              if " geops.app ERROR " in line]
    assert len(errors) == 1, done.stdout[-3000:]
    assert "a task slot for each of its 2 workers and Spark offers 1" in errors[0], errors[0]
    # a static side larger than a task may hold
    _change(cfg, generate_workload(seed=3, subscriptions=2_000, publications=1).subscriptions, [])
    done = subprocess.run([sys.executable, "-m", "cli.main", "app", *FLAGS, "--master",
                           "local[2]", "--workers", "2", "--real-time-task-memory", "1m"],
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == EXIT_USAGE, done.stdout[-3000:] + done.stderr[-3000:]
    errors = [line for line in done.stdout.splitlines() if " geops.app ERROR " in line]
    assert len(errors) == 1, done.stdout[-3000:]
    assert ("the static side is too large for real-time mode" in errors[0]
            and "2,000 records" in errors[0] and "a task may hold 1 MB" in errors[0]
            and "--mode micro-batch" in errors[0]), errors[0]


def _events_oracle(w, detect: np.ndarray) -> list[tuple]:
    """The events of ``geops match --events``' engine on the workload's positions with the
    fences' ``detect`` kinds, in order (the TTL a day: none expires), as ``_events`` gives
    them."""
    engine = EventEngine(86_400_000)
    assert not any(engine.set_fences(w.subscriptions.ids, w.subscriptions.geoms, detect,
                                     np.round(w.distance_m, 1)))
    pubs = w.publications
    return sorted((e.object_id, e.subscription_id, e.kind, e.publication_id, e.event_time)
                  for k in range(len(pubs))
                  for e in engine.process(w.object_ids[k:k + 1], pubs.ids[k:k + 1],
                                          pubs.event_time[k:k + 1], pubs.geoms[k:k + 1]))


def _events(cfg) -> list[tuple]:
    """The GeofenceEvent records on the events topic (read committed), sorted."""
    return sorted((r["object_id"], r["subscription_id"], r["kind"].lower(),
                   r["publication_id"], r["event_time"])
                  for r in by_schema(cfg.kafka_client(), cfg.topic("events"))
                  .get("GeofenceEvent", []))


def _send_positions(cfg, w, rows: range) -> None:
    """The workload's positions ``rows`` at 1,000/s, keyed by object id, all delivered."""
    sender = Sender(cfg.kafka_client(), rate=1_000)
    c = codec()
    at = np.arange(rows.start, rows.stop)
    for rec in publication_records(w.publications.take(at), w.object_ids[at]):
        sender.send(cfg.topic("publications"), c.encode("Publication", rec),
                    key=record_key(rec))
    sender.close()


def _across_faults(broker, tmp_path, monkeypatch, prefix: str, delivery: str
                   ) -> tuple[object, list[tuple], list[tuple], dict]:
    """Positions of 80 objects written at 1,000/s while the app runs, in thirds: once the
    first third's events are out, the second third is written and the driver killed with
    ``kill -9`` at once (positions in flight); the app started again restores its objects'
    states, and its first task to answer records fails once after writing them, then the
    last third. The app's configuration, the events got (once every position is answered and
    its events are out), the oracle's, and the matches' oracle."""
    env, cfg = live_env(broker, tmp_path, prefix, monkeypatch)
    failed = tmp_path / "task-failed"
    w = generate_workload(seed=7, objects=80, subscriptions=500, publications=2_400,
                          interval_ms=1_000)
    detect = np.where(w.detect > 0, w.detect | int(DetectKind.CROSS), 0).astype(np.uint8)
    create_topics(cfg)
    produce_records(cfg.kafka_client(), cfg.topic("subscriptions"), "Subscription",
                    subscription_records(w.subscriptions, detect, np.round(w.distance_m, 1)))
    want = _events_oracle(w, detect)
    distance = np.round(w.distance_m, 1)  # as written to the topic
    as_matched, refused = matched_as(w.subscriptions, detect, distance,
                                     list(range(len(w.subscriptions))))
    assert not refused
    oracle = oracle_of(as_matched, w.publications)
    n = len(w.publications)
    first = set(w.publications.ids[:n // 3].tolist())
    procs = Procs(tmp_path / "logs")
    try:
        app = procs.app(env, *FLAGS, *RETRIED, "--object-ttl", "86400s", "--delivery",
                        delivery)
        wait_ready(cfg, app)
        _send_positions(cfg, w, range(0, n // 3))
        wait_for("the first third's events", lambda: {e for e in _events(cfg) if e[3] in first}
                 == {e for e in want if e[3] in first}, 120, [app])
        _send_positions(cfg, w, range(n // 3, 2 * n // 3))
        app.kill9()
        # the states the restart goes on from (without them an object inside a fence would
        # enter it again)
        assert len(list(read_to_end(cfg.kafka_client(), cfg.topic("object_state")))) > 0
        ready_path(checkpoint_dir(cfg)).unlink(missing_ok=True)
        app.env = {**env, FAIL_TASK_VAR: str(failed)}
        app.start()
        wait_ready(cfg, app)
        _send_positions(cfg, w, range(2 * n // 3, n))
        wait_answered(cfg, oracle, [app])
        wait_for("the events of every position", lambda: len(_events(cfg)) >= len(want), 180,
                 [app])
        assert failed.exists() and "injected task failure" in app.logs()
        got = _events(cfg)
        assert app.stop() == 0, app.logs()[-3000:]
        assert len(want) > 100
        return cfg, got, want, oracle
    finally:
        procs.reap()


def test_real_time_events_at_least_once_miss_nothing_across_a_kill_and_a_failed_task(
        broker, tmp_path, monkeypatch):
    """At least once: every answer is the brute-force oracle's, every event of ``geops match
    --events`` is on the events topic and none other (a replayed position may repeat its
    answer and its events)."""
    cfg, got, want, oracle = _across_faults(broker, tmp_path, monkeypatch, "rt-events-",
                                            "at-least-once")
    assert_matches_oracle(cfg, oracle)  # a repeat is the same answer
    assert set(got) == set(want), (sorted(set(want) - set(got))[:10],
                                   sorted(set(got) - set(want))[:10])


def test_real_time_exactly_once_across_a_kill_and_a_failed_task(broker, tmp_path,
                                                                monkeypatch):
    """Under --delivery exactly-once a read_committed reader sees every answer once, the
    brute-force oracle's, and the events of ``geops match --events``, each once: a task that
    fails after writing its answers, and a driver killed with kill -9, leave no repeat, and
    the objects' states come back from the object-state topic as of the offsets the tasks
    resume from."""
    cfg, got, want, oracle = _across_faults(broker, tmp_path, monkeypatch, "rt-eos-",
                                            "exactly-once")
    assert got == want, (sorted(set(want) - set(got))[:10],
                         [e for e in got if got.count(e) > 1][:10])
    assert assert_matches_oracle(cfg, oracle) == 0  # nothing twice
    assert sum(e[2] == "cross" for e in want) >= 2  # every fence asks for cross too
