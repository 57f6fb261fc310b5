"""The join tasks writing their own matches (``--output-from tasks``), with a live producer:
a read_committed reader sees one Match record per matching publication, equal to the oracle's,
across a failed task and across a driver killed after its tasks committed (exactly-once), and
without faults under at-least-once."""

from __future__ import annotations

import os
import re

import pytest

from app.faults import FAIL_TASK_VAR, KILL_VAR
from tests.app import delivery_checks as checks
from tests.app.live import LiveProducer, Phase, load_subscriptions_only
from tests.app.test_app_exactly_once import RATE

pytestmark = [pytest.mark.integration, pytest.mark.slow]

TASKS = ["--output-from", "tasks"]
WRITTEN = re.compile(r"\((\d+) written by the tasks\)")


def _task_written(log: str) -> int:
    """Match records the batches' log lines say the tasks wrote."""
    return sum(int(n) for n in WRITTEN.findall(log))


def test_a_failed_task_that_had_committed_is_not_written_again(workload, kafka_cfg, geops_env,
                                                               tmp_path):
    """A join task fails once after it committed its transaction; under local[2,2] Spark runs
    it again, and the retry finds its slot's marker of the batch and writes nothing."""
    load_subscriptions_only(kafka_cfg, workload.subs)
    producer = LiveProducer(kafka_cfg, workload.pubs, [Phase(len(workload.pubs), RATE)]).start()
    flag = tmp_path / "task-failed"
    env = {**os.environ, **geops_env, FAIL_TASK_VAR: str(flag)}
    code = checks.run_app(["--master", "local[2,2]", "--delivery", "exactly-once", *TASKS], env,
                   tmp_path / "app.log")
    log = (tmp_path / "app.log").read_text()
    assert code == 0, log[-3000:]
    producer.join()
    assert flag.exists(), "no task failed"
    assert "committed its output; not written again" in log, log[-3000:]
    checks.assert_exactly_once(kafka_cfg, workload.oracle)
    written = _task_written(log)
    assert 0 < written < len(workload.oracle), written  # the driver answered shared ones


def test_a_driver_killed_after_its_tasks_committed(workload, kafka_cfg, geops_env, tmp_path):
    """The driver dies once batch 3's job has run (its tasks committed their matches, the
    driver's transaction never began); the restart runs batch 3 again, reads its tasks'
    markers and writes only the publications they had not answered."""
    load_subscriptions_only(kafka_cfg, workload.subs)
    producer = LiveProducer(kafka_cfg, workload.pubs, [Phase(len(workload.pubs), RATE)]).start()
    env = {**os.environ, **geops_env}
    flags = ["--master", "local[2]", "--delivery", "exactly-once", *TASKS]
    code = checks.run_app(flags, {**env, KILL_VAR: "before-write@3"}, tmp_path / "killed.log")
    killed = (tmp_path / "killed.log").read_text()
    assert code != 0 and "stopped after" not in killed, killed[-3000:]
    producer.join()
    code = checks.run_app(flags, env, tmp_path / "last.log")
    last = (tmp_path / "last.log").read_text()
    assert code == 0, last[-3000:]
    assert re.search(r"batch 3 is run again after a restart; its tasks of worker\(s\) \[",
                     last), last[-3000:]
    checks.assert_exactly_once(kafka_cfg, workload.oracle)


def test_at_least_once_from_the_tasks(workload, kafka_cfg, geops_env, tmp_path):
    """No fault: every matching publication once, with the oracle's subscriptions; each batch
    summarised once."""
    load_subscriptions_only(kafka_cfg, workload.subs)
    producer = LiveProducer(kafka_cfg, workload.pubs, [Phase(len(workload.pubs), RATE)]).start()
    env = {**os.environ, **geops_env}
    code = checks.run_app(["--master", "local[2]", "--delivery", "at-least-once", *TASKS], env,
                   tmp_path / "app.log")
    log = (tmp_path / "app.log").read_text()
    assert code == 0, log[-3000:]
    producer.join()
    got, summaries = checks.visible_output(kafka_cfg)
    checks.assert_matches_oracle(got, workload.oracle)
    assert checks.duplicated_batches(got, summaries) == (set(), set())
    assert sum(s["matched_publications"] for s in summaries) == len(workload.oracle)
    assert 0 < _task_written(log) < len(workload.oracle)
