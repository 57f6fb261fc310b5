"""librdkafka client settings as the Java client's, for Spark's Kafka connector.

geops has two Kafka clients: librdkafka (confluent-kafka: producers, the CLI, the distributor,
the app's writers) and the Java client inside Spark's connector (the app's reading of
publications). One set of settings (``[kafka.client]``, ``-X key=value``,
``GEOPS_KAFKA_*``) configures both. Most common settings have the same name in both; the
ones named differently (SASL credentials, PEM files) are translated; settings that only tune
librdkafka's own producers and queues mean nothing to a Java consumer and are not passed on; a
setting in none of these lists is refused, naming it, rather than silently dropped.
``java.<name>`` passes ``<name>`` to the Java client only (and never to librdkafka), for the
settings that only the Java client has.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from kafkaio.errors import UntranslatableSetting

JAVA_ONLY_PREFIX = "java."

# The same name and meaning in librdkafka and the Java client (consumer and admin side).
SAME = frozenset({
    "bootstrap.servers", "client.id", "client.dns.lookup", "security.protocol",
    "sasl.mechanism", "sasl.kerberos.service.name", "sasl.oauthbearer.token.endpoint.url",
    "ssl.endpoint.identification.algorithm", "ssl.key.password", "ssl.cipher.suites",
    "session.timeout.ms", "heartbeat.interval.ms", "max.poll.interval.ms",
    "socket.connection.setup.timeout.ms", "socket.connection.setup.timeout.max.ms",
    "reconnect.backoff.ms", "reconnect.backoff.max.ms", "retry.backoff.ms",
    "retry.backoff.max.ms", "metadata.max.age.ms", "fetch.min.bytes", "fetch.max.bytes",
    "max.partition.fetch.bytes", "isolation.level", "check.crcs", "connections.max.idle.ms",
    "receive.message.max.bytes", "client.rack",
})

# Named differently: librdkafka name -> Java name (values unchanged).
RENAMED = {
    "sasl.mechanisms": "sasl.mechanism",
    "fetch.wait.max.ms": "fetch.max.wait.ms",
    "socket.send.buffer.bytes": "send.buffer.bytes",
    "socket.receive.buffer.bytes": "receive.buffer.bytes",
}

# librdkafka's own producer, queue and logging knobs: nothing a Java consumer reads.
LIBRDKAFKA_ONLY = frozenset({
    "linger.ms", "queue.buffering.max.ms", "queue.buffering.max.messages",
    "queue.buffering.max.kbytes", "batch.num.messages", "batch.size", "compression.codec",
    "compression.type", "compression.level", "acks", "request.required.acks",
    "enable.idempotence", "message.timeout.ms", "delivery.timeout.ms", "request.timeout.ms",
    "message.send.max.retries", "retries", "message.max.bytes", "transactional.id",
    "transaction.timeout.ms", "partitioner", "sticky.partitioning.linger.ms",
    "queued.min.messages", "queued.max.messages.kbytes", "enable.partition.eof",
    "enable.auto.commit", "enable.auto.offset.store", "auto.commit.interval.ms",
    "auto.offset.reset", "group.id", "statistics.interval.ms", "log_level", "debug",
    "log.connection.close", "log.queue", "log.thread.name", "api.version.request",
    "api.version.fallback.ms", "broker.version.fallback", "topic.metadata.refresh.interval.ms",
    "socket.keepalive.enable", "socket.nagle.disable", "socket.timeout.ms",
    "enable.ssl.certificate.verification", "ssl.ca.certificate.stores",
    "enable.sasl.oauthbearer.unsecure.jwt", "internal.termination.signal",
})

# Handled by ``java_client_conf`` itself (credentials and PEM files).
TRANSLATED = frozenset({"sasl.username", "sasl.password", "ssl.ca.location",
                        "ssl.certificate.location", "ssl.key.location"})

_JAAS_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}


def librdkafka_conf(conf: Mapping[str, str]) -> dict[str, str]:
    """``conf`` without the ``java.*`` settings, which librdkafka would refuse."""
    return {k: v for k, v in conf.items() if not k.startswith(JAVA_ONLY_PREFIX)}


def _quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _read_pem(key: str, path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError as exc:
        raise UntranslatableSetting(f"{key}={path}: cannot read it for the Java client "
                                    f"({exc.strerror or exc})") from None


def java_client_conf(conf: Mapping[str, str]) -> dict[str, str]:
    """The Java client's settings for the librdkafka settings ``conf`` (see the module's
    docstring); raises ``UntranslatableSetting`` naming a setting it cannot translate."""
    out: dict[str, str] = {}
    for key, value in conf.items():
        value = str(value)
        if key.startswith(JAVA_ONLY_PREFIX):
            out[key[len(JAVA_ONLY_PREFIX):]] = value
        elif key in SAME:
            out[key] = value
        elif key in RENAMED:
            out[RENAMED[key]] = value
        elif key not in LIBRDKAFKA_ONLY and key not in TRANSLATED:
            raise UntranslatableSetting(
                f"the Kafka client setting '{key}' has no equivalent that geops knows in the "
                f"Java client of Spark's Kafka connector; remove it, or give the Java client "
                f"its own setting as 'java.<name>' (e.g. -X java.{key}=...)")
    mechanism = out.get("sasl.mechanism", "").upper()
    if ("sasl.username" in conf or "sasl.password" in conf) and "sasl.jaas.config" not in out:
        module = _JAAS_MODULES.get(mechanism)
        if module is None:
            raise UntranslatableSetting(
                f"sasl.username/sasl.password with sasl.mechanism "
                f"'{mechanism or '(unset)'}': the Java client takes credentials for "
                f"{', '.join(_JAAS_MODULES)} only; give it java.sasl.jaas.config")
        out["sasl.jaas.config"] = (
            f"{module} required username={_quote(str(conf.get('sasl.username', '')))} "
            f"password={_quote(str(conf.get('sasl.password', '')))};")
    if "ssl.ca.location" in conf:
        out.setdefault("ssl.truststore.type", "PEM")
        out.setdefault("ssl.truststore.location", str(conf["ssl.ca.location"]))
    if "ssl.certificate.location" in conf or "ssl.key.location" in conf:
        if not ("ssl.certificate.location" in conf and "ssl.key.location" in conf):
            raise UntranslatableSetting("ssl.certificate.location and ssl.key.location go "
                                        "together for the Java client")
        out.setdefault("ssl.keystore.type", "PEM")
        out.setdefault("ssl.keystore.certificate.chain",
                       _read_pem("ssl.certificate.location", conf["ssl.certificate.location"]))
        out.setdefault("ssl.keystore.key",
                       _read_pem("ssl.key.location", conf["ssl.key.location"]))
    return out
