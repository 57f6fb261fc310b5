"""Producers, consumers and admin clients built from librdkafka settings.

Every client takes the shared settings of ``Config.kafka_client()`` (the bootstrap servers plus
every librdkafka property of ``kafka.client``: security.protocol, sasl.*, ssl.*, ...), so a
secured cluster works everywhere.
Misconfiguration and an unreachable cluster become ``KafkaUnavailable``/``ConfigError`` with a
message that says what to do, never a librdkafka traceback. librdkafka's own log lines go
through Python logging (``LIBRDKAFKA_LOG``), not straight to the process's stderr.
"""

from __future__ import annotations

import logging
import re
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient

from config import ConfigError
from kafkaio import listener
from kafkaio.errors import KafkaUnavailable, TopicMissing
from kafkaio.java_conf import librdkafka_conf
from kafkaio.listener import Listener
from kafkaio.retry import Outage

# librdkafka writes its log lines ("%3|...|FAIL|rdkafka#consumer-1| ... Connection refused") to
# the process's stderr from its own threads, for as long as a client lives, also after the
# broker is gone for good. Given a logger, confluent-kafka queues them and hands them to it
# when the client is polled (consume, poll, flush): they go where the process's logging goes,
# in its format, and a client nobody polls any more stays quiet. Warnings and errors pass (a
# refused login, a bad certificate, a broker that does not answer), each line once per
# REPEAT_WINDOW_S (a client retrying a dead broker says the same on every attempt, and one
# not polled for a while says it all at once); librdkafka keeps its notices to itself (they
# would only queue up in clients that are rarely polled), and its debug lines come when a
# client is given librdkafka's ``debug`` property.
log = logging.getLogger("geops.kafka")
LIBRDKAFKA_LOG = logging.getLogger("geops.kafka.librdkafka")
LIBRDKAFKA_LOG.setLevel(logging.WARNING)
LIBRDKAFKA_LOG_LEVEL = 4  # syslog's warning: what librdkafka passes on
REPEAT_WINDOW_S = 30.0


# What librdkafka adds to a failed connection's line that differs from attempt to attempt.
_ATTEMPT = re.compile(r" \(after \d+ms in state .*\)$")


class RepeatFilter(logging.Filter):
    """Lets the same line through once per ``window`` seconds; the next time it is shown it
    says how often it was left out. Lines that differ only in how long an attempt took (``(after
    12ms in state CONNECT)``) are the same line."""

    def __init__(self, window: float = REPEAT_WINDOW_S,
                 clock: Callable[[], float] = time.monotonic):
        super().__init__()
        self.window, self._clock = window, clock
        self._shown: dict[str, list] = {}  # line -> [shown at, left out since]
        self._lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        """False for a line shown less than ``window`` seconds ago."""
        line = record.getMessage()
        key = _ATTEMPT.sub("", line)
        now = self._clock()
        with self._lock:
            seen = self._shown.get(key)
            if seen is not None and now - seen[0] < self.window:
                seen[1] += 1
                return False
            if len(self._shown) >= 1000:
                self._shown = {k: v for k, v in self._shown.items() if now - v[0] < self.window}
            self._shown[key] = [now, 0]
        if seen is not None and seen[1]:
            record.msg, record.args = (f"{line} ({seen[1]} more times in the "
                                       f"{now - seen[0]:.0f} s before)"), ()
        return True


class ReportedElsewhere(logging.Filter):
    """Leaves out librdkafka's lines about a request the ACLs refused: the refused produce,
    fetch or admin request reports it to its caller, which says it once, naming the principal
    and the operation (``denied``)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "authorization failed" not in record.getMessage().lower()


LIBRDKAFKA_LOG.addFilter(RepeatFilter())
LIBRDKAFKA_LOG.addFilter(ReportedElsewhere())


def client_conf(base: Mapping[str, str], extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Shared settings, then per-client defaults/overrides (``extra`` wins); the Java-only
    ``java.*`` settings are left out (``kafkaio.java_conf``)."""
    conf: dict[str, Any] = librdkafka_conf(base)
    conf.update(extra or {})
    return conf


def _make(kind: type, conf: dict[str, Any]) -> Any:
    """A client of ``kind`` logging through ``LIBRDKAFKA_LOG``; the logger is added here only,
    so the settings passed around (and serialised) stay plain strings."""
    logging_conf: dict[str, Any] = {"logger": LIBRDKAFKA_LOG}
    if conf.get("debug"):
        LIBRDKAFKA_LOG.setLevel(logging.DEBUG)
    else:
        logging_conf["log_level"] = LIBRDKAFKA_LOG_LEVEL
    try:
        return kind({**logging_conf, **conf})
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
    client: Consumer | AdminClient, topic: str, timeout: float = 10.0,
    conf: Mapping[str, Any] | None = None,
) -> list[int]:
    """Partition ids of a topic; KafkaUnavailable if it does not exist, the ACLs of the
    client's principal (its settings ``conf``) hide it, or Kafka is unreachable."""
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
        raise KafkaUnavailable(denied(tmd.error, conf or {}, "DESCRIBE", f"topic '{topic}'")
                               or f"topic '{topic}': {tmd.error.str()}")
    return sorted(tmd.partitions)


# A client that only probes the cluster says what failed itself, in one line: its librdkafka
# log lines (the same failure, retried) are not shown.
_QUIET_LOG = logging.getLogger("geops.kafka.probe")
_QUIET_LOG.addHandler(logging.NullHandler())
_QUIET_LOG.propagate = False


def check_reachable(conf: Mapping[str, str], timeout: float = 10.0,
                    outage_limit: float | None = None) -> None:
    """Return once the cluster answers metadata; otherwise say what stands in the way.

    What no retry mends ends the wait at once with ``KafkaUnavailable``: credentials refused,
    a certificate not trusted, a listener that answers in another protocol. Nothing listening,
    or a listener that speaks the client's protocol but does not serve it, ends it after
    ``timeout``. A broker that accepts connections but does not answer (paused, partitioned,
    still starting) is an outage like any later one: with ``outage_limit`` it is waited for
    with back-off and a warning now and then, and ``KafkaOutage`` ends the wait past the limit;
    without one it is ``KafkaUnavailable`` after ``timeout``, for callers that retry themselves.
    """
    failed: dict[int, str] = {}

    def on_error(err: KafkaError) -> None:
        failed.setdefault(err.code(), err.str())

    client = _make(AdminClient, client_conf(conf, {"error_cb": on_error,
                                                   "logger": _QUIET_LOG}))
    servers = str(conf.get("bootstrap.servers") or "")
    protocol = str(conf.get("security.protocol", "plaintext"))
    started = time.monotonic()
    # the other failures' ``timeout`` counts from the last silence: a broker that answers again
    # after a pause gets its time to serve the client's requests
    since = started
    outage: Outage | None = None
    while True:  # short requests, so refused credentials or TLS end the wait at once
        step = max(min(_PROBE_STEP_S, since + timeout - time.monotonic()), 0.05)
        try:
            client.list_topics(timeout=_PROBE_STEP_S if outage is not None else step)
            if outage is not None:
                outage.ok()
            return
        except KafkaException as exc:
            client.poll(0)  # serves the error callbacks the failed request queued
            last = exc
        if failed.keys() & _DEFINITE:
            raise KafkaUnavailable(_refused(conf, failed))
        met = listener.probe(servers, protocol)
        if met is Listener.FOREIGN:
            raise KafkaUnavailable(_other_protocol(servers, protocol))
        if met is Listener.SILENT and outage_limit is not None:
            if outage is None:
                outage = Outage(servers, outage_limit)
                log.warning("Kafka at %s accepts connections but does not answer; waiting for "
                            "it up to the outage limit of %.0f s (kafka.outage_limit / "
                            "--outage-limit)", servers, outage_limit)
            outage.failed(f"connecting: it {Listener.SILENT.value}", silent_since=started)
            since = time.monotonic()
            continue
        if time.monotonic() - since >= timeout:
            raise KafkaUnavailable(_unreachable(last, servers, protocol, met, timeout))


_PROBE_STEP_S = 0.5
# Failures no retry mends: the probe says so without waiting out its timeout.
_DEFINITE = {KafkaError._AUTHENTICATION, KafkaError._SSL}


def _refused(conf: Mapping[str, str], failed: dict[int, str]) -> str:
    servers = conf.get("bootstrap.servers")
    if KafkaError._AUTHENTICATION in failed:
        return (f"Kafka at {servers} refused the credentials: "
                f"{_ATTEMPT.sub('', failed[KafkaError._AUTHENTICATION])}; check "
                f"sasl.username/sasl.password (or the SSL settings) of [kafka.client] / -X")
    return (f"the TLS handshake with Kafka at {servers} failed: "
            f"{_ATTEMPT.sub('', failed[KafkaError._SSL])}")


def _other_protocol(servers: str, protocol: str) -> str:
    wants = ("PLAINTEXT or SASL_PLAINTEXT: no TLS" if protocol.lower() in ("ssl", "sasl_ssl")
             else "e.g. SASL_SSL: TLS, then SASL")
    return (f"Kafka at {servers} answers in another security protocol than this client's "
            f"security.protocol={protocol}: its listener wants {wants}")


def _unreachable(exc: KafkaException, servers: str, protocol: str, met: Listener,
                 timeout: float) -> str:
    if met is Listener.SILENT:
        return (f"Kafka at {servers} accepts connections but has not answered for "
                f"{timeout:.0f} s (a paused, partitioned or starting broker)")
    if met is Listener.ANSWERS:
        return (f"Kafka at {servers} answers but closed this client's requests for "
                f"{timeout:.0f} s: its listener may want another security protocol than this "
                f"client's security.protocol={protocol} (e.g. SASL_PLAINTEXT: SASL, then "
                f"requests)")
    return _explain(exc, servers)


# The broker's answers that say an ACL does not allow the request, by what they name.
_DENIED = {
    KafkaError.TOPIC_AUTHORIZATION_FAILED: "topic",
    KafkaError.GROUP_AUTHORIZATION_FAILED: "consumer group",
    KafkaError.CLUSTER_AUTHORIZATION_FAILED: "cluster",
    KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED: "transactional id",
}


def principal(conf: Mapping[str, Any]) -> str:
    """The principal a client with these settings is, as Kafka's ACLs name it."""
    user = conf.get("sasl.username")
    return f"User:{user}" if user else "this client (no SASL user)"


def denied(err: KafkaError, conf: Mapping[str, Any], operation: str, resource: str) -> str | None:
    """One line naming the operation the broker's ACLs refused (``operation`` on ``resource``,
    e.g. "WRITE", "topic 'control'"), or None when ``err`` is not a refusal."""
    kind = _DENIED.get(err.code())
    if kind is None:
        return None
    if kind == "cluster" and "idempotence" in err.str():
        # Kafka asks an idempotent producer for WRITE on some topic before it gives it an id.
        return (f"Kafka denied {principal(conf)} {operation} on {resource}: it may write to "
                f"no topic, so the broker refused it a producer id ({err.name()})")
    if kind == "consumer group":
        resource = f"its consumer group ({resource})"
    return f"Kafka denied {principal(conf)} {operation} on {resource} ({err.name()})"


def _explain(exc: KafkaException, servers: str | None = None) -> str:
    err = exc.args[0] if exc.args else exc
    text = err.str() if isinstance(err, KafkaError) else str(err)
    where = f" at {servers}" if servers else ""
    return (f"cannot reach Kafka{where}: {text}. Start a local broker with "
            f"`geops broker start` or set --bootstrap-servers / GEOPS_BOOTSTRAP_SERVERS")
