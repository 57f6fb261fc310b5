"""Geofence events from the app on Apache Kafka and a local Spark session equal the offline
oracle's (``geops.events.EventEngine``, the engine of ``geops match --events``), exactly once,
on a moving-object workload written while the app runs, across a driver crash, a rebalance,
fences that change mid-stream and positions out of order.

The app runs with exactly-once delivery. Its first run dies (SIGKILL) right after a batch's
transaction committed and before Spark committed the batch, its events query having written
events already; the restart runs that batch again without writing it again, and finds each
object's fences in the events query's state store (an object inside a fence when the driver
died gives ``inside`` next, not a second ``enter``).
A third of the way through, a command moves every static partition to the other worker and
replicates a few on both, fences included. The fences are a fifth of the subscriptions, some of
them distance fences. Two thirds of the way through, once the app has processed every position
written, fences change: some are added (distance fences on objects' ways), some removed, some
ask for other kinds, one stops detecting, a plain subscription starts; the positions after it
are written once a batch has applied the change. Then two positions of one object are written
newest first in one request (one batch: taken in event-time order), and a position older than
its object's last (dropped, counted in the log, no event). What ``geops tail --topic events
--format jsonl`` prints equals the oracle's lines, each object's in the oracle's order (events
are keyed by object id), none twice.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections import defaultdict

import numpy as np
import pytest
import shapely

from app.faults import KILL_VAR
from cli.main import main as cli_main
from geops.events import EventEngine
from geops.model import Subscriptions
from geops.offline import events_files
from geops.workload import generate_workload
from geops.workload.output import write_workload
from kafkaio.offsets import EndOffsets
from kafkaio.sender import Sender, produce_records, record_key
from kafkaio.topics import create_topics
from schemas import codec
from schemas.assignment import initial_assignment
from schemas.records import subscription_records
from tests.app.delivery_checks import run_app
from tests.app.replicas import P, SteppedProducer, replica_command

pytestmark = [pytest.mark.integration, pytest.mark.slow]

FIELDS = ("object_id", "subscription_id", "kind", "publication_id", "event_time", "reason")


ENTER, EXIT, INSIDE, CROSS = 1, 2, 4, 16  # bits of the detect mask (DetectKind's order)
FILLER_ID = 9_000_000          # anonymous publications that carry a batch: ids from here
LATE_ID = 9_500_000            # the position older than its object's last


@pytest.fixture(scope="module")
def moving():
    """80 objects, 2,400 positions, 500 subscriptions (a fifth fences, every one asking for
    cross too: the tracks that pass through a fence between two positions are few)."""
    w = generate_workload(seed=7, objects=80, subscriptions=500, publications=2_400,
                          interval_ms=1_000)
    w.detect = np.where(w.detect > 0, w.detect | CROSS, 0).astype(np.uint8)
    return w


def test_the_oracle_engine_is_geops_match_events(moving, tmp_path):
    """The engine the live test computes its oracle with gives ``geops match --events``' lines
    on the workload without changes."""
    w = moving
    write_workload(tmp_path, w, {})
    events_files(tmp_path / "subscriptions.geojson", tmp_path / "publications.geojson",
                 tmp_path / "events.jsonl")
    lines = (tmp_path / "events.jsonl").read_text().splitlines()
    engine = EventEngine(600_000)
    assert not any(engine.set_fences(w.subscriptions.ids, w.subscriptions.geoms, w.detect,
                                     w.distance_m))
    got = []
    pubs = w.publications
    for k in range(len(pubs)):
        got += engine.process(w.object_ids[k:k + 1], pubs.ids[k:k + 1],
                              pubs.event_time[k:k + 1], pubs.geoms[k:k + 1])
    got += engine.expire(int(pubs.event_time.max()))
    assert [e.to_json() for e in got] == lines and len(lines) > 100


class Churn:
    """The fences' change two thirds of the way through, the out-of-order pair and the late
    position after it, and the oracle of the whole stream with them."""

    def __init__(self, w, split: int):
        self.w, self.split = w, split
        subs, detect = w.subscriptions, w.detect.copy()
        distance = np.round(w.distance_m, 1)  # as written to the topic
        fences = np.flatnonzero(detect)
        plain = np.flatnonzero(detect == 0)
        removed, rekinded, unfenced = fences[:5], fences[5:10], fences[10]
        detect[rekinded] = np.where(detect[rekinded] ^ EXIT, detect[rekinded] ^ EXIT, ENTER)
        detect[unfenced] = 0
        detect[plain[0]] = ENTER | EXIT
        # new distance fences on five objects' ways: around their third position after it
        objects = np.asarray(w.object_ids)
        after = np.arange(split, len(objects))
        names = list(dict.fromkeys(objects[after].tolist()))[:5]
        centres = [w.publications.geoms[after[objects[after] == name][2]] for name in names]
        new_ids = np.arange(len(centres)) + int(subs.ids.max()) + 1
        keep = np.setdiff1d(np.arange(len(subs)), removed)
        self.before = (subs, w.detect, np.round(w.distance_m, 1))
        self.after = (Subscriptions(np.concatenate([subs.ids[keep], new_ids]),
                                    np.concatenate([subs.geoms[keep], centres]),
                                    np.concatenate([subs.relations[keep],
                                                    np.zeros(len(centres), np.int8)])),
                      np.concatenate([detect[keep], np.full(len(centres), ENTER | EXIT,
                                                            np.uint8)]),
                      np.concatenate([distance[keep], np.full(len(centres), 2_500.0)]))
        changed = np.concatenate([rekinded, [unfenced, plain[0]]])
        new = Subscriptions(np.concatenate([subs.ids[changed], new_ids]),
                            np.concatenate([subs.geoms[changed], centres]),
                            np.concatenate([subs.relations[changed],
                                            np.zeros(len(centres), np.int8)]))
        c = codec()
        self.changes = [(str(i).encode(), None) for i in subs.ids[removed].tolist()] + [
            (str(r["id"]).encode(), c.encode("Subscription", r)) for r in subscription_records(
                new, np.concatenate([detect[changed], np.full(len(centres), ENTER | EXIT)]),
                np.concatenate([distance[changed], np.full(len(centres), 2_500.0)]))]
        # two consecutive positions of one object after it, written newest first
        first = after[0]
        second = after[np.flatnonzero(objects[after] == objects[first])[1]]
        self.pair = (int(first), int(second))
        # a position of an object seen before it, at the time of its first position
        early = np.flatnonzero(objects[:split] == objects[split - 1])
        self.late = {"id": LATE_ID, "geometry": shapely.to_wkb(w.publications.geoms[early[-1]]),
                     "event_time": int(w.publications.event_time[early[0]]),
                     "object_id": str(objects[early[0]])}
        assert len(early) >= 2 and second > first

    def oracle(self) -> tuple[dict[str, list[tuple]], int]:
        """Events by object, and the positions dropped."""
        engine = EventEngine(600_000)
        w, pubs = self.w, self.w.publications
        assert not any(engine.set_fences(self.before[0].ids, self.before[0].geoms,
                                         *self.before[1:]))
        events = []

        def run(k: int) -> None:
            events.extend(engine.process(w.object_ids[k:k + 1], pubs.ids[k:k + 1],
                                         pubs.event_time[k:k + 1], pubs.geoms[k:k + 1]))

        for k in range(self.split):
            run(k)
        assert not any(engine.set_fences(self.after[0].ids, self.after[0].geoms,
                                         *self.after[1:]))
        late = self.late
        events += engine.process([late["object_id"]], np.array([late["id"]]),
                                 np.array([late["event_time"]]),
                                 shapely.from_wkb(np.array([late["geometry"]], object)))
        for k in range(self.split, len(pubs)):
            run(k)
        events += engine.expire(int(pubs.event_time.max()))
        out = defaultdict(list)
        for e in events:
            line = json.loads(e.to_json())
            out[line["object_id"]].append(tuple(line.get(f) for f in FIELDS))
        return dict(out), engine.dropped

    def __call__(self, p: SteppedProducer) -> None:
        """The change, filler publications until a batch applied it, the pair, the late one."""
        topic = p.cfg.topic("subscriptions")
        for key, value in self.changes:
            p.send(topic, value, key)
        p.sender.flush()
        probe = EndOffsets(p.cfg.kafka_client(), timeout=10.0)
        try:
            target = probe(topic)
        finally:
            probe.close()
        c, fillers = codec(), 0
        while not any(s["subscription_offsets"] and all(
                s["subscription_offsets"].get(str(q), 0) >= end for q, end in target.items())
                for s in p.watch.poll()):
            rec = {"id": FILLER_ID + fillers, "geometry": p.records[0]["geometry"],
                   "event_time": int(time.time() * 1000), "object_id": None}
            p.send(p.topic, c.encode("Publication", rec), record_key(rec))
            fillers += 1
            p.settle()
        # newest first, one request: both in one batch
        first, second = (p.records[k] for k in self.pair)
        pair = Sender(p.cfg.kafka_client(), **{"linger.ms": 100})
        try:
            for rec in (second, first):
                pair.send(p.topic, c.encode("Publication", rec), key=record_key(rec))
            pair.flush()
        finally:
            pair.close()
        p.extra += 2
        p.skip.update(self.pair)
        p.settle()
        p.send(p.topic, c.encode("Publication", self.late), record_key(self.late))
        p.settle()


def test_events_equal_the_oracle_exactly_once_across_a_kill_a_rebalance_and_changes(
        moving, kafka_cfg, geops_env, tmp_path, capsys):
    w = moving
    n = len(w.publications)
    churn = Churn(w, 2 * n // 3)
    oracle, dropped = churn.oracle()
    kinds = {e[2] for v in oracle.values() for e in v}
    assert sum(len(v) for v in oracle.values()) > 100 and {"enter", "exit", "cross"} <= kinds
    assert dropped == 1
    new_fences = set(churn.after[0].ids.tolist()) - set(w.subscriptions.ids.tolist())
    assert {e[1] for v in oracle.values() for e in v} & new_fences  # the new fences matter
    create_topics(kafka_cfg)
    produce_records(kafka_cfg.kafka_client(), kafka_cfg.topic("subscriptions"), "Subscription",
                    subscription_records(w.subscriptions, w.detect, np.round(w.distance_m, 1)))
    # every partition to the other worker, and a few replicated on both (fences included)
    swapped = [(1 - owner, owner) if p % 5 == 0 else (1 - owner,)
               for p, owner in enumerate(initial_assignment(P, 2))]
    producer = SteppedProducer(kafka_cfg, w.publications,
                               [(n // 3, 1, replica_command(1, swapped))], rate=200.0,
                               object_ids=w.object_ids,
                               actions=[(churn.split, churn)]).start()
    flags = ["--master", "local[2]", "--delivery", "exactly-once", "--partitions", str(P)]
    env = {**os.environ, **geops_env}
    code = run_app(flags, {**env, KILL_VAR: "after-commit@20"}, tmp_path / "killed.log")
    killed = (tmp_path / "killed.log").read_text()
    assert code != 0 and "stopped after" not in killed, killed[-3000:]
    # the events query had state to lose: it wrote events before the driver died
    assert "geofence events" in killed, killed[-3000:]
    assert run_app(flags, env, tmp_path / "last.log", timeout=240) == 0, \
        (tmp_path / "last.log").read_text()[-3000:]
    producer.join()
    last = (tmp_path / "last.log").read_text()
    assert "batch 20: its output was committed to Kafka before a restart" in last
    # the command moved the partitions mid-stream, or (written while the driver was down) the
    # restart recovered it
    assert re.search(r"epoch 1 in force|recovered epoch 1 ", killed + last)
    assert not any("no replicas" in line
                   for line in re.findall(r"epoch 1 in force.*", killed + last))
    late = re.findall(r"events batch \d+: positions older than their object's last, dropped: "
                      r"(\d+)", killed + last)
    assert sum(map(int, late)) == dropped

    # what a user reads: geops tail prints each event as geops match --events does
    capsys.readouterr()
    assert cli_main(["tail", "--topic", "events", "--from-beginning", "--format", "jsonl",
                     "--until-idle", "2s"]) == 0
    got = defaultdict(list)
    for line in capsys.readouterr().out.splitlines():
        e = json.loads(line)
        got[e["object_id"]].append(tuple(e.get(f) for f in FIELDS))
    assert dict(got) == oracle
