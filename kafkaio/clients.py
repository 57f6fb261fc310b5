"""Producers, consumers and admin clients built from librdkafka settings.

Every client takes the shared settings of ``Config.kafka_client()`` (the bootstrap servers plus
every librdkafka property of ``kafka.client``: security.protocol, sasl.*, ssl.*, ...), so a
secured cluster works everywhere.
Misconfiguration and an unreachable cluster become ``KafkaUnavailable``/``ConfigError`` with a
message that says what to do, never a librdkafka traceback.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient

from config import ConfigError


class KafkaUnavailable(RuntimeError):
    """The Kafka cluster could not be reached or refused the request."""


class TopicMissing(KafkaUnavailable):
    """The cluster answered: the topic does not exist (an answer, not an outage)."""


def client_conf(base: Mapping[str, str], extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Shared settings, then per-client defaults/overrides (``extra`` wins)."""
    conf: dict[str, Any] = dict(base)
    conf.update(extra or {})
    return conf


def _make(kind: type, conf: dict[str, Any]) -> Any:
    try:
        return kind(conf)
    except (KafkaException, ValueError, TypeError) as exc:
        raise ConfigError(f"invalid Kafka client setting: {exc}") from None


def producer(conf: Mapping[str, str], **extra: Any) -> Producer:
    """A producer that batches briefly and retries; delivery failures are reported by callers."""
    defaults = {"linger.ms": 5, "compression.type": "none", "enable.idempotence": True}
    defaults.update(extra)
    return _make(Producer, client_conf(conf, defaults))


READ_COMMITTED = "read_committed"


def consumer(conf: Mapping[str, str], group_id: str | None = None, **extra: Any) -> Consumer:
    """A manually assigned consumer: no offset commits (geops keeps its own positions).

    It reads committed records only (``isolation.level=read_committed``, librdkafka's default,
    set explicitly): the app writes its output in transactions, and a reader that saw an
    aborted or still open one would see matches that were never delivered, or twice. A setting
    that asks for anything else is refused.
    """
    defaults: dict[str, Any] = {
        "group.id": group_id or f"geops-{uuid.uuid4().hex[:12]}",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "earliest",
    }
    defaults.update(extra)
    merged = client_conf(conf, defaults)
    level = merged.setdefault("isolation.level", READ_COMMITTED)
    if level != READ_COMMITTED:
        raise ConfigError(f"isolation.level={level}: geops consumers read committed records "
                          f"only (the app's output is transactional); remove the setting or "
                          f"set it to {READ_COMMITTED}")
    return _make(Consumer, merged)


def admin(conf: Mapping[str, str]) -> AdminClient:
    return _make(AdminClient, client_conf(conf))


def topic_partitions(
    client: Consumer | AdminClient, topic: str, timeout: float = 10.0
) -> list[int]:
    """Partition ids of a topic; KafkaUnavailable if it does not exist or Kafka is unreachable."""
    try:
        md = client.list_topics(topic, timeout=timeout)
    except KafkaException as exc:
        raise KafkaUnavailable(_explain(exc)) from None
    tmd = md.topics.get(topic)
    if tmd is None or (tmd.error is not None
                       and tmd.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART):
        raise TopicMissing(f"topic '{topic}' does not exist (create it with "
                               f"`geops topics create`)")
    if tmd.error is not None:
        raise KafkaUnavailable(f"topic '{topic}': {tmd.error.str()}")
    return sorted(tmd.partitions)


def check_reachable(conf: Mapping[str, str], timeout: float = 10.0) -> None:
    """Raise KafkaUnavailable with a helpful message unless the cluster answers metadata."""
    try:
        admin(conf).list_topics(timeout=timeout)
    except KafkaException as exc:
        raise KafkaUnavailable(_explain(exc, conf.get("bootstrap.servers"))) from None


def _explain(exc: KafkaException, servers: str | None = None) -> str:
    err = exc.args[0] if exc.args else exc
    text = err.str() if isinstance(err, KafkaError) else str(err)
    where = f" at {servers}" if servers else ""
    return (f"cannot reach Kafka{where}: {text}. Start the embedded broker with "
            f"`geops broker start` or set --bootstrap-servers / GEOPS_BOOTSTRAP_SERVERS")
