"""Static-side skew: a burst of subscriptions landing in one worker's partitions while a
balanced stream runs makes that worker's join work grow, and the distributor rebalances, as it
does for stream skew. Before the burst nothing is commanded."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest
import shapely

from app.main import checkpoint_dir, ready_path
from distributor.service import Service
from geops.model import Publications, Relation, Subscriptions
from geops.strategies import build_strategy
from kafkaio.dump import by_schema
from kafkaio.sender import Sender
from schemas import codec
from schemas.assignment import initial_assignment
from tests.app.conftest import metrics, run_app
from tests.app.live import load_subscriptions_only
from tests.distributor.test_service import running
from tests.distributor.test_service_app import SETTINGS

pytestmark = [pytest.mark.integration, pytest.mark.slow]

P, W = 16, 2
RATE = 500


def boxes(rng: np.random.Generator, centres: np.ndarray, size: float) -> np.ndarray:
    return shapely.box(centres[:, 0], centres[:, 1], centres[:, 0] + size,
                       centres[:, 1] + size)


def test_a_burst_of_subscriptions_on_one_worker_leads_to_a_rebalance(kafka_cfg):
    rng = np.random.default_rng(17)
    base = Subscriptions(np.arange(800), boxes(rng, rng.uniform(0, 100, (800, 2)), 2.0),
                         np.full(800, int(Relation.INTERSECTS)))
    n = 14_000
    pubs = Publications(np.arange(n), shapely.points(rng.uniform(0, 100, (n, 2))),
                        np.zeros(n, np.int64))
    # The partitions of worker 0, as the app builds them from the same subscriptions.
    strategy = build_strategy("sPS", base, P, "kdbtree")
    owner = np.array(initial_assignment(P, W))
    cells = strategy.partitioner.cells
    hot = np.flatnonzero(owner == 0)
    pick = rng.choice(hot, 6000)
    lo = np.clip(cells[pick, :2], 0, 100)
    hi = np.clip(cells[pick, 2:], 0, 100)
    burst = Subscriptions(np.arange(10_000, 16_000),
                          boxes(rng, lo + rng.uniform(0, 1, (6000, 2)) * (hi - lo - 1), 1.0),
                          np.full(6000, int(Relation.INTERSECTS)))
    cfg = kafka_cfg.with_overrides({"topics.publications.partitions": "1"})
    load_subscriptions_only(cfg, base)
    c = codec()
    burst_at: list[float] = []

    def produce() -> None:
        marker = ready_path(checkpoint_dir(kafka_cfg))
        while not marker.exists():
            time.sleep(0.1)
        sender = Sender(cfg.kafka_client(), rate=RATE)
        for i in range(n):
            if i == n // 2:  # halfway: the burst, all in worker 0's partitions
                burst_at.append(time.time() * 1000)
                subs = Sender(cfg.kafka_client())
                for sid, g in zip(burst.ids.tolist(), shapely.to_wkb(burst.geoms), strict=True):
                    subs.send(cfg.topic("subscriptions"), c.encode("Subscription", {
                        "id": sid, "geometry": g, "relation": "INTERSECTS"}),
                        key=str(sid).encode())
                subs.close()
            sender.send(cfg.topic("publications"), c.encode("Publication", {
                "id": i, "geometry": shapely.to_wkb(pubs.geoms[i]),
                "event_time": int(time.time() * 1000)}), key=str(i).encode())
        sender.close()

    service = Service(kafka_cfg.with_overrides({**SETTINGS, "distributor.mode": "dynamic"}))
    thread = threading.Thread(target=produce, daemon=True)
    with running(service):
        thread.start()
        assert run_app("--strategy", "sPS", "--partitions", str(P), "--stop-after-idle", "5s",
                       "--max-records-per-trigger", "400") == 0
    thread.join(30)
    summaries = metrics(kafka_cfg)["BatchSummary"]
    assert sum(s["records"] for s in summaries) == n
    commands = by_schema(kafka_cfg.kafka_client(),
                         kafka_cfg.topic("control")).get("RebalanceCommand", [])
    assert burst_at and commands, "the static-side skew led to no rebalance"
    assert all(cmd["time"] > burst_at[0] for cmd in commands), "a rebalance before the burst"
    loads = [r for r in metrics(kafka_cfg)["PartitionLoad"] if r["epoch"] == 0]
    before = [r for r in loads if r["time"] < burst_at[0]]
    after = [r for r in loads if r["time"] > burst_at[0] + 3000]

    def share(rows):
        total = sum(r["processing_ns"] for r in rows)
        return sum(r["processing_ns"] for r in rows if r["worker"] == 0) / max(total, 1)

    print(f"\nworker 0's share of join time: {share(before):.2f} before the burst, "
          f"{share(after):.2f} after; {len(commands)} command(s), first MLDC "
          f"{commands[0]['mldc_before']:.2f} -> {commands[0]['mldc_predicted']:.2f}")
