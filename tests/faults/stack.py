"""The live stack the fault tests disturb: the app and the distributor as processes of their
own, a paced publisher, the oracle, and the checks each fault test ends with."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

import config
from app.main import checkpoint_dir, ready_path
from geops.model import Publications, Subscriptions
from geops.oracle import oracle_answers
from kafkaio.retry import DEFAULT_OUTAGE_LIMIT
from kafkaio.sender import Sender
from schemas import codec
from schemas.records import publication_records
from tests.app.conftest import matches, metrics
from tests.conftest import kafka_env

# The app of every fault test: two workers, small batches, so a fault lands mid-stream.
APP_FLAGS = ["--master", "local[2]", "--workers", "2", "--strategy", "sPIS",
             "--partitions", "16", "--trigger", "200ms", "--max-records-per-trigger", "300"]
# The paper's distributor with short periods, so it decides within a test's stream.
DISTRIBUTOR_FLAGS = ["--mode", "dynamic", "--period", "3s", "--min-items", "300",
                     "--wait-periods", "1"]


class Proc:
    """A geops command run as its own process group, logging to a file per run."""

    def __init__(self, name: str, args: list[str], env: dict[str, str], logdir: Path):
        self.name, self.args, self.env, self.logdir = name, args, env, logdir
        self.runs = 0
        self.proc: subprocess.Popen | None = None
        self.start()

    def start(self) -> None:
        """Start (again): each run logs to ``<name>-<run>.log``."""
        self.runs += 1
        log = open(self.logdir / f"{self.name}-{self.runs}.log", "w")  # noqa: SIM115
        with log:  # the child has its own copy
            self.proc = subprocess.Popen([sys.executable, "-m", "cli.main", *self.args],
                                         env=self.env, stdout=log, stderr=subprocess.STDOUT,
                                         start_new_session=True)

    def alive(self) -> bool:
        """Whether the process still runs."""
        return self.proc is not None and self.proc.poll() is None

    def kill9(self) -> None:
        """``kill -9`` the whole process group (the driver's JVM and Python workers too)."""
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(30)

    def stop(self, timeout: float = 120) -> int:
        """SIGTERM, then the exit code; -9 when it had to be killed after ``timeout``."""
        if not self.alive():
            return self.proc.returncode
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(30)
            return -9

    def reap(self) -> None:
        """Kill what is left of the process group (a test that failed midway)."""
        if self.alive():
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(30)

    def logs(self) -> str:
        """Every run's log, in order."""
        return "\n".join((self.logdir / f"{self.name}-{i}.log").read_text()
                         for i in range(1, self.runs + 1))


def wait_for(what: str, check: Callable[[], bool], timeout: float,
             running: Sequence[Proc] = ()) -> None:
    """Poll ``check`` until it holds; fail after ``timeout`` or as soon as one of ``running``
    has exited (naming it, with the end of its log)."""
    deadline = time.monotonic() + timeout
    while not check():
        for p in running:
            assert p.alive(), (f"{p.name} exited with {p.proc.returncode} while waiting for "
                               f"{what}:\n{p.logs()[-3000:]}")
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.5)


def live_env(address: str, tmp_path: Path, prefix: str,
             monkeypatch: pytest.MonkeyPatch) -> tuple[dict[str, str], config.Config]:
    """GEOPS_* variables for this test's broker and topics, set here and returned for the
    processes (with the rest of this environment), and the configuration they resolve to."""
    env = kafka_env(address, str(tmp_path / "state"), prefix)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return {**os.environ, **env}, config.load(environ=env)


def oracle_of(subs: Subscriptions, pubs: Publications) -> dict[int, tuple[int, ...]]:
    """Publication id -> the subscription ids it matches, by brute force."""
    return oracle_answers(subs, pubs.ids, pubs.geoms)


class Procs:
    """The app and distributor processes a test starts, killed at its end if still running."""

    def __init__(self, logdir: Path):
        self.logdir = logdir
        logdir.mkdir(parents=True, exist_ok=True)
        self.started: list[Proc] = []

    def app(self, env: dict[str, str], *flags: str) -> Proc:
        """`geops app` with ``APP_FLAGS`` and ``flags``."""
        return self._add(Proc("app", ["app", *APP_FLAGS, *flags], env, self.logdir))

    def distributor(self, env: dict[str, str], *flags: str) -> Proc:
        """`geops distributor` with ``DISTRIBUTOR_FLAGS`` and ``flags``."""
        return self._add(Proc("distributor", ["distributor", *DISTRIBUTOR_FLAGS, *flags], env,
                              self.logdir))

    def geops(self, name: str, env: dict[str, str], *args: str) -> Proc:
        """Any other geops command, logged as ``name``."""
        return self._add(Proc(name, list(args), env, self.logdir))

    def _add(self, proc: Proc) -> Proc:
        self.started.append(proc)
        return proc

    def reap(self) -> None:
        """Kill every process started that still runs."""
        for proc in self.started:
            proc.reap()


def wait_ready(cfg: config.Config, app: Proc, timeout: float = 180) -> None:
    """Until the app's query takes publications (its ready file, ``app.main.ready_path``)."""
    wait_for("the app's query to start", ready_path(checkpoint_dir(cfg)).exists, timeout, [app])


class Publisher:
    """The workload's publications at a steady rate, each stamped with the time it is sent;
    to the partitions given, in turn, or where the key puts it."""

    def __init__(self, cfg: config.Config, pubs: Publications, rate: float,
                 outage_limit: float = DEFAULT_OUTAGE_LIMIT):
        self.cfg, self.rate, self.outage_limit = cfg, rate, outage_limit
        self.topic = cfg.topic("publications")
        self.records = list(publication_records(pubs))
        self.codec = codec()
        self.sent = 0
        self.sender = self._sender()

    def _sender(self) -> Sender:
        return Sender(self.cfg.kafka_client(), rate=self.rate, outage_limit=self.outage_limit)

    @property
    def left(self) -> int:
        """Publications not sent yet."""
        return len(self.records) - self.sent

    def publish(self, n: int, partitions: Sequence[int] | None = None) -> None:
        """Send the next ``n`` publications (at most what is left) at the rate."""
        for i, rec in enumerate(self.records[self.sent:self.sent + n]):
            rec["event_time"] = int(time.time() * 1000)
            part = None if partitions is None else partitions[i % len(partitions)]
            self.sender.send(self.topic, self.codec.encode("Publication", rec),
                             key=str(rec["id"]).encode(), partition=part)
            self.sender.poll(0)
        self.sent = min(self.sent + n, len(self.records))

    def renew(self) -> None:
        """Deliver what is queued, then continue with a new producer (which learns the topic's
        partitions afresh)."""
        self.sender.close()
        self.sender = self._sender()

    def close(self) -> None:
        """Deliver everything queued: waits out an outage up to the outage limit."""
        self.sender.close()


def processed(cfg: config.Config) -> int:
    """Publications the app's batches have read so far (their BatchSummary records)."""
    return sum(s["records"] for s in metrics(cfg).get("BatchSummary", []))


def wait_answered(cfg: config.Config, oracle: dict[int, tuple[int, ...]],
                  running: Sequence[Proc], timeout: float = 300) -> None:
    """Until every publication the oracle matches has a Match record."""
    wait_for("every publication to be answered", lambda: set(oracle) <= set(matches(cfg)),
             timeout, running)


def assert_matches_oracle(cfg: config.Config, oracle: dict[int, tuple[int, ...]]) -> int:
    """The matches equal the oracle's: the same publications, each with the oracle's list
    every time it was answered (a replayed batch repeats it). Returns the duplicates."""
    got = matches(cfg)
    assert set(got) == set(oracle), (f"missing {sorted(set(oracle) - set(got))[:20]}, "
                                     f"unexpected {sorted(set(got) - set(oracle))[:20]}")
    wrong = {pub: lists for pub, lists in got.items()
             if any(found != oracle[pub] for found in lists)}
    assert not wrong, f"matches that differ from the oracle's: {list(wrong.items())[:5]}"
    return sum(len(lists) - 1 for lists in got.values())
