"""Fixtures for the app's integration tests: a small workload, its oracle, and app runs."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

import numpy as np
import pytest

import config
from app.main import main as app_main
from geops.model import Publications, Relation, Subscriptions
from geops.oracle import oracle_match
from geops.workload import generate_workload
from kafkaio.dump import by_schema
from kafkaio.sender import produce_records
from kafkaio.topics import create_topics
from schemas.records import publication_records, subscription_records


@dataclass
class Workload:
    subs: Subscriptions
    pubs: Publications
    oracle: dict[int, tuple[int, ...]]  # publication id -> matched subscription ids


@pytest.fixture(scope="session")
def workload() -> Workload:
    """600 subscriptions (about 10% DISJOINT) and 1,500 publications with their oracle."""
    w = generate_workload(seed=11, subscriptions=600, publications=1500)
    subs = w.subscriptions
    rels = subs.relations.copy()
    rels[np.random.default_rng(5).random(len(rels)) < 0.1] = int(Relation.DISJOINT)
    subs = Subscriptions(subs.ids, subs.geoms, rels)
    keys, offsets, ids = oracle_match(subs, w.publications.ids, w.publications.geoms)
    oracle = {int(k): tuple(ids[offsets[i]:offsets[i + 1]].tolist())
              for i, k in enumerate(keys)}
    return Workload(subs, w.publications, oracle)


def load(cfg: config.Config, w: Workload) -> None:
    """Create the test's topics and produce the workload's subscriptions and publications."""
    create_topics(cfg)
    conf = cfg.kafka_client()
    produce_records(conf, cfg.topic("subscriptions"), "Subscription",
                    subscription_records(w.subs))
    produce_records(conf, cfg.topic("publications"), "Publication",
                    publication_records(w.pubs))


def run_app(*flags: str) -> int:
    """Run the app in this process (local[2], 2 workers) until it has been idle for 2 s."""
    return app_main(["--master", "local[2]", "--workers", "2", "--stop-after-idle", "2s",
                     "--trigger", "200ms", *flags])


def matches(cfg: config.Config) -> dict[int, list[tuple[int, ...]]]:
    """Every Match record on the matches topic: publication id -> the id lists it got."""
    out: dict[int, list[tuple[int, ...]]] = defaultdict(list)
    for rec in by_schema(cfg.kafka_client(), cfg.topic("matches")).get("Match", []):
        out[rec["publication_id"]].append(tuple(rec["subscription_ids"]))
    return dict(out)


def metrics(cfg: config.Config) -> dict[str, list[dict]]:
    return by_schema(cfg.kafka_client(), cfg.topic("metrics"))
