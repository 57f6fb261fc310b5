"""The micro-batch app's lease (``kafkaio.lease``): the active app holds it, a standby
(``geops app --standby``) waits for it, and an app whose lease another process took stops at
once, before it writes anything more.

A standby builds or loads everything an app needs before its query (the static side, the
warmed executors, the control channel, the subscriptions read ahead) and waits for the lease;
once it holds it, it opens the output (under exactly-once its ``init_transactions`` fences the
old process's producer: the transactional id is the app's) and starts the query on the shared
checkpoint, where Spark runs the batch the old process left unfinished again.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Callable
from typing import Any, NoReturn

from config import Config
from config.exitcodes import EXIT_REPLACED
from kafkaio.errors import NoLeaseTopic
from kafkaio.lease import LeaseKeeper, LeaseLog, LeaseState, holder_name

log = logging.getLogger("geops.app")


def open_lease_log(cfg: Config, kafka_conf: dict[str, str]) -> LeaseLog:
    """The app's lease log, read from its beginning, written as this process."""
    return LeaseLog(kafka_conf, cfg.topic("lease"), cfg.view.app.app_id, holder_name(),
                    cfg.view.kafka.outage_limit)


def stop_replaced(state: LeaseState, halt: Callable[[int], Any]) -> NoReturn:
    """Another process holds a newer term of the lease: say so in one line and end the
    process and its JVM at once (``halt``), so that nothing more of this one is written."""
    line = (f"the lease of app '{state.app}' is at term {state.term}, held by {state.holder}: "
            f"another process of this app took over; stopping at once without writing")
    with contextlib.suppress(OSError, ValueError):
        log.error("%s", line)
        print(f"geops app: {line}", file=sys.stderr, flush=True)
    try:
        halt(EXIT_REPLACED)
    finally:
        os._exit(EXIT_REPLACED)


def jvm_halt(spark: Any) -> Callable[[int], None]:
    """Ends the driver JVM at once with a status (``Runtime.halt``: no shutdown hooks, no
    query stop that could write to the checkpoint)."""
    jvm = spark.sparkContext._jvm

    def halt(code: int) -> None:
        with contextlib.suppress(Exception):  # the call never returns: the JVM is gone
            jvm.java.lang.Runtime.getRuntime().halt(code)

    return halt


def hold_lease(cfg: Config, kafka_conf: dict[str, str], spark: Any,
               won: tuple[LeaseLog, int, float] | None = None) -> LeaseKeeper | None:
    """Hold the app's lease and keep it with heartbeats: the term a standby won (``won``:
    its log, the term and when its claim was sent), else claim the next term now. None, with
    a warning, when there is no lease topic: the app runs, but no standby can take over."""
    halt = jvm_halt(spark)
    lease_s = cfg.view.app.lease_time
    if won is not None:
        lease_log, term, sent = won
        keeper = LeaseKeeper(lease_log, lease_s, lambda state: stop_replaced(state, halt))
        keeper.adopt(term, sent)
        return keeper.start()
    lease_log = open_lease_log(cfg, kafka_conf)
    keeper = LeaseKeeper(lease_log, lease_s, lambda state: stop_replaced(state, halt))
    try:
        term = keeper.claim()
    except NoLeaseTopic as exc:
        log.warning("%s: running without a lease, so no standby can take this app over",
                    exc)
        lease_log.close()
        return None
    log.info("holding the lease of app '%s' at term %d (heartbeat every %.2f s)",
             cfg.view.app.app_id, term, lease_s / 4)
    return keeper.start()


def rehearse_query(spark: Any, options: dict[str, str], timeout: float = 60.0) -> float:
    """Run one batch of a throwaway query on the publications (from their end, with a
    checkpoint of its own, deleted after), so that a standby's real query after the takeover
    finds Spark's streaming and Kafka connector classes loaded and compiled and the Python
    callback server of ``foreachBatch`` running: on a C1-only JVM that first start costs
    seconds. Returns the seconds it took."""
    import shutil
    import tempfile
    import time

    t0 = time.perf_counter()
    where = tempfile.mkdtemp(prefix="geops-rehearsal-")
    query = None
    try:
        query = (spark.readStream.format("kafka")
                 .options(**{**options, "startingOffsets": "latest"}).load()
                 .writeStream.foreachBatch(lambda _df, _batch: None)
                 .option("checkpointLocation", where).trigger(processingTime="100 milliseconds")
                 .start())
        deadline = time.monotonic() + timeout
        while not query.recentProgress and query.isActive and time.monotonic() < deadline:
            query.awaitTermination(0.1)
    except Exception as exc:  # only a head start: the real query reports its own failures
        log.warning("standby: the rehearsal query failed (%s); the takeover starts cold",
                    type(exc).__name__)
    finally:
        if query is not None:
            with contextlib.suppress(Exception):
                query.stop()
        shutil.rmtree(where, ignore_errors=True)
    return time.perf_counter() - t0
