"""A broker that accepts connections but does not answer when a command starts (a long garbage
collection, a partition, a paused VM; here SIGSTOP) is an outage like any later one: each geops
command waits for it up to its outage limit and then does its job, nothing lost; past the limit
it ends with the outage's line and exit code 4. Never the wrong-protocol line: that one is for a
listener that answers in another protocol (``tests/app/test_app_secured.py``)."""

from __future__ import annotations

import os
import signal
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import config
from config import Config
from config.exitcodes import EXIT_OUTAGE
from geops.geojson import write_publications, write_subscriptions
from geops.workload import generate_workload
from kafkaio.dump import by_schema
from kafkaio.sender import produce_records
from kafkaio.topics import create_topics
from schemas.records import subscription_records
from tests.faults.stack import (
    Proc,
    Procs,
    assert_matches_oracle,
    live_env,
    oracle_of,
    wait_answered,
    wait_for,
)

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SILENT = "accepts connections but does not answer; waiting for it up to the outage limit"
PROTOCOL = "security protocol"


def _freeze(pids: list[int]) -> None:
    """SIGSTOP every node, and wait until the kernel reports each one stopped."""
    for pid in pids:
        os.kill(pid, signal.SIGSTOP)
    wait_for("the broker to be stopped", lambda: all(_stopped(pid) for pid in pids), 30)


def _thaw(pids: list[int]) -> None:
    for pid in pids:
        os.kill(pid, signal.SIGCONT)


def _stopped(pid: int) -> bool:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat[stat.rindex(")") + 2] == "T"


def _said(proc: Proc, text: str) -> bool:
    return text in proc.logs()


def _commands(procs: Procs, env: dict[str, str], files: Files, extra: list[str]) -> list[Proc]:
    """Every geops command that talks to Kafka, started at once; ``extra`` flags for each."""
    return [
        procs.app(env, *extra),
        procs.distributor(env, *extra),
        procs.geops("publish", env, "publish", "--file", str(files.publications), "--rate",
                    "500", *extra),
        procs.geops("subscribe", env, "subscribe", "--file", str(files.subscriptions),
                    "--topic", files.topic, *extra),
        procs.geops("tail", env, "tail", "--topic", "publications", "--from-beginning", "--max",
                    str(files.count), *extra),
        procs.geops("stats", env, "stats", *extra),
    ]


@dataclass
class Files:
    """What the publisher and the subscriber write: the workload's publications (``count``)
    and more subscriptions, to a topic of their own (so the app's answers stay the oracle's)."""

    publications: Path
    subscriptions: Path
    topic: str
    count: int
    more: int


@pytest.fixture
def stack(own_broker, tmp_path, monkeypatch) -> tuple[dict[str, str], Config, Files, Any]:
    """The test broker with its topics and the workload's subscriptions, the files the
    commands write, and the workload."""
    env, cfg = live_env(own_broker.address, tmp_path, "silent-", monkeypatch)
    w = generate_workload(seed=64, subscriptions=300, publications=1_500)
    create_topics(cfg)
    produce_records(cfg.kafka_client(), cfg.topic("subscriptions"), "Subscription",
                    subscription_records(w.subscriptions))
    more = generate_workload(seed=65, subscriptions=50, publications=1).subscriptions
    files = Files(tmp_path / "publications.geojson", tmp_path / "subscriptions.geojson",
                  "silent-more-subscriptions", len(w.publications), len(more))
    write_publications(files.publications, w.publications)
    write_subscriptions(files.subscriptions, more)
    create_topics(config.load(environ={**env, "GEOPS_SUBSCRIPTIONS_TOPIC": files.topic}),
                  ["subscriptions"])
    return env, cfg, files, w


def test_every_command_started_on_a_silent_broker_waits_and_does_its_job(own_broker, stack,
                                                                         procs):
    env, cfg, files, w = stack
    oracle = oracle_of(w.subscriptions, w.publications)
    _freeze(own_broker.pids)
    try:
        started = _commands(procs, env, files, [])
        # each says it waits at once, and still waits ten seconds on (when the start-up probe
        # gave up with the wrong-protocol line before)
        for proc in started:
            wait_for(f"{proc.name}'s line that Kafka is silent", lambda p=proc: _said(p, SILENT),
                     180, [proc])
        for proc in started:
            wait_for(f"{proc.name}'s outage warning", lambda p=proc: _said(p, "not answering for"),
                     180, [proc])
    finally:
        _thaw(own_broker.pids)
    app, distributor, publish, subscribe, tail, stats = started
    for proc in (publish, subscribe, tail, stats):
        assert proc.proc.wait(180) == 0, proc.logs()[-3000:]
    wait_answered(cfg, oracle, [app, distributor])
    assert assert_matches_oracle(cfg, oracle) == 0  # one Match per publication: none replayed
    published = by_schema(cfg.kafka_client(), cfg.topic("publications")).get("Publication", [])
    assert sorted(r["id"] for r in published) == sorted(w.publications.ids.tolist())
    written = by_schema(cfg.kafka_client(), files.topic).get("Subscription", [])
    assert len(written) == len({r["id"] for r in written}) == files.more
    assert "balancing app" in distributor.logs()
    for proc in (distributor, app):
        assert proc.stop() == 0, proc.logs()[-3000:]
    for proc in started:
        assert PROTOCOL not in proc.logs(), f"{proc.name}: {proc.logs()[-2000:]}"
        assert "Traceback" not in proc.logs(), f"{proc.name}: {proc.logs()[-3000:]}"


def test_a_broker_silent_past_the_outage_limit_ends_every_command_with_exit_code_4(
        own_broker, stack, procs):
    env, _, files, _ = stack
    _freeze(own_broker.pids)
    try:
        started = _commands(procs, env, files, ["--outage-limit", "5s"])
        codes = {proc.name: proc.proc.wait(180) for proc in started}
    finally:
        _thaw(own_broker.pids)
    for proc in started:
        out = proc.logs()
        assert codes[proc.name] == EXIT_OUTAGE, f"{proc.name} {codes[proc.name]}: {out[-3000:]}"
        final = [line for line in out.splitlines() if "did not answer for" in line]
        assert final, f"{proc.name}: {out[-3000:]}"
        assert (f"Kafka at {own_broker.address}" in final[-1]
                and "outage limit of 5 s" in final[-1]), final[-1]
        assert PROTOCOL not in out and "Traceback" not in out, f"{proc.name}: {out[-3000:]}"
