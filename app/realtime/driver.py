"""The driver of the real-time path: one Spark job whose tasks live as long as the app.

The job has one task per worker (``app.workers``, default the cluster's cores); each runs
``task.serve`` until the job is cancelled. A long-running task holds its slot for good, so the
app refuses to start when Spark offers fewer slots than workers (one line: how many it needs and
has). SIGTERM or SIGINT cancels the job, as does ``app.stop_after_idle`` once the
publications are all answered and none arrived for that long (``idle``): the tasks stop where
they are, and a restart replays what they answered after their last commit (at least once). A
task that fails ends the job; the app then ends with exit code 1 and the task's error in one
line.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from app.executors import executor_cores
from app.realtime.idle import Quiet
from app.realtime.sizing import static_side_bytes, task_bytes
from app.realtime.task import TaskContext, serve
from config import Config
from config.exitcodes import EXIT_FAILED, EXIT_OK
from config.values import parse_bytes, parse_duration
from kafkaio.topics import create_topics
from kafkaio.transactions import transactional_id

log = logging.getLogger("geops.app.realtime")

JOB_GROUP = "geops-real-time"
# How often a task ends a period while records arrive. At least once: the most a crash replays,
# in time. Exactly once: what a read_committed reader waits for an answer is about half of it
# plus the commit (docs/results/real-time), so it is shorter.
COMMIT_INTERVAL_S = {"at-least-once": 0.2, "exactly-once": 0.1}


def task_context(cfg: Config, workers: int, starting_offsets: str) -> TaskContext:
    """What each task is given, from the resolved settings."""
    publications = cfg.topic("publications")
    identity = transactional_id(cfg.view.app.app_id, publications, cfg.topic("matches"))
    return TaskContext(
        kafka_conf=cfg.kafka_client(), app_id=cfg.view.app.app_id,
        group=f"{identity}-rt", publications=publications,
        subscriptions=cfg.topic("subscriptions"), matches=cfg.topic("matches"),
        dead_letter=cfg.topic("dead_letter"), metrics=cfg.topic("metrics"),
        events=cfg.topic("events") if cfg.view.app.events == "on" else "",
        object_state=cfg.topic("object_state"),
        object_ttl_ms=int(cfg.view.app.object_ttl * 1000),
        workers=workers,
        starting_offsets=starting_offsets,
        commit_interval_s=COMMIT_INTERVAL_S[cfg.view.app.delivery],
        outage_limit=cfg.view.kafka.outage_limit, delivery=cfg.view.app.delivery)


def state_topic_problem(cfg: Config) -> str | None:
    """Create the object-state topic (``changelog``) unless it exists, as ``geops topics
    create`` would; why it cannot be had, in one line, or None. Only an app with geofence
    events needs it."""
    if cfg.view.app.events != "on":
        return None
    (result,) = create_topics(cfg, ["object_state"])
    if result.outcome == "failed":
        return (f"cannot create the object-state topic '{result.name}' that real-time mode "
                f"keeps its moving objects' states in: {result.detail}")
    return None


def slots(spark: Any, wanted: int = 0) -> int:
    """Task slots the cluster offers: in local mode its threads; on a cluster its executors'
    cores, waited for while fewer than ``wanted`` (at least one) have registered, up to
    ``spark.scheduler.maxRegisteredResourcesWaitingTime``: executors register some seconds
    after the driver starts, and long-running tasks need all their slots at once."""
    sc = spark.sparkContext
    cores = executor_cores(sc)
    if cores is None:
        return int(sc.defaultParallelism)
    waiting = parse_duration(sc.getConf().get("spark.scheduler.maxRegisteredResourcesWaitingTime",
                                              "30s"))
    deadline, said = time.monotonic() + waiting, 0.0
    while cores < max(1, wanted) and time.monotonic() < deadline:
        if time.monotonic() - said >= 10:
            log.info("waiting for executors: %d of %d task slots registered", cores,
                     max(1, wanted))
            said = time.monotonic()
        time.sleep(0.2)
        cores = executor_cores(sc) or 0
    return cores


def real_time_refusal(cfg: Config, spark: Any, workers: int) -> str | None:
    """Why the real-time tasks cannot start here, in one line, or None: fewer task slots than
    workers, or a static side larger than a task may hold (``sizing``)."""
    have = slots(spark, workers)
    if have < workers:
        return (f"real-time mode needs a task slot for each of its {workers} workers and Spark "
                f"offers {have}: give the master more cores (local[{workers}], or executors "
                f"with {workers} cores in all) or fewer --workers")
    records, need = static_side_bytes(cfg.kafka_client(), cfg.topic("subscriptions"),
                                      cfg.view.kafka.outage_limit)
    pyspark = spark.sparkContext.getConf().get("spark.executor.pyspark.memory", "0")
    limit = task_bytes(cfg.view.app.realtime_task_memory, parse_bytes(pyspark),
                       spark.sparkContext.master.startswith("local"), workers)
    if limit is not None and need > limit:
        return (f"the static side is too large for real-time mode: each task holds every "
                f"subscription, about {need / 2**20:,.0f} MB for the {records:,} records of "
                f"'{cfg.topic('subscriptions')}', and a task may hold {limit / 2**20:,.0f} MB "
                f"(app.realtime_task_memory / --real-time-task-memory); run with --mode "
                f"micro-batch, which partitions the subscriptions over the workers")
    return None


class RealTimeJob:
    """The job of ``workers`` long-running tasks, run in a thread of the driver."""

    def __init__(self, spark: Any, ctx: TaskContext):
        self.spark = spark
        self.ctx = ctx
        self.error: str | None = None
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="geops-real-time", daemon=True)

    def _run(self) -> None:
        sc = self.spark.sparkContext
        sc.setJobGroup(JOB_GROUP, f"geops real-time: {self.ctx.workers} long-running tasks",
                       interruptOnCancel=True)
        ctx = self.ctx
        try:
            sc.parallelize(range(ctx.workers), ctx.workers) \
              .mapPartitionsWithIndex(lambda i, rows: serve(i, ctx, rows)).collect()
        except Exception as exc:  # Py4JJavaError: a task failed, or the job was cancelled
            self.error = str(exc)
        finally:
            self._done.set()

    def start(self) -> RealTimeJob:
        self._thread.start()
        return self

    def running(self) -> bool:
        """Whether every task of the job runs."""
        tracker = self.spark.sparkContext.statusTracker()
        for job in tracker.getJobIdsForGroup(JOB_GROUP):
            info = tracker.getJobInfo(job)
            for stage in (info.stageIds if info is not None else []):
                stage_info = tracker.getStageInfo(stage)
                if stage_info is not None and stage_info.numActiveTasks >= self.ctx.workers:
                    return True
        return False

    def wait(self, stopping: list[int], ready: Path,
             sleep: Callable[[float], None] = time.sleep, idle_s: float = 0.0,
             quiet: Callable[[], Quiet] | None = None) -> int:
        """Until a signal asks to stop, the app was quiet for ``idle_s`` (0: never; ``quiet``
        makes what tells, once the tasks run) or the job ends; the exit code."""
        marked = False
        watch: Quiet | None = None
        try:
            while not self._done.is_set():
                if watch is not None and watch.seconds() >= idle_s:
                    log.info("no input for %.0f s; stopping", idle_s)
                    stopping.append(0)
                if stopping:
                    log.info("stopping the real-time tasks")
                    self.spark.sparkContext.cancelJobGroup(JOB_GROUP)
                    self._done.wait(60)
                    return EXIT_OK
                if not marked and self.running():
                    self._ready(ready)
                    marked = True
                    if idle_s and quiet is not None:
                        watch = quiet()
                sleep(0.2)
        finally:
            if watch is not None:
                watch.close()
        if self.error is not None:
            log.error("a real-time task failed: %s", _first_line(self.error))
            return EXIT_FAILED
        return EXIT_OK

    def _ready(self, ready: Path) -> None:
        """Mark the tasks running: the ready file, and the log lines that say so."""
        ready.parent.mkdir(parents=True, exist_ok=True)
        ready.write_text(str(os.getpid()))
        log.info("streaming from '%s' in real time: %d tasks answer as records arrive",
                 self.ctx.publications, self.ctx.workers)
        log.info("ready: the real-time tasks have started and take publications")


def _first_line(text: str) -> str:
    """The Python error a task ended with, else the first line of Spark's text."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    python = [line for line in lines if line.split(":")[0].endswith(("Error", "Exception"))
              and not line.startswith(("py4j", "org.apache"))]
    return (python or lines or ["(no message)"])[-1 if python else 0]
