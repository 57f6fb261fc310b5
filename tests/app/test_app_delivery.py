"""Delivery across a driver crash with replicated partitions in force: nothing lost, and a
replayed batch splits its items among the owners as the first run did."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from geops.strategies import build_strategy
from kafkaio.sender import Sender
from tests.app.conftest import load, matches, metrics
from tests.app.replicas import (
    P,
    batch_keys,
    busiest,
    expected_split,
    loads_by_batch,
    replica_command,
    replica_plan,
)
from tests.app.test_app_control import wait_for_batches

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_kill_9_then_restart_loses_no_match(workload, kafka_cfg, geops_env, tmp_path):
    """kill -9 the driver mid-stream; a restart with the same checkpoint completes the work.

    Replicated partitions are in force: the three busiest are on both workers. Every
    batch, the replayed one too, splits their items among the owners by publication key, as
    computed here from the batch's offsets."""
    load(kafka_cfg, workload)
    built = build_strategy("sPIS", workload.subs, P, "kdbtree")
    owners = replica_plan(busiest(built.router(), workload.pubs)).owners[1]
    s = Sender(kafka_cfg.kafka_client())
    s.send(kafka_cfg.topic("control"), replica_command(1, owners), key=b"geops")
    s.close()
    args = [sys.executable, "-m", "cli.main", "app", "--master", "local[2]", "--workers", "2",
            "--strategy", "sPIS", "--partitions", str(P), "--trigger", "200ms",
            "--max-records-per-trigger", "100", "--stop-after-idle", "2s"]
    env = {**os.environ, **geops_env}
    with open(tmp_path / "first-run.log", "w") as log:
        first = subprocess.Popen(args, env=env, stdout=log, stderr=subprocess.STDOUT,
                                 start_new_session=True)
        try:
            started = wait_for_batches(kafka_cfg, 3, timeout=180)
        finally:
            os.killpg(first.pid, signal.SIGKILL)  # the driver's Python, its JVM and workers
            first.wait(30)
    assert started, (tmp_path / "first-run.log").read_text()[-3000:]
    done_before = len(metrics(kafka_cfg)["BatchSummary"])
    assert done_before < 15, "the first run finished before it could be killed"

    second = subprocess.run(args, env=env, capture_output=True, text=True, timeout=600)
    assert second.returncode == 0, second.stdout[-3000:] + second.stderr[-3000:]
    got = matches(kafka_cfg)
    assert set(got) == set(workload.oracle)  # every matched publication is there
    for pub, lists in got.items():
        assert all(ids == workload.oracle[pub] for ids in lists)  # replays repeat the same
    m = metrics(kafka_cfg)
    records = sum(s["records"] for s in m["BatchSummary"])
    assert records >= len(workload.pubs)

    # every report of a batch (a replayed batch reports again; a report cut short by the kill
    # holds part of its loads) has the split the batch's keys give
    keys, geometry = batch_keys(kafka_cfg, m["BatchSummary"])
    reports = loads_by_batch(m["PartitionLoad"])
    assert set(reports) <= set(keys)
    for batch, counts in reports.items():
        want = expected_split(built.router(), keys[batch], geometry, owners)
        assert all(c.items() <= want.items() for c in counts), batch
        assert any(c == want for c in counts), batch
    replayed = sum(len(c) > 1 for c in reports.values())
    print(f"\n{len(reports)} batches with items, {replayed} of them reported again after the "
          f"restart")
    assert all(r["epoch"] == 1 for r in m["PartitionLoad"])
    replicated = {(r["partition"], r["worker"]) for r in m["PartitionLoad"]
                  if r["items"] and len(owners[r["partition"]]) > 1}
    assert replicated == {(p, w) for p, o in enumerate(owners) if len(o) > 1 for w in o}
