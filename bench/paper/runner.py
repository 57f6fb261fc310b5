"""One physical run, done the paper's way: produce everything first, then start the app.

Each run gets its own local broker (nothing of one run's data outlives it, over hundreds of
runs), its own topics and checkpoint. The distributor and the app
run as separate processes, exactly as a user runs them (`geops distributor`, `geops app`),
started and ended by ``bench.harness.processes``; their logs are kept beside the run's data.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import config
from bench.harness.errors import RunFailed
from bench.harness.processes import GEOPS, Processes
from bench.harness.reap import reap
from bench.paper.plan import RunSpec
from geops.model import Publications
from geops.workload import Workload
from kafkaio.sender import produce_records
from kafkaio.topics import create_topics
from schemas.records import publication_records, subscription_records

TABLE1 = config.defaults()["distributor"]  # config/default.toml: the paper's Table 1


@dataclass(frozen=True)
class DistributorSettings:
    """Distributor parameters for every run (the paper's Table 1 unless overridden)."""

    period: str = f"{TABLE1['period']:g}s"
    min_items: int = TABLE1["min_items"]
    wait_periods: int = TABLE1["wait_periods"]
    threshold: float = TABLE1["threshold"]
    min_improvement: float = TABLE1["min_improvement"]
    first_period: str = TABLE1["first_period"]


def _env(address: str, state: Path) -> dict[str, str]:
    # Without the Spark UI, as every run of the evaluation so far (it was off by default then).
    return {**os.environ, "GEOPS_BOOTSTRAP_SERVERS": address, "GEOPS_STATE_DIR": str(state),
            "GEOPS_SPARK_UI": "off",
            "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}


def distributor_args(spec: RunSpec, settings: DistributorSettings) -> list[str]:
    mode = {"static": "observe", "adaptive": "adaptive"}.get(spec.balancing, "dynamic")
    first_period = spec.first_period or settings.first_period
    metric = spec.balancing if spec.balancing in ("LB", "DB") else "LB"
    # the paper's greedy, whatever the configured default (replicate), unless
    # the mode names another (plan.MODE_POLICIES)
    return [*GEOPS, "distributor", "--mode", mode, "--metric", metric, "--policy", spec.policy,
            "--period", settings.period, "--min-items", str(settings.min_items),
            "--wait-periods", str(settings.wait_periods), "--threshold",
            str(settings.threshold), "--min-improvement", str(settings.min_improvement),
            "--first-period", first_period]


def app_args(spec: RunSpec, trigger: str = "500ms", idle: str = "3s") -> list[str]:
    return [*GEOPS, "app", "--master", f"local[{spec.workers}]", "--workers",
            str(spec.workers), "--strategy", spec.pipeline, "--join", spec.join,
            "--partitions", str(spec.partitions), "--partitioner", spec.partitioner,
            "--max-records-per-trigger", str(spec.sizes.max_records_per_trigger),
            "--trigger", trigger, "--stop-after-idle", idle]


def load_workload(cfg: config.Config, workload: Workload) -> None:
    """Create the run's topics; produce every subscription, then every publication stamped
    with the time it was sent (latency is measured from there to its match)."""
    create_topics(cfg)
    conf = cfg.kafka_client()
    produce_records(conf, cfg.topic("subscriptions"), "Subscription",
                    subscription_records(workload.subscriptions))
    pubs = workload.publications
    now = int(time.time() * 1000)
    stamped = Publications(pubs.ids, pubs.geoms, np.full(len(pubs), now, np.int64))
    produce_records(conf, cfg.topic("publications"), "Publication",
                    publication_records(stamped))


def run(spec: RunSpec, workload: Workload, workdir: Path, settings: DistributorSettings | None,
        collect: Callable[[config.Config], dict], timeout: float = 3600.0,
        during: Callable[[config.Config], None] | None = None) -> dict:
    """Run ``spec`` on ``workload``; returns what ``collect`` reads from the run's topics.

    Without distributor ``settings`` no distributor runs (the assignment changes only if
    ``during``, called once the app runs, commands it, e.g. to force a rebalance).
    """
    state = workdir / spec.run_id
    shutil.rmtree(state, ignore_errors=True)  # a failed earlier attempt's checkpoint must go
    state.mkdir(parents=True)
    procs = Processes()
    try:
        env = _env(procs.start_broker(state), state)
        cfg = config.load(environ=env)
        load_workload(cfg, workload)
        dist = None if settings is None else procs.start(
            "distributor", distributor_args(spec, settings), env, state / "distributor.log")
        app = procs.start("app", app_args(spec), env, state / "app.log")
        try:
            if during is not None:
                during(cfg)
            code = app.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            raise RunFailed(f"{spec.run_id}: the app did not finish within "
                            f"{timeout:.0f} s; see {app.log}") from None
        finally:
            procs.stop(app)  # on a timeout or an interrupt too: it runs in its own group
        if code != 0:
            raise RunFailed(f"{spec.run_id}: the app exited with {code}; see {app.log}")
        if dist is not None:
            procs.stop(dist)
        return collect(cfg)
    finally:
        procs.stop_all()  # the distributor if a run failed, then the broker
        reap(f"GEOPS_STATE_DIR={state}\0".encode())

