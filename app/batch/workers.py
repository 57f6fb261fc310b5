"""How many join workers the app runs: as many as it started with while its executors are all
there, fewer while some are lost.

A join worker is a task index (``app.static.side``): worker *w*'s static partitions are cached on
the executor that ran its task. When an executor of a cluster is lost, Spark rebuilds its
partitions on the executors left, so two workers would share one executor and the assignment
would name workers that do not exist. The app instead runs ``W * cores now / most cores seen``
workers (at least one, at most the W it started with) and gives the partitions of the workers
it drops to those left (``schemas.assignment.owners_for_workers``), under a new epoch. When
executors come back, it returns to W the same way. In local mode the executors are the
driver, and nothing is ever lost.
"""

from __future__ import annotations

import logging

from pyspark import SparkContext

from app.executors import executor_cores

log = logging.getLogger("geops.app.workers")


class WorkerCount:
    """The join workers the app should run now, from the executors' cores."""

    def __init__(self, sc: SparkContext, workers: int):
        self.sc = sc
        self.configured = workers
        self.peak = 0          # the most executor cores seen
        self.enabled = not sc.master.startswith("local")

    def now(self, current: int) -> int:
        """The number of workers to run; ``current`` when nothing is known or no executor is
        there at all (its tasks wait for one to come)."""
        if not self.enabled:
            return current
        cores = executor_cores(self.sc)
        if cores is None:
            self.enabled = False
            return current
        return current if cores == 0 else self.target(cores)

    def target(self, cores: int) -> int:
        """W for ``cores`` live executor cores (> 0)."""
        self.peak = max(self.peak, cores)
        return max(1, min(self.configured, self.configured * cores // self.peak))
