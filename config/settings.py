"""The settings registry: every scalar setting declared once with its TOML path, environment
variable, command-line flag and parser, so that a bad value is always reported with the name the
user typed. Two tables are free-form pass-throughs: ``kafka.client`` (librdkafka properties for
every client) and ``spark.conf`` (Spark properties)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from config.choices import (
    APP_MODES,
    DISTRIBUTOR_MODES,
    FIRST_PERIODS,
    JOINS,
    METRICS,
    PARTITIONERS,
    POLICIES,
    STRATEGIES,
)
from config.values import (
    at_least,
    between,
    kafka_topic_name,
    nonempty,
    parse_bytes,
    parse_duration,
    parse_float,
    parse_int,
    parse_memory,
    parse_optional_memory,
    parse_str,
    positive,
    positive_memory,
    seconds_between,
)

TOPICS = ("publications", "subscriptions", "matches", "metrics", "control", "dead_letter", "status",
          "events", "positions", "object_state", "lease")

MAX_PORT = 65535
MAX_INT32 = 2**31 - 1      # Kafka's partition count, Avro int fields (P, W in the metrics)
# Static partitions and join workers: far beyond any real deployment, small enough that the
# partitioners' per-partition arrays fit in memory (a typo like 10**11 would exhaust it).
MAX_APP_SHAPE = 100_000


@dataclass(frozen=True)
class Setting:
    """One scalar setting: where it lives in the file, its env var and flag, how to parse it."""

    path: str
    group: str
    env: str
    flag: str
    parse: Callable[[Any], Any]
    help: str
    choices: tuple[str, ...] | None = None
    check: Callable[[Any], None] | None = None

    def convert(self, raw: Any) -> Any:
        """The parsed, checked value of ``raw``; a choice is spelled as registered."""
        value = self.parse(raw)
        if self.choices is not None:
            folded = {c.lower(): c for c in self.choices}
            if str(value).lower() not in folded:
                raise ValueError(f"expected one of {', '.join(self.choices)}, got {raw!r}")
            value = folded[str(value).lower()]
        if self.check is not None:
            self.check(value)
        return value


def _topic_settings() -> list[Setting]:
    """A name and a partition count for each logical topic."""
    out = []
    for t in TOPICS:
        dashed = t.replace("_", "-")
        out.append(
            Setting(f"topics.{t}.name", "topics", f"GEOPS_{t.upper()}_TOPIC", f"--{dashed}-topic",
                    parse_str, f"name of the {dashed} topic", check=kafka_topic_name)
        )
        out.append(
            Setting(f"topics.{t}.partitions", "topic-partitions", f"GEOPS_{t.upper()}_PARTITIONS",
                    f"--{dashed}-partitions", parse_int, f"partitions of the {dashed} topic",
                    check=between(1, MAX_INT32))
        )
    return out


SETTINGS: tuple[Setting, ...] = (
    Setting("kafka.bootstrap_servers", "kafka", "GEOPS_BOOTSTRAP_SERVERS", "--bootstrap-servers",
            parse_str, "Kafka bootstrap servers (default: the local broker if running)"),
    Setting("kafka.outage_limit", "kafka", "GEOPS_OUTAGE_LIMIT", "--outage-limit",
            parse_duration, "how long Kafka may not answer before a process gives up "
            "(retried with back-off until then)", check=positive),
    Setting("kafka.replication_factor", "topic-partitions", "GEOPS_REPLICATION_FACTOR",
            "--replication-factor", parse_int, "replication factor of created topics (0 = the "
            "broker's default.replication.factor)", check=between(0, 32767)),
    *_topic_settings(),
    Setting("broker.port", "broker", "GEOPS_BROKER_PORT", "--port", parse_int,
            "client port of the local broker (0 = any free port)", check=between(0, MAX_PORT)),
    Setting("broker.nodes", "broker", "GEOPS_BROKER_NODES", "--nodes", parse_int,
            "KRaft nodes of the local broker, each broker and controller (3 = a cluster with "
            "replication factor 3 and min.insync.replicas 2)", check=between(1, 5)),
    Setting("broker.heap", "broker", "GEOPS_BROKER_HEAP", "--heap", parse_memory,
            "heap of each local broker node's JVM, e.g. 512m", check=positive_memory),
    Setting("broker.state_dir", "state", "GEOPS_STATE_DIR", "--state-dir", parse_str,
            "directory for the local broker's data and logs and the default checkpoints"),
    Setting("app.app_id", "app", "GEOPS_APP_ID", "--app-id", parse_str,
            "name of this app instance in metrics and matches"),
    Setting("app.strategy", "app", "GEOPS_APP_STRATEGY", "--strategy", parse_str,
            "subscription partitioning strategy", choices=STRATEGIES.names),
    Setting("app.join", "app", "GEOPS_APP_JOIN", "--join", parse_str,
            "where the join runs: static-local or stream-local", choices=JOINS.names),
    Setting("app.workers", "app", "GEOPS_APP_WORKERS", "--workers", parse_int,
            "join workers W (0 = all executor cores)", check=between(0, MAX_APP_SHAPE)),
    Setting("app.partitions", "app", "GEOPS_APP_PARTITIONS", "--partitions", parse_int,
            "static partitions P", check=between(1, MAX_APP_SHAPE)),
    Setting("app.partitioner", "app", "GEOPS_APP_PARTITIONER", "--partitioner", parse_str,
            "spatial partitioner", choices=PARTITIONERS.names),
    Setting("app.trigger", "app", "GEOPS_APP_TRIGGER", "--trigger", parse_duration,
            "micro-batch trigger interval: 0 = the next batch as soon as the last is done and "
            "publications wait (idle, the query looks for new ones every "
            "spark.sql.streaming.pollingDelay); e.g. 500ms for a fixed interval",
            check=at_least(0)),
    Setting("app.one_stage_records", "app", "GEOPS_APP_ONE_STAGE_RECORDS",
            "--one-stage-records", parse_int,
            "a batch of at most this many records is read, decoded and routed in the tasks "
            "that join it, one stage instead of two (0 = every batch in two: a read stage, "
            "then the join)", check=at_least(0)),
    Setting("app.large_batch_read", "app", "GEOPS_APP_LARGE_BATCH_READ", "--large-batch-read",
            parse_str,
            "who reads a batch too large for one stage: direct (the app's read tasks, one per "
            "core, each a slice of the batch's offset ranges) or connector (Spark's connector's "
            "tasks)", choices=("direct", "connector")),
    Setting("app.max_records_per_trigger", "app", "GEOPS_APP_MAX_RECORDS_PER_TRIGGER",
            "--max-records-per-trigger", parse_int, "records per micro-batch (0 = no limit)",
            check=at_least(0)),
    Setting("app.checkpoint", "app", "GEOPS_APP_CHECKPOINT", "--checkpoint", parse_str,
            "checkpoint directory (default: <state-dir>/checkpoints/<app-id>)"),
    Setting("app.stop_after_idle", "app", "GEOPS_APP_STOP_AFTER_IDLE", "--stop-after-idle",
            parse_duration, "stop once no input arrived for this long after the query started "
            "(0 = never)"),
    Setting("app.on_data_loss", "app", "GEOPS_APP_ON_DATA_LOSS", "--on-data-loss", parse_str,
            "when offsets the query must read no longer exist: fail, or continue from the "
            "nearest valid offsets and record what was skipped", choices=("fail", "continue")),
    Setting("app.mode", "app", "GEOPS_APP_MODE", "--mode", parse_str,
            "how the app answers: micro-batch (Spark Structured Streaming, balanced by the "
            "distributor) or real-time (long-running tasks that match each publication as it "
            "arrives against the whole static side and write its Match at once)",
            choices=APP_MODES.names),
    Setting("app.realtime_task_memory", "app", "GEOPS_APP_REALTIME_TASK_MEMORY",
            "--real-time-task-memory", parse_bytes,
            "memory each real-time task may use to hold every subscription, e.g. 2g; 0: Spark's "
            "spark.executor.pyspark.memory, else in local mode the available memory shared by "
            "the workers (a cluster without either is not checked)"),
    Setting("app.delivery", "app", "GEOPS_APP_DELIVERY", "--delivery", parse_str,
            "how a micro-batch's matches and metrics reach Kafka: exactly-once (one "
            "transaction per batch; a batch run again after a crash is not written twice) or "
            "at-least-once (flushed; a batch run again writes again)",
            choices=("exactly-once", "at-least-once")),
    Setting("app.output_from", "app", "GEOPS_APP_OUTPUT_FROM", "--output-from", parse_str,
            "who writes a micro-batch's Match records: driver (the join tasks' results are "
            "collected, merged and written by the driver) or tasks (each join task writes the "
            "matches of the publications it answers alone, the driver those several workers "
            "share)", choices=("driver", "tasks")),
    Setting("app.fold_bytes", "app", "GEOPS_APP_FOLD_BYTES", "--fold-bytes", parse_bytes,
            "subscription changes pending as deltas before they are folded into the static "
            "partitions (also at least a tenth of the static side; a change that waited 20 "
            "batches is folded anyway), e.g. 4m"),
    Setting("app.static_snapshot", "app", "GEOPS_APP_STATIC_SNAPSHOT", "--static-snapshot",
            parse_str,
            "keep a snapshot of the static side (micro-batch mode) in the checkpoint, written "
            "in the background, and restart from it instead of scanning the subscriptions "
            "topic: on or off", choices=("on", "off")),
    Setting("app.lease_time", "app", "GEOPS_APP_LEASE_TIME", "--lease-time", parse_duration,
            "how long the micro-batch app's lease (on the lease topic) lasts without a "
            "heartbeat before a standby (geops app --standby) takes over; the app writes a "
            "heartbeat every quarter of it", check=seconds_between(0.5, 600)),
    Setting("app.events", "app", "GEOPS_APP_EVENTS", "--events", parse_str,
            "geofence events of moving objects (publications with an object id) against the "
            "fences (subscriptions with detect kinds): on (a second query of the app keeps "
            "each object's state and writes the events topic) or off",
            choices=("on", "off")),
    Setting("app.object_ttl", "app", "GEOPS_APP_OBJECT_TTL", "--object-ttl", parse_duration,
            "a moving object unseen for longer is forgotten, with an exit (reason expired) from "
            "every fence it was in, at its next position", check=positive),
    Setting("spark.master", "spark", "GEOPS_SPARK_MASTER", "--master", parse_str,
            "Spark master when spark-submit was not given one"),
    Setting("spark.ui", "spark", "GEOPS_SPARK_UI", "--spark-ui", parse_str,
            "the Spark UI of the app, at spark.ui.port of [spark.conf] (4040; the next free "
            "port when it is taken)", choices=("on", "off")),
    Setting("spark.driver_memory", "spark", "GEOPS_SPARK_DRIVER_MEMORY", "--driver-memory",
            parse_memory, "heap of the driver JVM (in local mode also the executors'), given to "
            "spark-submit at launch, e.g. 4g", check=positive_memory),
    Setting("spark.executor_memory", "spark", "GEOPS_SPARK_EXECUTOR_MEMORY", "--executor-memory",
            parse_optional_memory, "heap of each executor JVM on a cluster (empty: Spark's "
            "default, 1g; local mode: unused)", check=positive_memory),
    Setting("spark.driver_max_result_size", "spark", "GEOPS_SPARK_DRIVER_MAX_RESULT_SIZE",
            "--driver-max-result-size", parse_memory, "largest result of one Spark job the driver "
            "accepts (0 = no limit)"),
    Setting("spark.driver_java_options", "spark", "GEOPS_SPARK_DRIVER_JAVA_OPTIONS",
            "--driver-java-options", parse_str, "extra JVM options of the driver, given to "
            "spark-submit at launch"),
    Setting("distributor.metric", "distributor", "GEOPS_DISTRIBUTOR_METRIC", "--metric", parse_str,
            "load metric: LB (processing time) or DB (item counts)", choices=METRICS.names),
    Setting("distributor.mode", "distributor", "GEOPS_DISTRIBUTOR_MODE", "--mode", parse_str,
            "adaptive (the default) commands rebalances when the predicted saving pays for "
            "the move; dynamic by the paper's Table 1; observe only reports",
            choices=DISTRIBUTOR_MODES.names),
    Setting("distributor.policy", "distributor", "GEOPS_DISTRIBUTOR_POLICY", "--policy", parse_str,
            "redistribution policy", choices=POLICIES.names),
    Setting("distributor.threshold", "distributor", "GEOPS_DISTRIBUTOR_THRESHOLD", "--threshold",
            parse_float, "MLDC threshold", check=at_least(0.0)),
    Setting("distributor.min_items", "distributor", "GEOPS_DISTRIBUTOR_MIN_ITEMS", "--min-items",
            parse_int, "M: items processed before redistributing", check=at_least(0)),
    Setting("distributor.wait_periods", "distributor", "GEOPS_DISTRIBUTOR_WAIT_PERIODS",
            "--wait-periods", parse_int, "N: periods between redistributions", check=at_least(0)),
    Setting("distributor.period", "distributor", "GEOPS_DISTRIBUTOR_PERIOD", "--period",
            parse_duration, "D: monitoring period, e.g. 10s", check=positive),
    Setting("distributor.min_improvement", "distributor", "GEOPS_DISTRIBUTOR_MIN_IMPROVEMENT",
            "--min-improvement", parse_float, "miMLDC: required MLDC improvement",
            check=at_least(0.0)),
    Setting("distributor.first_period", "distributor", "GEOPS_DISTRIBUTOR_FIRST_PERIOD",
            "--first-period", parse_str, "when the first period ends: min-items (as soon as M "
            "items are in) or full (after D, as the paper)", choices=FIRST_PERIODS.names),
    Setting("distributor.resync_periods", "distributor", "GEOPS_DISTRIBUTOR_RESYNC_PERIODS",
            "--resync-periods", parse_int, "periods to wait for the app to report a commanded "
            "epoch before re-synchronising with the epoch it does report", check=at_least(1)),
    Setting("distributor.min_saving", "distributor", "GEOPS_DISTRIBUTOR_MIN_SAVING",
            "--min-saving", parse_float, "adaptive: the smallest saving worth a rebalance, as a "
            "share of a batch's duration", check=at_least(0.0)),
    Setting("distributor.safety_margin", "distributor", "GEOPS_DISTRIBUTOR_SAFETY_MARGIN",
            "--safety-margin", parse_float, "adaptive: how many times over the predicted saving "
            "must pay for the move", check=at_least(0.0)),
    Setting("distributor.stability_tolerance", "distributor",
            "GEOPS_DISTRIBUTOR_STABILITY_TOLERANCE", "--stability-tolerance", parse_float,
            "adaptive: how far (total variation of the per-partition load shares) a batch may "
            "be from the current load pattern before it starts a new one",
            check=at_least(0.0)),
    Setting("distributor.stop_after_idle", "distributor", "GEOPS_DISTRIBUTOR_STOP_AFTER_IDLE",
            "--stop-after-idle", parse_duration,
            "stop once no metrics of the app arrived for this long (0 = never)"),
    Setting("dashboard.host", "dashboard", "GEOPS_DASHBOARD_HOST", "--host", parse_str,
            "address the dashboard listens on (127.0.0.1: this machine only)",
            check=nonempty),
    Setting("dashboard.port", "dashboard", "GEOPS_DASHBOARD_PORT", "--port", parse_int,
            "port of the dashboard (0 = any free port)", check=between(0, MAX_PORT)),
    Setting("dashboard.period", "dashboard", "GEOPS_DASHBOARD_PERIOD", "--period",
            parse_duration, "the page updates once a period, and each time series gets a "
            "point per period", check=seconds_between(0.2, 60)),
    Setting("dashboard.history", "dashboard", "GEOPS_DASHBOARD_HISTORY", "--history",
            parse_duration, "how far back the time series reach (read back from Kafka at "
            "start)", check=seconds_between(10, 2 * 3600)),
    Setting("dashboard.map_window", "dashboard", "GEOPS_DASHBOARD_MAP_WINDOW", "--map-window",
            parse_duration, "the map colours each partition by its load over this last "
            "stretch and shows its publications", check=seconds_between(0.2, 600)),
)
BY_PATH = {s.path: s for s in SETTINGS}
FREE_TABLES = ("kafka.client", "spark.conf")
# Spark properties with a setting of their own: Spark reads them only when its JVM starts, so
# ``geops app`` gives them to spark-submit (``app/launch/jvm.py``); in [spark.conf] they would do
# nothing.
LAUNCH_PROPERTIES = {"spark.driver.memory": "spark.driver_memory",
                     "spark.executor.memory": "spark.executor_memory",
                     "spark.driver.maxResultSize": "spark.driver_max_result_size",
                     "spark.driver.extraJavaOptions": "spark.driver_java_options"}
