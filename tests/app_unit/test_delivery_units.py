"""The delivery setting, the fault hooks and the replay check, without Kafka or Spark."""

from __future__ import annotations

import os
import time

import pytest

import config
from app.batch.output import planned_before, query_id
from app.faults import KILL_VAR, KillPoint, fail_task_once
from config import ConfigError


def test_delivery_setting_default_and_bad_values_named():
    assert config.load(environ={})["app.delivery"] in ("exactly-once", "at-least-once")
    assert config.load(environ={"GEOPS_APP_DELIVERY": "at-least-once"})["app.delivery"] == (
        "at-least-once")
    with pytest.raises(ConfigError, match="GEOPS_APP_DELIVERY"):
        config.load(environ={"GEOPS_APP_DELIVERY": "twice"})


def test_kill_point_parses_and_fires_only_where_named(monkeypatch):
    fired = []
    monkeypatch.setattr(os, "kill", lambda pid, sig: fired.append(sig))
    kill = KillPoint("after-commit@3")
    kill("after-commit", 2)
    kill("mid-write", 3)
    assert not fired
    kill("after-commit", 3)
    assert len(fired) == 1
    KillPoint(None)("after-commit", 3)
    assert len(fired) == 1
    for bad in ("after-commit", "later@3", "mid-write@x"):
        with pytest.raises(ValueError, match=KILL_VAR):
            KillPoint(bad)


def test_task_failure_happens_once(tmp_path, monkeypatch):
    flag = tmp_path / "failed"
    monkeypatch.setenv("GEOPS_FAULT_FAIL_TASK", str(flag))
    with pytest.raises(RuntimeError, match="injected task failure"):
        fail_task_once()
    fail_task_once()  # the retry goes on
    monkeypatch.delenv("GEOPS_FAULT_FAIL_TASK")
    fail_task_once()


def test_only_a_batch_planned_before_the_start_can_be_a_replay(tmp_path):
    (tmp_path / "offsets").mkdir()
    (tmp_path / "metadata").write_text('{"id":"q-1"}')
    old = tmp_path / "offsets" / "4"
    old.write_text("v1")
    os.utime(old, (time.time() - 60, time.time() - 60))
    started = time.time() - 1
    (tmp_path / "offsets" / "5").write_text("v1")
    assert planned_before(str(tmp_path), 4, started)
    assert not planned_before(str(tmp_path), 5, started)
    assert not planned_before(str(tmp_path), 6, started)  # not planned at all
    assert query_id(str(tmp_path)) == "q-1"
