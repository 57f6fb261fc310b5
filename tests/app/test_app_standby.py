"""A standby that takes over (``geops app --standby``), with a live producer, exactly-once.

One active app and two standbys on one checkpoint and app id. The active app's driver is
killed (SIGKILL of its process group): one standby, never both, takes the lease and answers.
That one is then frozen (SIGSTOP of its process group): the other takes over and answers;
the frozen one is let go on (SIGCONT), reads the newer term and stops at once without a batch
written (exit code 7, one line). At the end a read_committed reader sees every matching
publication once, as the oracle says. The time from each fault to the first answer of the
standby that took over is printed and recorded (``record_property``). At least once, a frozen
app that comes back stops the same way (what it was writing may be in Kafka twice, as that mode
allows), and nothing is lost.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import pytest

from config.exitcodes import EXIT_REPLACED
from tests.app.delivery_checks import (
    APP_FLAGS,
    assert_exactly_once,
    assert_matches_oracle,
    visible_output,
)
from tests.app.live import LiveProducer, Phase, load_subscriptions_only

pytestmark = [pytest.mark.integration, pytest.mark.slow]

RATE = 40.0  # publications per second: the 1,500 of the workload last through both faults
FLAGS = ["--master", "local[2]", "--delivery", "exactly-once", "--stop-after-idle", "0s"]
STANDBY_READY = "standby: ready to take over"
HOLDING = "holding the lease of app"
TOOK = re.compile(r"took the lease of app '[^']*' at term (\d+)")
ANSWERED = re.compile(r"batch \d+ epoch \d+: [1-9]\d* records")
REPLACED = "another process of this app took over; stopping at once without writing"
_STAMP = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) ")


class App:
    """`geops app` as its own process group, its output in a log file."""

    def __init__(self, name: str, flags: list[str], env: dict[str, str], logs: Path):
        self.name = name
        self.log = logs / f"{name}.log"
        with open(self.log, "w") as out:
            self.proc = subprocess.Popen([sys.executable, "-m", "cli.main", *APP_FLAGS,
                                          *FLAGS, *flags], env=env, stdout=out,
                                         stderr=subprocess.STDOUT, start_new_session=True)

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def signal(self, sig: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, sig)

    def end(self) -> None:
        self.signal(signal.SIGCONT)
        self.signal(signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(30)


def wait_for(what: str, check, apps: list[App], timeout: float = 240.0):
    """The first true value of ``check()``, looked at every 0.1 s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.1)
    tails = "\n".join(f"--- {a.name}:\n{a.text()[-2500:]}" for a in apps)
    raise AssertionError(f"{what}: not within {timeout:.0f} s\n{tails}")


def stamp(line: str) -> float:
    return datetime.strptime(_STAMP.match(line).group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()


def takeover(app: App, since: int = 0) -> tuple[float, float] | None:
    """(when the lease was taken, when the first batch with records was written after it),
    from ``app``'s log past ``since`` characters; None before both."""
    lines = app.text()[since:].splitlines()
    took = next((i for i, line in enumerate(lines) if TOOK.search(line)), None)
    if took is None:
        return None
    answer = next((line for line in lines[took:] if ANSWERED.search(line)), None)
    return None if answer is None else (stamp(lines[took]), stamp(answer))


def resume_replaced(app: App) -> None:
    """Let a frozen ``app`` go on: it must end as replaced, with its line, no batch written."""
    before = len(app.text())
    app.signal(signal.SIGCONT)
    assert app.proc.wait(60) == EXIT_REPLACED, app.text()[-3000:]
    after = app.text()[before:]
    assert REPLACED in after, after[-3000:]
    assert not ANSWERED.search(after), f"{app.name} wrote a batch after it came back"


def finish(survivor: App, producer: LiveProducer, cfg, oracle, apps: list[App]) -> None:
    """Once the stream is written and every matching publication visible, stop ``survivor``
    (SIGTERM, exit 0)."""
    producer.join()
    wait_for("every matching publication visible",
             lambda: len(visible_output(cfg)[0]) >= len(oracle) or None, apps, timeout=180)
    survivor.signal(signal.SIGTERM)
    assert survivor.proc.wait(120) == 0, survivor.text()[-3000:]


def test_standbys_take_over_after_a_kill_and_a_freeze(workload, kafka_cfg, geops_env,
                                                      tmp_path, record_property):
    load_subscriptions_only(kafka_cfg, workload.subs)
    env = {**os.environ, **geops_env}
    active = App("active", [], env, tmp_path)
    apps = [active]
    producer = None
    try:
        # the active app holds the lease first, so neither standby finds it free
        wait_for("the active app holding the lease", lambda: HOLDING in active.text(), apps)
        standbys = [App(f"standby-{i}", ["--standby"], env, tmp_path) for i in (1, 2)]
        apps += standbys
        for s in standbys:
            wait_for(f"{s.name} ready", lambda s=s: STANDBY_READY in s.text(), apps)
        producer = LiveProducer(kafka_cfg, workload.pubs,
                                [Phase(len(workload.pubs), RATE)]).start()
        wait_for("the active app answering", lambda: ANSWERED.search(active.text()), apps)

        killed = time.time()
        active.signal(signal.SIGKILL)
        first = wait_for("a standby answering after the kill",
                         lambda: next((s for s in standbys if takeover(s)), None), apps)
        other = standbys[1 - standbys.index(first)]
        took_at, answered_at = takeover(first)
        print(f"takeover after kill -9: first answer {answered_at - killed:.1f} s after the "
              f"kill (lease taken at {took_at - killed:.1f} s) by {first.name}")
        record_property("kill_to_first_answer_s", round(answered_at - killed, 2))
        assert TOOK.search(other.text()) is None, "both standbys took the lease"

        wait_for(f"{first.name} answering on", lambda: len(ANSWERED.findall(first.text())) >= 3,
                 apps)
        frozen = time.time()
        first.signal(signal.SIGSTOP)
        wait_for(f"{other.name} answering after the freeze", lambda: takeover(other), apps)
        took_at, answered_at = takeover(other)
        print(f"takeover after SIGSTOP: first answer {answered_at - frozen:.1f} s after the "
              f"freeze (lease taken at {took_at - frozen:.1f} s) by {other.name}")
        record_property("freeze_to_first_answer_s", round(answered_at - frozen, 2))

        resume_replaced(first)
        finish(other, producer, kafka_cfg, workload.oracle, apps)
    finally:
        for app in apps:
            app.end()
    assert_exactly_once(kafka_cfg, workload.oracle)


def test_a_frozen_app_stops_at_least_once_too(workload, kafka_cfg, geops_env, tmp_path):
    load_subscriptions_only(kafka_cfg, workload.subs)
    env = {**os.environ, **geops_env}
    flags = ["--delivery", "at-least-once"]
    active = App("active", flags, env, tmp_path)
    apps = [active]
    try:
        wait_for("the active app holding the lease", lambda: HOLDING in active.text(), apps)
        standby = App("standby", ["--standby", *flags], env, tmp_path)
        apps.append(standby)
        wait_for("the standby ready", lambda: STANDBY_READY in standby.text(), apps)
        producer = LiveProducer(kafka_cfg, workload.pubs,
                                [Phase(len(workload.pubs), RATE)]).start()
        wait_for("the active app answering", lambda: ANSWERED.search(active.text()), apps)
        active.signal(signal.SIGSTOP)
        wait_for("the standby answering after the freeze", lambda: takeover(standby), apps)
        resume_replaced(active)
        finish(standby, producer, kafka_cfg, workload.oracle, apps)
    finally:
        for app in apps:
            app.end()
    assert_matches_oracle(visible_output(kafka_cfg)[0], workload.oracle)
