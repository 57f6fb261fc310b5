"""The geops Spark application: ``spark-submit app/main.py [options]`` or ``geops app``.

Reads publications from Kafka, joins them with the partitioned subscriptions (one of the four
strategies, static-local or stream-local), writes matches, and reports per-partition load on
the metrics topic while following rebalance commands from the control topic.
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

import config
from app.errors import EndedBeforeQuery
from app.static.snapshot import root_of
from config import Config, ConfigError, one_line
from config.exitcodes import (
    EXIT_DATA_LOSS,
    EXIT_FAILED,
    EXIT_FATAL,
    EXIT_OK,
    EXIT_OUTAGE,
    EXIT_USAGE,
)

if TYPE_CHECKING:
    from app.batch.control import ControlChannel
    from app.batch.parts import KafkaSide, RunnerSettings, StaticParts, Topics
    from app.batch.runner import BatchRunner, BatchState
    from app.events.query import EventsQuery
    from app.launch.jvm import Watchdog
    from app.static.side import StaticSide
    from app.static.snapshot import Identity, Snapshot
    from app.static.snapshot_writer import SnapshotWriter
    from app.subscriptions.feed import SubscriptionFeed
    from app.subscriptions.scan import Scan, SubscriptionSet
    from geops.strategies.strategy import Layout
    from kafkaio.lease import LeaseKeeper
    from schemas.assignment import Owners

log = logging.getLogger("geops.app")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="geops app",
        description="Run the geops streaming app: publications from Kafka are matched against "
                    "the subscriptions topic; matches, per-partition load and dead letters go "
                    "to Kafka; rebalance commands on the control topic are applied between "
                    "micro-batches.")
    parser.add_argument("--starting-offsets", choices=("earliest", "latest"),
                        default="earliest",
                        help="where a new query (no checkpoint yet) starts reading "
                             "publications (default: earliest)")
    parser.add_argument("--standby", action="store_true",
                        help="start as a standby of the app (same app id and checkpoint): "
                             "build or load the static side, then wait until the running "
                             "app's lease lapses and take its checkpoint over")
    config.add_arguments(parser, ["kafka", "state", "topics", "app", "spark"])
    return parser


def checkpoint_dir(cfg: Config) -> str:
    return cfg.view.app.checkpoint or str(cfg.state_dir() / "checkpoints" / cfg.view.app.app_id)


def ready_path(checkpoint: str) -> Path:
    """A file the app writes (with its pid) once its query has started and takes publications,
    and removes when it starts and stops: what a supervisor or a test waits for."""
    return Path(checkpoint) / "geops-ready"


# Spark's and the Java clients' loggers set above WARN, and why:
QUIET_LOGGERS = {
    # working through a backlog, every batch outlasts the trigger; Spark would warn every batch
    "org.apache.spark.sql.execution.streaming.runtime.ProcessingTimeExecutor": "ERROR",
    # run() reports a failed query in one line for an expected condition (Kafka outage, data
    # loss) and with Spark's whole text otherwise; Spark's own report would repeat it
    "org.apache.spark.sql.execution.streaming.runtime.MicroBatchExecution": "FATAL",
    # a failed task is in the query's failure too; the executor and the task scheduler would
    # each log its stack trace first (in a Kafka outage: every retry)
    "org.apache.spark.executor.Executor": "FATAL",
    "org.apache.spark.scheduler.TaskSetManager": "FATAL",
    # the connector's offset lookups are tried again with a new admin client after a timeout
    # (app.read.source.API_TIMEOUT_MS), each attempt with its stack trace; the query's failure says
    # when they ran out
    "org.apache.spark.sql.kafka010.KafkaOffsetReaderAdmin": "FATAL",
    # the connector's Java clients warn once a second while a node is away; the Python
    # clients' log (kafkaio.clients) says it once
    "org.apache.kafka.clients.NetworkClient": "ERROR",
}


def _session(cfg: Config):
    """A Spark session honouring spark-submit's settings, else our configured master."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark import SparkConf
    from pyspark.sql import SparkSession

    conf = SparkConf()
    if not conf.contains("spark.master"):
        conf.setMaster(cfg.view.spark.master)
    _add_connector(conf)
    ui = {"spark.ui.enabled": "true" if cfg.view.spark.ui == "on" else "false"}
    for key, value in {**ui, **cfg.view.spark.conf}.items():
        if not conf.contains(key):
            conf.set(key, str(value))
    conf.setAppName(f"geops-{cfg.view.app.app_id}")
    spark = SparkSession.builder.config(conf=conf).getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    if spark.sparkContext.uiWebUrl:
        log.info("Spark UI at %s", spark.sparkContext.uiWebUrl)
    jvm = spark.sparkContext._jvm
    for name, level in QUIET_LOGGERS.items():
        jvm.org.apache.logging.log4j.core.config.Configurator.setLevel(
            name, getattr(jvm.org.apache.logging.log4j.Level, level))
    return spark


def _add_connector(conf: Any) -> None:
    """Put Spark's Kafka connector on the classpath unless spark-submit was given it
    (``--packages``/``--jars``); it takes effect where this process starts the JVM (``geops
    app`` gives spark-submit ``--jars``; ``spark-submit app/main.py`` needs ``--packages``)."""
    from app.read.source import connector_jars, has_connector

    if os.environ.get("PYSPARK_GATEWAY_PORT"):  # spark-submit started the JVM: too late
        return
    given = ",".join(conf.get(key, "") for key in ("spark.jars", "spark.jars.packages"))
    if not has_connector(given):
        conf.set("spark.jars", ",".join(filter(None, [conf.get("spark.jars", ""),
                                                      *connector_jars()])))


def _check_connector(spark: Any) -> str | None:
    """Why the app cannot read Kafka with this JVM (the connector is not on its classpath)."""
    from app.read.source import PROVIDER_CLASS

    try:
        spark.sparkContext._jvm.java.lang.Class.forName(
            PROVIDER_CLASS, True, spark.sparkContext._jvm.Thread.currentThread()
            .getContextClassLoader())
    except Exception:  # Py4JJavaError: ClassNotFoundException
        return ("Spark's Kafka connector is not on the driver's classpath: run the app with "
                "`geops app`, or give spark-submit --packages "
                "org.apache.spark:spark-sql-kafka-0-10_2.13:<your Spark version>")
    return None


def _watch(spark, cfg: Config):
    """Start the watchdog that ends the driver when its JVM is gone (app/launch/jvm.py); warn when
    the JVM lacks the launch settings of ``geops app``."""
    from app.launch.jvm import Watchdog, launched_by_geops

    if not launched_by_geops(spark.sparkContext._jvm):
        log.warning("the driver JVM was not started by `geops app`: spark.driver_memory (%s) "
                    "does not apply, and an OutOfMemoryError may leave it hanging; give "
                    "spark-submit --driver-memory and --driver-java-options "
                    "-XX:+ExitOnOutOfMemoryError", cfg.view.spark.driver_memory)
    jsc = spark.sparkContext._jsc
    return Watchdog(lambda: jsc.sc().isStopped()).start()


def starting(status: dict) -> bool:
    """Whether a streaming query is still starting, before its first trigger.

    Spark reports "Initializing sources" while it starts the query; on a busy machine that alone
    takes seconds. An app that counted that time as idle stopped before its first batch.
    """
    return status["message"].startswith("Initializing")


def run(cfg: Config, starting_offsets: str = "earliest", standby: bool = False) -> int:
    """Run the app until it is stopped, idle for ``app.stop_after_idle`` or fails;
    ``standby``: get everything ready, then wait until the active app's lease lapses and take
    its checkpoint over (``app.launch.lease``)."""
    from app.batch.parts import KafkaSide, RunnerSettings
    from app.batch.runner import BatchState

    if cfg.view.app.mode == "real-time":
        return _refuse_standby() if standby else run_real_time(cfg, starting_offsets)

    kafka_conf = cfg.kafka_client()
    events_on = cfg.view.app.events == "on"
    topics = _topics(cfg, events_on)
    checkpoint = checkpoint_dir(cfg)
    stopping, lease = (_stop_on_signals() if standby else []), None
    try:
        options = _source_options(cfg, topics, starting_offsets)
        feed, ends = _start_feed(cfg, kafka_conf, topics, checkpoint)
        events_start = _positions_end(cfg, kafka_conf, topics, feed) if events_on else ""
        spark, watchdog = _start_spark(cfg, feed)
        lease = None if standby else _claim_lease(cfg, kafka_conf, spark, watchdog, feed)
        workers = cfg.view.app.workers or spark.sparkContext.defaultParallelism
        identity, snapshot, scan, found, strategy = _subscriptions(
            cfg, kafka_conf, checkpoint, ends, feed, spark, watchdog, workers)
        control, epoch, owners = _recover_assignment(cfg, kafka_conf, topics,
                                                     strategy.num_partitions, workers, spark,
                                                     watchdog)
    except EndedBeforeQuery as ended:
        if lease is not None:
            lease.close()
        return ended.exit_code
    from app.static.snapshot_writer import SnapshotWriter

    cross = _cross(scan, snapshot) if events_on else {}  # before the scan's cache is dropped
    writer = (None if identity is None or standby
              else SnapshotWriter(root_of(checkpoint), identity, snapshot))
    static = _build_static(cfg, spark, strategy, scan, found, workers, owners, epoch,
                           snapshot, writer, ends)
    state = BatchState(epoch, owners)
    runner = _warm_runner(RunnerSettings.of(cfg, checkpoint),
                          KafkaSide(kafka_conf, topics, control, feed),
                          _static_parts(spark, strategy, found, workers, static, topics,
                                        cross, writer),
                          state, workers)
    code, events = EXIT_OK, None
    try:
        if standby:
            lease, code = _wait_standby(cfg, kafka_conf, spark, feed, stopping, options)
            if code != EXIT_OK or stopping:
                return code
            writer = runner.side.snapshots = _takeover_writer(checkpoint, identity, snapshot)
        events = _open_outputs(runner, lease, lambda: _events_query(
            cfg, spark, kafka_conf, topics, checkpoint, events_start) if events_on else None)
        start_query = _query_starter(cfg, spark, options, runner, checkpoint)
        query = _start_queries(checkpoint, start_query, events)
        state.last_input = time.monotonic()
        log.info("streaming from '%s' (checkpoint %s)", topics.publications, checkpoint)
        stopping = stopping if standby else _stop_on_signals()
        supervisor = Supervisor(kafka_conf, cfg.view.kafka.outage_limit)
        code, message = _supervise(cfg, runner, query, start_query, stopping, supervisor,
                                   events)
        if message is not None:
            log.error("%s", message)
    finally:
        if runner.output is not None:
            ready_path(checkpoint).unlink(missing_ok=True)
        if events is not None:
            _stop_events(events, drain=code == EXIT_OK, wanted=runner.wrote_positions)
        runner.close(abandon=code != EXIT_OK)  # and the lease it checked
        feed.close(wait=code != EXIT_OUTAGE)
        control.close()
        if writer is not None:
            writer.close()
        static.close()
        log.info("stopped after %d batches, %d records", state.batches, state.records)
        watchdog.disarm()
        spark.stop()
    return code


def _open_outputs(runner: BatchRunner, lease: LeaseKeeper | None,
                  events: Callable[[], EventsQuery | None]) -> EventsQuery | None:
    """Open the matching query's output and make the events query (``events``) with its own,
    side by side: under exactly-once each producer's ``init_transactions`` waits for the
    coordinator to abort what an older process of the app left open (a frozen app a standby
    took over from leaves a transaction open), and the two wait at once. Returns the events
    query."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1, thread_name_prefix="geops-events-output") as pool:
        made = pool.submit(events)
        runner.start_output(lease)
        return made.result()


def _start_queries(checkpoint: str, start_query: Callable[[], Any],
                   events: EventsQuery | None) -> Any:
    """Start the events query (first: it starts at the positions the matching query writes
    next), then the matching query; returns the latter."""
    Path(checkpoint).mkdir(parents=True, exist_ok=True)
    ready_path(checkpoint).unlink(missing_ok=True)
    if events is not None:
        events.prepare()
    return start_query()


def _claim_lease(cfg: Config, kafka_conf: dict[str, str], spark: Any, watchdog: Watchdog,
                 feed: SubscriptionFeed) -> LeaseKeeper | None:
    """Claim the app's lease now (``app.launch.lease``), before the static side is built, so
    that a standby started meanwhile waits for this app; None without a lease topic."""
    from app.launch.lease import hold_lease
    from kafkaio.errors import KafkaUnavailable

    try:
        return hold_lease(cfg, kafka_conf, spark)
    except KafkaUnavailable as exc:
        log.error("the lease: %s", one_line(exc))
        feed.close()
        watchdog.disarm()
        spark.stop()
        raise EndedBeforeQuery(exc.exit_code) from exc


def _wait_standby(cfg: Config, kafka_conf: dict[str, str], spark: Any, feed: SubscriptionFeed,
                  stopping: list[int], options: dict[str, str]
                  ) -> tuple[LeaseKeeper | None, int]:
    """As a standby, ready to answer: follow the subscriptions and wait until the active
    app's lease lapses, then hold it (``app.launch.lease``). (the lease; the exit code when
    the app must end instead, else EXIT_OK)"""
    from app.launch.lease import hold_lease, open_lease_log, rehearse_query
    from kafkaio.errors import KafkaUnavailable
    from kafkaio.lease import wait_for_lease

    try:
        feed.follow()
        log.info("standby: rehearsed the query's start in %.1f s",
                 rehearse_query(spark, options))
        lease_log = open_lease_log(cfg, kafka_conf)
        lease_log.catch_up()
        log.info("standby: ready to take over app '%s' (lease term %d held by %s); waiting "
                 "until nothing fresh comes from it for %.1f s", cfg.view.app.app_id,
                 lease_log.state.term, lease_log.state.holder or "nobody",
                 cfg.view.app.lease_time)
        won = wait_for_lease(lease_log, cfg.view.app.lease_time, lambda: bool(stopping))
        if won is None:
            lease_log.close()
            log.info("standby: stopped while waiting; it never took over")
            return None, EXIT_OK
        return hold_lease(cfg, kafka_conf, spark, (lease_log, *won)), EXIT_OK
    except KafkaUnavailable as exc:
        log.error("the lease: %s", one_line(exc))
        return None, exc.exit_code


def _takeover_writer(checkpoint: str, identity: Identity | None,
                     snapshot: Snapshot | None) -> SnapshotWriter | None:
    """The writer of the static side's snapshot after a standby took over: on the snapshot
    the standby started from, while the active app's writer has not replaced it (else the
    next restart builds from the topic and keeps a snapshot again)."""
    from app.static.snapshot_writer import SnapshotWriter

    if identity is None:
        return None
    if snapshot is None or not snapshot.dir.is_dir():
        log.info("no snapshot of the static side is kept after taking over: %s",
                 "the standby built its static side from the topic" if snapshot is None
                 else f"the snapshot it started from, {snapshot.name}, was replaced meanwhile")
        return None
    return SnapshotWriter(root_of(checkpoint), identity, snapshot)


def _cross(scan: Scan | None, snapshot: Snapshot | None) -> dict[int, bytes]:
    """The shapes of the fences that ask for cross events, from the scan or the snapshot."""
    from app.static.snapshot import cross_shapes

    return scan.cross_shapes() if scan is not None else cross_shapes(snapshot)


def _topics(cfg: Config, events_on: bool) -> Topics:
    from app.batch.parts import Topics

    return Topics(cfg.topic("publications"), cfg.topic("matches"), cfg.topic("metrics"),
                  cfg.topic("control"), cfg.topic("dead_letter"),
                  cfg.topic("positions") if events_on else "")


def _refuse_standby() -> int:
    log.error("--standby: a standby takes over a micro-batch app only (app.mode is real-time, "
              "whose failed tasks Spark runs again itself)")
    return EXIT_USAGE


def run_real_time(cfg: Config, starting_offsets: str = "earliest") -> int:
    """Run the real-time path (``app.realtime``) until it is stopped or a task fails."""
    from app.realtime.driver import (
        RealTimeJob,
        real_time_refusal,
        slots,
        state_topic_problem,
        task_context,
    )
    from app.realtime.idle import Quiet
    from kafkaio.clients import check_reachable
    from kafkaio.errors import KafkaUnavailable

    try:
        check_reachable(cfg.kafka_client(), outage_limit=cfg.view.kafka.outage_limit)
        problem = state_topic_problem(cfg)
    except KafkaUnavailable as exc:
        log.error("%s", one_line(exc))
        return exc.exit_code
    if problem is not None:
        log.error("%s", problem)
        return EXIT_FAILED
    spark = _session(cfg)
    watchdog = _watch(spark, cfg)
    ready = ready_path(checkpoint_dir(cfg))
    ready.unlink(missing_ok=True)
    try:
        workers = cfg.view.app.workers or slots(spark)
        refused = real_time_refusal(cfg, spark, workers)
        if refused is not None:
            log.error("%s", refused)
            return EXIT_USAGE
        ctx = task_context(cfg, workers, starting_offsets)
        job = RealTimeJob(spark, ctx).start()
        return job.wait(_stop_on_signals(), ready, idle_s=cfg.view.app.stop_after_idle,
                        quiet=lambda: Quiet(ctx.kafka_conf, ctx.publications, ctx.group))
    finally:
        ready.unlink(missing_ok=True)
        watchdog.disarm()
        spark.stop()


def _source_options(cfg: Config, topics: Topics, starting_offsets: str) -> dict[str, str]:
    """The options of Spark's Kafka source for the publications; a client setting the
    connector cannot take ends the app before anything started (a usage error)."""
    from app.read.source import source_options
    from kafkaio.errors import UntranslatableSetting

    try:
        return source_options(cfg, topics.publications, starting_offsets)
    except UntranslatableSetting as exc:
        log.error("%s", one_line(exc))
        raise EndedBeforeQuery(exc.exit_code) from exc


def _start_feed(cfg: Config, kafka_conf: dict[str, str], topics: Topics,
                checkpoint: str) -> tuple[SubscriptionFeed, dict[int, int]]:
    """Check that Kafka answers and start following the subscriptions topic; returns the feed
    and the topic's end offsets, up to which the executors scan it."""
    from app.subscriptions.feed import SubscriptionFeed
    from kafkaio.clients import check_reachable
    from kafkaio.errors import KafkaUnavailable

    feed = SubscriptionFeed(kafka_conf, cfg.topic("subscriptions"), checkpoint,
                            cfg.view.kafka.outage_limit, topics.dead_letter, cfg.view.app.app_id)
    try:
        check_reachable(kafka_conf, outage_limit=cfg.view.kafka.outage_limit)
        ends = feed.start()
    except KafkaUnavailable as exc:
        log.error("%s", one_line(exc))
        raise EndedBeforeQuery(exc.exit_code) from exc
    return feed, ends


def _start_spark(cfg: Config, feed: SubscriptionFeed) -> tuple[Any, Watchdog]:
    """Start Spark and the watchdog of its JVM, and check that the JVM can read
    Kafka; without the connector nothing else could run."""
    spark = _session(cfg)
    watchdog = _watch(spark, cfg)
    missing = _check_connector(spark)
    if missing is not None:
        log.error("%s", missing)
        feed.close()
        watchdog.disarm()
        spark.stop()
        raise EndedBeforeQuery(EXIT_FAILED)
    return spark, watchdog


def _scan_subscriptions(cfg: Config, kafka_conf: dict[str, str], ends: dict[int, int],
                        feed: SubscriptionFeed, spark: Any,
                        watchdog: Watchdog) -> tuple[Scan, SubscriptionSet, float]:
    """Scan the subscriptions topic up to ``ends`` on the executors; returns the scan, the
    subscriptions found and the seconds it took. The invalid ones go to the dead-letter topic;
    an outage or data loss, or no subscriptions at all, ends the app."""
    from app.batch.runner import EXPECTED_FAILURES
    from app.subscriptions.scan import Scan, TopicRange

    t = time.perf_counter()
    try:
        scan = Scan(spark.sparkContext, TopicRange(dict(kafka_conf), cfg.topic("subscriptions"),
                                                   ends, cfg.view.kafka.outage_limit))
    except Exception as exc:  # a read task failed: an expected condition gets its one line
        found = _EXPECTED.search(str(exc))
        if found is None:
            raise
        log.error("reading the subscriptions topic: %s", found.group(2))
        watchdog.disarm()
        spark.stop()
        raise EndedBeforeQuery(EXPECTED_FAILURES[found.group(1)].exit_code) from exc
    found = scan.set
    feed.reject(found.dead)
    scanned_s = time.perf_counter() - t
    if len(found.envelopes) == 0:
        log.error("no subscriptions on topic '%s' (%d records, %d tombstones, %d skipped); "
                  "load some with `geops subscribe`", cfg.topic("subscriptions"),
                  found.records, found.tombstones, found.skipped)
        scan.release()
        watchdog.disarm()
        spark.stop()
        raise EndedBeforeQuery(EXIT_FAILED)
    return scan, found, scanned_s


def _layout(cfg: Config, found: SubscriptionSet, scanned_s: float, workers: int) -> Layout:
    """Partition the subscriptions for the configured strategy and partitioner, and say so;
    warn when there are too few partitions for the distributor to balance."""
    from geops.strategies.strategy import Layout

    t = time.perf_counter()
    strategy = Layout(cfg.view.app.strategy, found.envelopes, cfg.view.app.partitions,
                      cfg.view.app.partitioner)
    partitions = strategy.num_partitions
    log.info("%d subscriptions (%d records read by the executors in %.1f s, %d skipped) in %d "
             "partitions for %s with a %s partitioner, %d workers, %s join (built in %.1f s)",
             len(found.envelopes), found.records, scanned_s, found.skipped, partitions,
             strategy.name, cfg.view.app.partitioner, workers, cfg.view.app.join,
             time.perf_counter() - t)
    if partitions < 4 * workers:
        log.warning("only %d static partitions for %d workers; keep P >= 4 W so the "
                    "distributor can balance", partitions, workers)
    return strategy


def _recover_assignment(cfg: Config, kafka_conf: dict[str, str], topics: Topics,
                        partitions: int, workers: int, spark: Any,
                        watchdog: Watchdog) -> tuple[ControlChannel, int, list[Owners]]:
    """Open the control channel and resume the newest assignment on it (after a restart), else
    start from epoch 0's; returns the channel, the epoch and every partition's owners."""
    from app.batch.control import ControlChannel
    from kafkaio.errors import KafkaUnavailable
    from schemas.assignment import initial_assignment

    control = ControlChannel(kafka_conf, topics.control, cfg.view.app.app_id, partitions, workers)
    try:
        recovered = control.recover(cfg.view.kafka.outage_limit)
    except KafkaUnavailable as exc:
        log.error("%s", one_line(exc))
        watchdog.disarm()
        spark.stop()
        raise EndedBeforeQuery(exc.exit_code) from exc
    if recovered is not None:
        epoch, owners = recovered.epoch, list(recovered.owners)
        replicated = {p: list(o) for p, o in enumerate(owners) if len(o) > 1}
        log.info("recovered epoch %d from the control topic%s", epoch,
                 f" (replicated partitions: {replicated})" if replicated else "")
    else:
        epoch, owners = 0, [(w,) for w in initial_assignment(partitions, workers)]
    return control, epoch, owners


def _subscriptions(cfg: Config, kafka_conf: dict[str, str], checkpoint: str,
                   ends: dict[int, int], feed: SubscriptionFeed, spark: Any,
                   watchdog: Watchdog, workers: int
                   ) -> tuple[Identity | None, Snapshot | None, Scan | None, SubscriptionSet,
                              Layout]:
    """The subscriptions and their layout: from the static side's snapshot when one matches
    (no scan), else scanned from the topic. (identity of the snapshot kept, the snapshot
    started from, the scan, the subscriptions, the layout)"""
    identity, snapshot = _find_snapshot(cfg, kafka_conf, checkpoint, ends)
    if snapshot is not None:
        found, strategy = _restored_layout(cfg, snapshot, feed, workers)
        return identity, snapshot, None, found, strategy
    scan, found, scanned_s = _scan_subscriptions(cfg, kafka_conf, ends, feed, spark, watchdog)
    return identity, None, scan, found, _layout(cfg, found, scanned_s, workers)


def _find_snapshot(cfg: Config, kafka_conf: dict[str, str], checkpoint: str,
                   ends: dict[int, int]) -> tuple[Identity | None, Snapshot | None]:
    """The snapshot of the static side to start from (``app.static_snapshot``), checked
    against this app and the offsets the checkpoint starts the subscriptions from; one that
    does not match is named in one line and left for the topic. (None, None) when the
    setting is off."""
    from app.static.snapshot import Identity, topic_id, verify

    if cfg.view.app.static_snapshot != "on":
        log.info("no snapshot of the static side (app.static_snapshot is off); building from "
                 "the subscriptions topic")
        return None, None
    topic = cfg.topic("subscriptions")
    identity = Identity(cfg.view.app.app_id, topic, topic_id(kafka_conf, topic),
                        cfg.view.app.strategy, cfg.view.app.partitioner, cfg.view.app.partitions)
    root = root_of(checkpoint)
    t = time.perf_counter()
    snapshot, reason = verify(root, identity, ends)
    if snapshot is not None and not identity.topic_id:
        snapshot, reason = None, (f"Kafka did not say the id of topic '{topic}', so it cannot "
                                  f"be told from another workload's topic of that name")
    if reason is not None:
        log.warning("snapshot %s does not match: %s; rebuilding from the subscriptions topic",
                    root, reason)
    elif snapshot is None:
        log.info("no snapshot of the static side in %s; building from the subscriptions "
                 "topic", root)
    else:
        log.info("snapshot %s of the static side matches (%d subscriptions, %d bytes, checked "
                 "in %.1f s)", snapshot.dir, len(snapshot.envelopes), snapshot.total_bytes,
                 time.perf_counter() - t)
    return identity, snapshot


def _restored_layout(cfg: Config, snapshot: Snapshot, feed: SubscriptionFeed,
                     workers: int) -> tuple[SubscriptionSet, Layout]:
    """The subscriptions and the layout of a snapshot (its partitioner, so its payloads fit);
    the feed reads the changes after its offsets with the first batch."""
    from app.subscriptions.scan import SubscriptionSet
    from geops.strategies.strategy import Layout

    t = time.perf_counter()
    strategy = Layout(cfg.view.app.strategy, snapshot.envelopes, cfg.view.app.partitions,
                      cfg.view.app.partitioner, spatial=snapshot.partitioner)
    feed.resume_from(snapshot.offsets)
    log.info("%d subscriptions from the snapshot (subscription offsets %s; the changes after "
             "them come with the first batch) in %d partitions for %s with a %s partitioner, "
             "%d workers, %s join (layout in %.1f s)", len(snapshot.envelopes),
             snapshot.offsets, strategy.num_partitions, strategy.name, cfg.view.app.partitioner,
             workers, cfg.view.app.join, time.perf_counter() - t)
    return SubscriptionSet(snapshot.envelopes, {}, [], detect=snapshot.detect), strategy


def _build_static(cfg: Config, spark: Any, strategy: Layout, scan: Scan | None,
                  found: SubscriptionSet, workers: int, owners: list[Owners], epoch: int,
                  snapshot: Snapshot | None, writer: SnapshotWriter | None,
                  ends: dict[int, int]) -> StaticSide:
    """Build the static side (the partitions' payloads) on the executors: from the scanned
    slices, then release the scan's cache, or read from ``snapshot``. ``writer``: the
    snapshots to keep (a build from the topic writes its payloads into a new one)."""
    import numpy as np

    from app.static.build import BuildSpec, read_payloads
    from app.static.side import StaticSide
    from app.static.snapshot import new_stage
    from app.static.snapshot_writer import Built

    sc = spark.sparkContext
    partitions = strategy.num_partitions
    partitioner = None if strategy.partitioner is None else sc.broadcast(strategy.partitioner)
    if scan is None:
        assert snapshot is not None
        spec = BuildSpec(strategy.name, partitions, partitioner, None, None)
        sizes = np.zeros(partitions, np.int64)
        for pid, (size, _) in snapshot.files.items():
            sizes[pid] = size
        static = StaticSide(sc, spec, cfg.view.app.join, workers, owners, epoch,
                            build=read_payloads(str(snapshot.dir),
                                                {p: int(n) for p, n in enumerate(sizes) if n}),
                            sizes=sizes)
        source = f"read from snapshot {snapshot.name}"
    else:
        stage = new_stage(writer.root) if writer is not None else None
        spec = BuildSpec(strategy.name, partitions, partitioner, scan.payloads(),
                         sc.broadcast(found.stale), str(stage or ""))
        static = StaticSide(sc, spec, cfg.view.app.join, workers, owners, epoch)
        scan.release()
        source = "built on the executors"
        if writer is not None and stage is not None:
            writer.built(Built(stage, dict(ends), found.envelopes, found.detect,
                               strategy.partitioner, partitions, static.sizes.copy()))
    log.info("static data: %d bytes in %d partitions (%.0f bytes per subscription, the largest "
             "partition %d bytes), %s in %.1f s", static.total_bytes, partitions,
             static.total_bytes / max(1, int(strategy.partition_sizes().sum())),
             int(static.sizes.max(initial=0)), source, static.build_s)
    return static


def _static_parts(spark: Any, strategy: Layout, found: SubscriptionSet, workers: int,
                  static: StaticSide, topics: Topics, cross: dict[int, bytes] | None = None,
                  snapshots: SnapshotWriter | None = None) -> StaticParts:
    """The runner's static side: the built partitions with the strategy's router broadcast,
    the subscriptions as they change, the fences when events are on (with the shapes,
    ``cross``, of those that ask for cross), the executors followed, the writer of the static
    side's snapshot."""
    from app.batch.parts import StaticParts
    from app.batch.workers import WorkerCount
    from app.events.positions import FenceTable
    from geops.strategies.churn import LiveSubscriptions

    sc = spark.sparkContext
    return StaticParts(strategy, sc.broadcast(strategy.router()), static,
                       live=LiveSubscriptions(strategy, found.envelopes),
                       fences=(FenceTable(found.envelopes.ids, found.detect, cross)
                               if topics.positions else None),
                       follow=WorkerCount(sc, workers), snapshots=snapshots)


def _warm_runner(settings: RunnerSettings, kafka: KafkaSide, side: StaticParts,
                 state: BatchState, workers: int) -> BatchRunner:
    """The per-batch pipeline, warmed up so that the executors' Python processes hold the
    matching code and the resident indexes before the first publication waits for them."""
    from app.batch.runner import BatchRunner

    runner = BatchRunner(settings, kafka, side, state, workers)
    built, took = runner.warm_up()
    log.info("warmed up in %.1f s: the executors' Python processes hold the matching code "
             "and %d resident indexes", took, built)
    return runner


def _query_starter(cfg: Config, spark: Any, options: dict[str, str], runner: BatchRunner,
                   checkpoint: str) -> Callable[[], Any]:
    """What starts the streaming query (from its checkpoint): at first, and again after Kafka
    came back from an outage the connector gave up on."""
    app_id = cfg.view.app.app_id

    def start_query() -> Any:
        return (spark.readStream.format("kafka").options(**options).load()
                .writeStream.foreachBatch(runner)
                .option("checkpointLocation", checkpoint)
                .trigger(processingTime=f"{int(cfg.view.app.trigger * 1000)} milliseconds")
                .queryName(app_id).start())

    return start_query


def _positions_end(cfg: Config, kafka_conf: dict[str, str], topics: Topics,
                   feed: SubscriptionFeed) -> str:
    """Where a new events query starts reading positions (``app.events.query``): the
    positions topic's end now. A missing topic ends the app in one line."""
    from app.events.query import positions_end
    from kafkaio.errors import KafkaUnavailable

    try:
        return positions_end(kafka_conf, topics.positions, cfg.view.kafka.outage_limit)
    except KafkaUnavailable as exc:
        log.error("geofence events (--events on): %s", one_line(exc))
        feed.close()
        raise EndedBeforeQuery(exc.exit_code) from exc


def _events_query(cfg: Config, spark: Any, kafka_conf: dict[str, str], topics: Topics,
                  checkpoint: str, starting: str) -> EventsQuery:
    """The events query (``app.events.query``), its checkpoint beside the matching query's."""
    from app.batch.output import batch_output
    from app.events.query import EventsQuery, EventsWriter
    from app.read.source import source_options

    events_checkpoint = str(Path(checkpoint) / "events")
    output = batch_output(cfg.view.app.delivery, kafka_conf, cfg.view.kafka.outage_limit,
                          app_id=cfg.view.app.app_id, checkpoint=events_checkpoint,
                          publications=topics.positions, outputs=(cfg.topic("events"),))
    options = source_options(cfg, topics.positions, "latest")
    options.pop("maxOffsetsPerTrigger", None)
    options["failOnDataLoss"] = "true"
    return EventsQuery(spark, options, events_checkpoint, cfg.view.app.app_id,
                       int(cfg.view.app.object_ttl * 1000),
                       EventsWriter(output, cfg.topic("events")), starting)


def _stop_events(events: EventsQuery, drain: bool, wanted: bool) -> None:
    """Stop the events query: after the positions already written (``drain``, a clean stop;
    ``wanted``: the matching query wrote some), else at once; then release its producer."""
    try:
        if drain:
            events.drain(wanted)
        elif events.query is not None:
            events.query.stop()
    except Exception as exc:  # its own failure is reported; the app is ending anyway
        log.error("the events query: %s", one_line(exc))
    finally:
        events.writer.close(abandon=not drain)


def _stop_on_signals() -> list[int]:
    """Stop after the current batch on SIGTERM or SIGINT; returns the list each signal
    received is appended to."""
    stopping: list[int] = []

    def stop(signum: int, _frame: FrameType | None) -> None:
        log.info("received %s; stopping after the current batch", signal.Signals(signum).name)
        stopping.append(signum)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    return stopping


def _supervise(cfg: Config, runner: BatchRunner, query: Any, start_query: Callable[[], Any],
               stopping: list[int], supervisor: Supervisor,
               events: EventsQuery | None = None) -> tuple[int, str | None]:
    """Follow the query (and the events query) until it ends; restart either after an outage
    the connector gave up on. Returns the exit code and, when a query failed, the one line
    that says why."""
    from app.launch.jvm import fatal_failure
    from app.read.source import describe_loss

    state, checkpoint = runner.state, runner.settings.checkpoint
    ready = False
    while True:
        ready = _follow(cfg, runner, query, stopping, ready, events)
        failed = events.failure() if events is not None else None
        if failed is not None:
            if (fatal_failure(failed, cfg) is None and not stopping
                    and supervisor.restart_after(failed, state.kafka_answered)):
                events.start()
                if query.isActive:
                    continue
            else:
                query.stop()
                code, line = explain_failure(failed, events.checkpoint, supervisor.outage)
                return code, f"the events query: {line}"
        if query.exception() is None:
            return EXIT_OK, None
        text = str(query.exception())
        fatal = fatal_failure(text, cfg)
        if fatal is None and not stopping and (supervisor.restart_after(
                text, state.kafka_answered) or supervisor.after_concurrent_write(text)):
            query = start_query()
            continue
        return ((EXIT_FATAL, fatal) if fatal
                else explain_failure(text, checkpoint, supervisor.outage,
                                     lambda: describe_loss(
                                         checkpoint, runner.kafka.topics.publications,
                                         runner.kafka.conf)))


def _follow(cfg: Config, runner: BatchRunner, query: Any, stopping: list[int], ready: bool,
            events: EventsQuery | None = None) -> bool:
    """Wait while the query runs: write the ready file after its first batch, and stop it,
    once no batch is running, when a signal came or it was idle for ``app.stop_after_idle``.
    Returns whether the app is ready (has written its ready file)."""
    idle = cfg.view.app.stop_after_idle
    state = runner.state
    while query.isActive:
        try:
            query.awaitTermination(0.2)
        except Exception:  # the query failed: reported by _supervise, once
            break
        if events is not None:
            if events.failure() is not None:
                break  # restarted or reported by _supervise
            if events.query is None and runner.wrote_positions:
                events.start()
        status = query.status
        if not status["message"].startswith("Getting offsets"):
            state.kafka_answered = time.monotonic()  # this trigger's offsets came, or none asked
        if starting(status):
            state.last_input = time.monotonic()  # the idle clock starts with the query
        elif not ready and state.batches:
            # after its first batch: the query's own start-up (planning, its first
            # job) is behind it, so the first publications wait for none of it
            ready = True
            state.last_input = time.monotonic()  # idle counts from "ready" on
            ready_path(runner.settings.checkpoint).write_text(f"{os.getpid()}\n")
            log.info("ready: the query has started and run its first batch; it takes "
                     "publications from '%s'", runner.kafka.topics.publications)
        quiet = time.monotonic() - state.last_input
        if status["isDataAvailable"] or status["isTriggerActive"]:
            quiet = 0.0 if not stopping else quiet
        if (stopping or (idle and quiet >= idle)) and not state.busy:
            if not stopping:
                log.info("no input for %.0f s; stopping", quiet)
            query.stop()
    return ready


# Expected failures raised in the app's own code (the subscriptions scan, foreachBatch) reach
# the driver wrapped in Spark's and Py4J's exception text; their one line is found by class name.
_EXPECTED = re.compile(r"kafkaio\.errors\.(KafkaOutage|DataLoss): ([^\n]*)")


# What Spark says when a batch's offsets or commit file exists already (HDFSMetadataLog): a
# process of this app taken over (``--standby``) wrote it; a restart runs that batch as planned.
CONCURRENT_WRITE = "Multiple streaming jobs detected"
CONCURRENT_RESTARTS = 3


class Supervisor:
    """Restarts a query that Spark's Kafka connector failed because Kafka did not answer, from
    its checkpoint, once Kafka answers again. The outage counts from Kafka's last answer to the
    query (the connector itself waits for Kafka up to the outage limit before it fails the
    query; counted from the failure, the app would wait twice the limit), and past the limit
    the app gives up (``outage`` holds the one line)."""

    def __init__(self, kafka_conf: dict[str, str], outage_limit: float):
        from kafkaio.retry import Outage

        self.conf = kafka_conf
        self.limit = outage_limit
        self.outage: str | None = None
        self._outage = Outage(kafka_conf.get("bootstrap.servers", "?"), outage_limit)
        self.concurrent = 0  # restarts after a concurrent write to the checkpoint

    def after_concurrent_write(self, text: str) -> bool:
        """Whether to restart after Spark refused a checkpoint file another process wrote
        first: an app this one took over (``--standby``) that ran on for a moment after it woke
        planned the batch; the restart runs the batch as planned. Up to
        ``CONCURRENT_RESTARTS`` times."""
        if CONCURRENT_WRITE not in text or self.concurrent >= CONCURRENT_RESTARTS:
            return False
        self.concurrent += 1
        log.warning("restarting the streaming query from its checkpoint: another process of "
                    "this app wrote a batch's file in it first (an app taken over)")
        return True

    def restart_after(self, text: str, answered: float | None = None) -> bool:
        """Whether to restart after a query failed with ``text`` (after waiting for Kafka);
        ``answered``: when Kafka last answered the query (``time.monotonic``)."""
        from app.read.source import kafka_silent
        from kafkaio.clients import check_reachable
        from kafkaio.errors import KafkaOutage, KafkaUnavailable

        if not kafka_silent(text):
            return False
        while True:
            try:
                check_reachable(self.conf, timeout=5.0)
            except KafkaUnavailable:
                try:
                    self._outage.failed("the streaming query (Spark's Kafka connector)",
                                        silent_since=answered)
                except KafkaOutage as exc:
                    self.outage = str(exc)
                    return False
                continue
            log.warning("restarting the streaming query from its checkpoint: Kafka answers "
                        "again after the connector gave up")
            self._outage.ok()
            return True


def explain_failure(text: str, checkpoint: str, outage: str | None = None,
                    describe: Callable[[], str | None] = lambda: None) -> tuple[int, str]:
    """Exit code and one-line message for a failed query: an expected condition (Kafka outage
    past the limit, data loss) gets its own line and code; anything else the whole text.
    ``describe`` names the lost offsets better than the connector's text, where it can."""
    from app.read.source import data_loss

    if outage is not None:
        return EXIT_OUTAGE, outage
    lost = data_loss(text)
    if lost is not None:
        lost = describe() or lost
    found = _EXPECTED.search(text)
    if lost is None and found is not None and found.group(1) == "KafkaOutage":
        return EXIT_OUTAGE, found.group(2)
    if lost is None and found is None:
        return EXIT_FAILED, f"the streaming query failed: {text}"
    what = lost if lost is not None else found.group(2)
    return EXIT_DATA_LOSS, (f"data loss: {what}. The checkpoint {checkpoint} holds offsets "
                            f"that no longer exist (the topic was deleted and created again, "
                            f"or truncated): restart with --on-data-loss continue to skip "
                            f"them (recorded on the dead-letter topic), or delete the "
                            f"checkpoint to start over")


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    # py4j logs every exception raised in foreachBatch with its traceback (and every callback
    # at INFO); a failed query is reported by run() instead, once.
    logging.getLogger("py4j").setLevel(logging.CRITICAL)
    args = build_parser().parse_args(argv)
    try:
        cfg = config.from_args(args)
    except ConfigError as exc:
        print(one_line(exc, "geops app"), file=sys.stderr)
        return exc.exit_code
    return run(cfg, args.starting_offsets, args.standby)


if __name__ == "__main__":
    sys.exit(main())
