"""What the app sees of a cluster's executors: the cores they offer now."""

from __future__ import annotations

import logging
from typing import Any

from pyspark import SparkContext

log = logging.getLogger("geops.app.executors")


def executor_cores(sc: SparkContext) -> int | None:
    """Cores of the live executors (the driver aside), or None when Spark does not say (local
    mode, where the driver runs the tasks)."""
    if sc.master.startswith("local"):
        return None
    try:
        summaries: Any = sc._jsc.sc().statusStore().executorList(True)  # active ones only
        it = summaries.iterator()
        cores = 0
        while it.hasNext():
            e = it.next()
            if e.id() != "driver":
                cores += int(e.totalCores())
        return cores
    except Exception as exc:  # a Spark without this internal API: keep W as it is
        log.warning("cannot see the executors' cores (%s); the number of join workers stays "
                    "as it started", exc)
        return None
