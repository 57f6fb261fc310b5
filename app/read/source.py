"""Reading publications with Spark's own Kafka connector (``readStream.format("kafka")``).

The connector (``org.apache.spark:spark-sql-kafka-0-10_2.13``, pinned in
``jvm/spark-kafka/pom.xml`` at PySpark's version) plans each micro-batch's offset ranges,
records them in the checkpoint, discovers new partitions, pools its consumers on the executors
and reads the ranges there. This module turns geops' settings into its options and reads the
one-line reasons out of a query it failed:

- the client settings are librdkafka's, translated for the Java client (``kafkaio.java_conf``);
- ``--max-records-per-trigger`` is ``maxOffsetsPerTrigger``, ``--on-data-loss`` is
  ``failOnDataLoss`` (fail: true), ``--starting-offsets`` is ``startingOffsets``;
- the outage limit bounds how long the connector itself waits: the driver's offset requests and
  an executor's consumer (its position and its fetches) wait that long for an answer. A query
  the connector still fails for Kafka's silence is restarted by the app (``app.main``) from its
  checkpoint, while the outage, counted from the failure, stays under the limit.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping

from config import Config
from kafkaio.java_conf import java_client_conf

PROVIDER_CLASS = "org.apache.spark.sql.kafka010.KafkaSourceProvider"
# A request of the connector's Java client waits at most this long for its answer (it is then
# sent again, within the outage limit).
REQUEST_TIMEOUT_MS = 5_000
# Each call of the connector's Java clients (the driver's offset lookups, above all) waits at
# most this long: longer than a cluster takes to elect a new leader for a lost node's partitions
# (the brokers' session timeout, 9 s by default), and short enough that the driver's admin client,
# which keeps a partition's leader once learnt and would wait for a lost node until this timeout
# (KAFKA-20673), is soon replaced by a new one that asks the cluster again.
API_TIMEOUT_MS = 15_000
# How long a fetch of the connector's consumers may wait on the broker for records to arrive
# (the Java client's default is 500 ms): not at all. A consumer that read a range sends its next
# fetch at once, at the range's end, and the broker parks it for this long; the connector's next
# read (each fetch is followed by two ListOffsets, for the partition's earliest and latest
# offsets) queues behind it on the same connection, so every millisecond parked is a
# millisecond added to each partition's read in every batch, most of what a small range takes
# (python -m bench.studies.read_ab; docs/results/connector, docs/results/live/costs). The
# connector fetches only offsets the driver saw committed, so
# its fetches find records and nothing polls an idle topic.
FETCH_MAX_WAIT_MS = 0
# The driver tries its offset lookups again this far apart, with a new admin client each time,
# as often as fits in the outage limit.
RETRY_INTERVAL_MS = 1_000


def offset_retries(outage_limit_s: float) -> int:
    """How often the driver tries an offset lookup: its attempts span the outage limit."""
    return max(1, math.ceil(outage_limit_s * 1000 / (API_TIMEOUT_MS + RETRY_INTERVAL_MS)))


def connector_jars() -> list[str]:
    """The connector's jars (resolved once into the geops JVM cache)."""
    from kafkaio import jvm

    return [str(j) for j in jvm.jars("spark-kafka")]


def has_connector(conf_value: str) -> bool:
    """Whether a ``spark.jars``/``spark.jars.packages`` value already brings the connector."""
    return "spark-sql-kafka-0-10" in conf_value


def source_options(cfg: Config, topic: str, starting_offsets: str) -> dict[str, str]:
    """The connector's options for reading ``topic`` with the app's settings."""
    limit = cfg.view.kafka.outage_limit
    options = {f"kafka.{k}": v for k, v in java_client_conf(cfg.kafka_client()).items()}
    options.update({
        "subscribe": topic,
        "startingOffsets": starting_offsets,
        "failOnDataLoss": "true" if cfg.view.app.on_data_loss == "fail" else "false",
        "includeHeaders": "false",
        "kafka.default.api.timeout.ms": str(min(int(limit * 1000), API_TIMEOUT_MS)),
        "kafka.request.timeout.ms": str(REQUEST_TIMEOUT_MS),
        "fetchOffset.numRetries": str(offset_retries(limit)),
        "fetchOffset.retryIntervalMs": str(RETRY_INTERVAL_MS),
        "kafkaConsumer.pollTimeoutMs": str(int(limit * 1000)),
    })
    options.setdefault("kafka.isolation.level", "read_committed")
    options.setdefault("kafka.fetch.max.wait.ms", str(FETCH_MAX_WAIT_MS))
    if cfg.view.app.max_records_per_trigger:
        options["maxOffsetsPerTrigger"] = str(cfg.view.app.max_records_per_trigger)
    return options


# A query the connector failed because Kafka did not answer (timeouts of the Java client).
_KAFKA_SILENT = re.compile(
    r"org\.apache\.kafka\.common\.errors\.(TimeoutException|DisconnectException|"
    r"NetworkException|NotLeaderOrFollowerException|LeaderNotAvailableException)"
    r"|Timeout of \d+ms expired|Timed out waiting for a node assignment"
    r"|Cannot fetch record for offset")
# A query the connector failed because offsets it must read are gone (failOnDataLoss=true).
_DATA_LOSS = re.compile(
    r"(Partition [^ ]+'s offset was changed from \d+ to \d+[^\n.]*"
    r"|Cannot fetch offset \d+[^\n]*?(?=\. |\n|$)"
    r"|[^\n]*[Ss]ome data may have been (lost|missed)[^\n]*"
    r"|[^\n]*OffsetOutOfRangeException[^\n]*)")


def kafka_silent(text: str) -> bool:
    """Whether a failed query's text says Kafka did not answer."""
    return _KAFKA_SILENT.search(text) is not None


def data_loss(text: str) -> str | None:
    """The connector's one line about offsets that no longer exist, if that failed the query."""
    found = _DATA_LOSS.search(text)
    if found is None:
        return None
    line = found.group(0).strip()
    return line[:400]


def describe_loss(checkpoint: str, topic: str, kafka_conf: Mapping[str, str]) -> str | None:
    """Which offsets the query has read that ``topic`` no longer holds, in one line: for each
    partition whose log now ends below, or starts above, where the last committed batch
    ended. None when the checkpoint has no committed batch or Kafka does not answer."""
    from app.read.offsetlog import batch_end_offsets, last_committed
    from kafkaio.errors import KafkaUnavailable
    from kafkaio.offsets import EndOffsets

    batch = last_committed(checkpoint)
    if batch is None:
        return None
    read = batch_end_offsets(checkpoint, batch)
    probe = EndOffsets(kafka_conf, timeout=10.0)
    try:
        listed = probe.listed(topic, [int(p) for p in read])
    except KafkaUnavailable:
        return None
    finally:
        probe.close()
    parts = []
    for p, (low, high) in sorted(listed.items()):
        at = read[str(p)]
        if high < at:
            parts.append(f"{topic}[{p}] now ends at {high} but the query has read to {at}")
        elif low > at:
            parts.append(f"{topic}[{p}] now starts at {low} but the query has read to {at}")
    return "; ".join(parts) or None
