"""Creating the configured topics, idempotently, with their partition counts and configs;
dropping them again after a benchmark run on a shared broker."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable
from dataclasses import dataclass

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from config import TOPICS, Config
from kafkaio.clients import admin, check_reachable
from kafkaio.errors import KafkaUnavailable


@dataclass(frozen=True)
class TopicResult:
    """Outcome of creating one topic: 'created', 'exists' or 'failed' (with detail)."""

    logical: str
    name: str
    partitions: int
    outcome: str
    detail: str = ""


def drop_topics(cfg: Config, timeout: float = 30.0) -> None:
    """Delete the configured topics, best effort (a benchmark's clean-up: nothing to report)."""
    with contextlib.suppress(Exception):
        client = admin(cfg.kafka_client())  # kept: a dropped client abandons its requests
        futures = client.delete_topics([cfg.topic(t) for t in TOPICS], operation_timeout=timeout)
        for f in futures.values():
            with contextlib.suppress(Exception):
                f.result()


def create_topics(cfg: Config, logical: Iterable[str] = TOPICS,
                  timeout: float = 30.0) -> list[TopicResult]:
    """Create each configured topic unless it exists; report what happened to each."""
    client_conf = cfg.kafka_client()
    check_reachable(client_conf, timeout)
    client = admin(client_conf)
    wanted = list(logical)
    existing = client.list_topics(timeout=timeout).topics
    new = []
    results: dict[str, TopicResult] = {}
    for name in wanted:
        topic = cfg.topic(name)
        parts = getattr(cfg.view.topics, name).partitions
        if topic in existing:
            have = len(existing[topic].partitions)
            note = "" if have == parts else f"has {have} partitions, config asks {parts}"
            results[name] = TopicResult(name, topic, have, "exists", note)
            continue
        conf = {k: str(v) for k, v in (_topic_config(cfg, name)).items()}
        new.append((name, NewTopic(topic, parts, cfg.view.kafka.replication_factor or -1,
                                     config=conf)))
    if new:
        futures = client.create_topics([t for _, t in new], request_timeout=timeout)
        for name, t in new:
            try:
                futures[t.topic].result()
                results[name] = TopicResult(name, t.topic, t.num_partitions, "created")
            except KafkaException as exc:
                err = exc.args[0]
                if err.code() == KafkaError.TOPIC_ALREADY_EXISTS:
                    results[name] = TopicResult(name, t.topic, t.num_partitions, "exists")
                else:
                    results[name] = TopicResult(name, t.topic, t.num_partitions, "failed",
                                                err.str())
    created = [r.name for r in results.values() if r.outcome == "created"]
    if created:
        _wait_for_leaders(client, created, timeout)
    return [results[name] for name in wanted]


def _wait_for_leaders(client: AdminClient, topics: list[str], timeout: float) -> None:
    """Return once every partition of ``topics`` has a leader in the cluster's metadata.

    Creating a topic is asynchronous on Apache Kafka: for a moment after CreateTopics answers,
    its partitions have no leader yet and a client that uses them at once is told
    NOT_LEADER_OR_FOLLOWER or UNKNOWN_TOPIC_OR_PARTITION.
    """
    deadline = time.monotonic() + timeout
    while True:
        meta = client.list_topics(timeout=timeout).topics
        if all(t in meta and meta[t].error is None and meta[t].partitions
               and all(p.leader >= 0 and p.error is None for p in meta[t].partitions.values())
               for t in topics):
            return
        if time.monotonic() > deadline:
            raise KafkaUnavailable(f"the created topics {', '.join(topics)} have no leader "
                                   f"after {timeout:.0f} s")
        time.sleep(0.05)


def _topic_config(cfg: Config, logical: str) -> dict[str, object]:
    try:
        return dict(cfg[f"topics.{logical}.config"])
    except KeyError:
        return {}


def topic_config(cfg: Config, topic: str, timeout: float = 30.0) -> dict[str, str]:
    """The broker's view of a topic's configuration (name -> value)."""
    client = admin(cfg.kafka_client())
    futures = client.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, topic)],
                                      request_timeout=timeout)
    try:
        (result,) = [f.result() for f in futures.values()]
    except KafkaException as exc:
        raise KafkaUnavailable(f"cannot describe topic '{topic}': {exc.args[0].str()}") from None
    return {name: entry.value for name, entry in result.items()}
