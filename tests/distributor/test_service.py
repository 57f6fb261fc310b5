"""The distributor service on Apache Kafka, with the app played by records we produce.

Covers what the engine's unit tests cannot: recovery from the control topic across restarts,
the Kafka loop surviving bad input, idle stop, missing topics, unreachable Kafka, and the CLI
(bad values, signals).
"""

from __future__ import annotations

import logging
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

import config
import distributor.service as service_module
from cli.main import main
from config import ConfigError
from distributor.service import Service, build_engine
from kafkaio.dump import by_schema
from kafkaio.sender import Sender
from kafkaio.topics import create_topics
from schemas import codec

pytestmark = pytest.mark.integration

APP = "geops"  # the configured default app id
P, W = 8, 2
FAST = {"distributor.mode": "dynamic", "distributor.metric": "DB", "distributor.period": "0.3s",
        "distributor.min_items": "0", "distributor.wait_periods": "1"}
REPO = Path(__file__).resolve().parents[2]


@contextmanager
def running(service: Service) -> Iterator[None]:
    """Run ``service`` in a thread for the block; then stop it and check it stopped cleanly."""
    stop = threading.Event()
    codes: list[int] = []
    thread = threading.Thread(target=lambda: codes.append(service.run(stop)), daemon=True)
    thread.start()
    try:
        # a busy machine can take a while; a start that failed says how at once
        deadline = time.monotonic() + 60
        while not service.ready.wait(0.2) and thread.is_alive() and time.monotonic() < deadline:
            pass
        assert service.ready.is_set(), f"the distributor did not start (exit codes {codes})"
        yield
        assert thread.is_alive(), "the distributor stopped on its own"
    finally:
        stop.set()
        thread.join(30)
    assert codes == [0]


def load_record(batch: int, epoch: int, partition: int, worker: int, items: int,
                app: str = APP) -> dict:
    return {"app_id": app, "batch_id": batch, "epoch": epoch, "partition": partition,
            "worker": worker, "items": items, "processing_ns": items * 1000, "candidates": 0,
            "matches": 0, "index_builds": 0, "static_bytes": 0, "time": 1_000}


def summary_record(batch: int, epoch: int, partitions: int = P, app: str = APP) -> dict:
    return {"app_id": app, "batch_id": batch, "epoch": epoch, "strategy": "sPS", "join": "STAL",
            "workers": W, "partitions": partitions, "records": 100, "dead_letters": 0,
            "items": 100, "matched_publications": 0, "start_time": 1_000, "end_time": 1_100,
            "duration_ms": 100.0, "join_stage_ms": 50.0, "latency_mean_ms": None,
            "latency_p50_ms": None, "latency_p99_ms": None}


class FakeApp:
    """Plays the app on the metrics topic: one batch = P PartitionLoads, then a BatchSummary."""

    def __init__(self, cfg):
        self.topic = cfg.topic("metrics")
        self.sender = Sender(cfg.kafka_client())
        self.batch = 0

    def send(self, name: str, record: dict) -> None:
        self.send_raw(codec().encode(name, record))

    def send_raw(self, value: bytes | None) -> None:
        self.sender.send(self.topic, value, key=APP.encode())
        self.sender.flush()

    def play(self, epoch: int, assignment: list[int], hot: int = 0) -> None:
        """One batch under ``assignment`` with 10x more items on the partitions of ``hot``."""
        enc = codec().encode
        for p, w in enumerate(assignment):
            self.sender.send(self.topic, enc("PartitionLoad", load_record(
                self.batch, epoch, p, w, 100 if w == hot else 10)), key=APP.encode())
        self.sender.send(self.topic, enc("BatchSummary", summary_record(self.batch, epoch)),
                         key=APP.encode())
        self.sender.flush()
        self.batch += 1

    def play_until(self, done: Callable[[], bool], epoch: int, assignment: list[int],
                   timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while not done():
            assert time.monotonic() < deadline, "condition not reached in time"
            self.play(epoch, assignment)
            time.sleep(0.05)


def wait_for(done: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.05)


def commands(cfg) -> list[dict]:
    return by_schema(cfg.kafka_client(), cfg.topic("control")).get("RebalanceCommand", [])


def send_command(sender: Sender, cfg, epoch: int, assignment: list[int], app: str = APP) -> None:
    sender.send(cfg.topic("control"), codec().encode("RebalanceCommand", {
        "epoch": epoch, "assignment": assignment, "moves": [], "mldc_before": 1.0,
        "mldc_predicted": 0.0, "metric": "DB", "reason": "test", "time": 1_000,
        "app_id": app}), key=app.encode())


def test_restart_recovers_the_epoch_and_commands_a_higher_one(kafka_cfg):
    create_topics(kafka_cfg)
    cfg = kafka_cfg.with_overrides(FAST)
    earlier = [1, 0, 1, 0, 1, 0, 1, 0]   # a previous distributor's epoch-3 assignment
    sender = Sender(kafka_cfg.kafka_client())
    send_command(sender, cfg, 3, earlier)
    send_command(sender, cfg, 9, [0] * P, app="another-app")     # not ours
    send_command(sender, cfg, 2, [0, 0, 0, 0, 1, 1, 1, 1])       # older, though written later
    sender.send(cfg.topic("control"), b"\x00garbage", key=b"x")  # undecodable
    sender.send(cfg.topic("control"), None, key=b"y")            # tombstone
    sender.flush()

    first = Service(cfg)
    app = FakeApp(cfg)
    with running(first):
        assert (first.engine.epoch, first.engine.assignment) == (3, earlier)
        app.play_until(lambda: first.counters.get("commands", 0) == 1, 3, earlier)
    assert first.counters["control records skipped"] == 1
    issued = commands(cfg)[-1]
    assert issued["epoch"] == 4 and issued["app_id"] == APP
    assert all(m["from_worker"] == earlier[m["partition"]] for m in issued["moves"])
    assert issued["moves"] and issued["mldc_before"] > 0.5

    # A distributor started now resumes from epoch 4 and its next command is epoch 5.
    second = Service(cfg)
    with running(second):
        assert (second.engine.epoch, second.engine.assignment) == (4, issued["assignment"])
        app.play_until(lambda: second.counters.get("commands", 0) == 1, 4,
                       issued["assignment"])
    assert [c["epoch"] for c in commands(cfg) if c["app_id"] == APP] == [3, 2, 4, 5]


def test_bad_metrics_records_are_counted_and_skipped_and_it_keeps_working(kafka_cfg, caplog):
    caplog.set_level(logging.INFO, logger="geops.distributor")
    create_topics(kafka_cfg)
    cfg = kafka_cfg.with_overrides(FAST)
    service = Service(cfg)
    app = FakeApp(cfg)
    good = load_record(0, 0, 0, 0, 5)
    with running(service):
        app.send_raw(b"not avro at all")
        app.send_raw(None)                                              # tombstone
        app.send_raw(codec().encode("PartitionLoad", good)[:-3])        # truncated body
        app.send("Match", {"publication_id": 1, "subscription_ids": [2], "event_time": 1,
                           "match_time": 2, "batch_id": 0, "app_id": APP})
        app.send("MoveReport", {"app_id": APP, "batch_id": 0, "epoch": 7,
                                "partitions_moved": [1, 2], "bytes": 2048, "duration_ms": 3.0,
                                "time": 1_000})
        app.send("BatchSummary", summary_record(0, 0))                  # learns P=8, W=2
        for _ in range(30):
            app.send("PartitionLoad", load_record(0, 0, 99, 0, 5))      # no partition 99
        app.send("PartitionLoad", load_record(0, 0, 1, 5, 5))           # no worker 5
        app.send("PartitionLoad", {**good, "items": -4})                # negative count
        app.send("PartitionLoad", load_record(0, 0, 2, 0, 5, app="another-app"))
        app.send("BatchSummary", summary_record(1, 0, partitions=4))    # another shape
        app.batch = 2
        app.play_until(lambda: service.counters.get("commands", 0) == 1, 0,
                       [p * W // P for p in range(P)])
    counters = service.counters
    assert counters["undecodable"] == 3
    assert counters["unexpected schema"] == 1
    assert counters["move reports"] == 1
    assert counters["out of range"] == 31
    assert counters["malformed"] == 1
    assert counters["foreign app"] == 1
    assert counters["shape mismatch"] == 1
    assert commands(cfg)[0]["epoch"] == 1
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    # rate-limited: one line per period, not one per record
    out_of_range = [w for w in warnings if "out of range" in w]
    assert 1 <= len(out_of_range) <= 3
    assert sum(int(n) for w in out_of_range
               for n in re.findall(r"(\d+) out of range \(first", w)) == 31
    assert not any("foreign app" in w for w in warnings)  # other apps are ignored quietly
    assert any("runs epoch 7 from batch 0: 2 partition(s) moved" in r.getMessage()
               for r in caplog.records)


def test_a_period_ends_at_a_batch_boundary(kafka_cfg):
    """Loads of one batch that straddle the period's end are judged together."""
    create_topics(kafka_cfg)
    cfg = kafka_cfg.with_overrides({**FAST, "distributor.mode": "observe"})
    service = Service(cfg)
    app = FakeApp(cfg)
    assignment = [p * W // P for p in range(P)]
    with running(service):
        app.play(0, assignment)
        wait_for(lambda: service.counters.get("loads", 0) == P)
        closed = service.counters["periods"]
        wait_for(lambda: service.counters["periods"] > closed)
        for p in range(4):
            app.send("PartitionLoad", load_record(1, 0, p, 0, 100))
        time.sleep(0.8)  # past the end of the 0.3 s period, well within the grace
        for p in range(4, P):
            app.send("PartitionLoad", load_record(1, 0, p, 1, 10))
        app.send("BatchSummary", summary_record(1, 0))
        wait_for(lambda: service.counters.get("loads", 0) == 2 * P)
        closed = service.counters["periods"]
        wait_for(lambda: service.counters["periods"] >= closed + 2)
    statuses = by_schema(cfg.kafka_client(), cfg.topic("status"))["DistributorStatus"]
    # batch 0 in one period; batch 1, straddling the end of the next, in one period too
    assert [s["items"] for s in statuses if s["items"]] == [4 * 100 + 4 * 10] * 2


@pytest.mark.parametrize("first_period", ["min-items", "full"])
def test_the_first_period_closes_once_m_items_are_in(kafka_cfg, first_period):
    """With a long D, a skewed first batch is judged (and rebalanced) at once, its loads
    included although they came before the first BatchSummary; `full` waits for D."""
    create_topics(kafka_cfg)
    cfg = kafka_cfg.with_overrides({**FAST, "distributor.period": "60s",
                                    "distributor.min_items": "440",
                                    "distributor.first_period": first_period})
    service = Service(cfg)
    app = FakeApp(cfg)
    with running(service):
        app.play(0, [p * W // P for p in range(P)])   # 4 x 100 + 4 x 10 items: exactly M
        wait_for(lambda: service.counters.get("loads", 0) == P)
        if first_period == "min-items":
            wait_for(lambda: service.counters.get("commands", 0) == 1, timeout=10)
        else:
            time.sleep(2)
            assert service.counters.get("periods", 0) == 0
    if first_period == "min-items":
        assert service.counters["held"] == P and service.counters["periods"] == 1
        assert commands(cfg)[0]["epoch"] == 1


def test_stops_on_its_own_once_the_app_is_idle(kafka_cfg):
    create_topics(kafka_cfg)
    service = Service(kafka_cfg.with_overrides({**FAST, "distributor.stop_after_idle": "1s"}))
    app = FakeApp(kafka_cfg)
    stop = threading.Event()
    codes: list[int] = []
    thread = threading.Thread(target=lambda: codes.append(service.run(stop)), daemon=True)
    thread.start()
    assert service.ready.wait(30)
    until = time.monotonic() + 2.0
    while time.monotonic() < until:  # twice the idle time, with our app's metrics flowing
        app.play(0, [p * W // P for p in range(P)])
        time.sleep(0.2)
    assert thread.is_alive()
    last = time.monotonic()
    thread.join(10)
    assert not thread.is_alive() and codes == [0] and not stop.is_set()
    assert 0.8 <= time.monotonic() - last <= 3.0


def test_missing_topics_and_unreachable_kafka_fail_with_exit_code_1(kafka_cfg, caplog,
                                                                      monkeypatch):
    assert Service(kafka_cfg).run() == 1
    assert "does not exist (create it with `geops topics create`)" in caplog.text
    caplog.clear()
    monkeypatch.setattr(service_module, "REACH_TIMEOUT_S", 1.0)
    assert Service(kafka_cfg.with_overrides({"kafka.bootstrap_servers": "127.0.0.1:9"})).run() == 1
    assert "cannot reach Kafka at 127.0.0.1:9" in caplog.text


@pytest.mark.parametrize("argv, flag", [
    (["--period", "0"], "--period"),
    (["--period", "soon"], "--period"),
    (["--threshold=-1"], "--threshold"),
    (["--min-improvement=-0.5"], "--min-improvement"),
    (["--policy", "roundrobin"], "--policy"),
    (["--metric", "XB"], "--metric"),
    (["--mode", "off"], "--mode"),
    (["--metric", "DB"], "--metric"),  # the default mode, adaptive, decides on processing time
    (["--wait-periods", "two"], "--wait-periods"),
    (["--stop-after-idle=-1s"], "--stop-after-idle"),
])
def test_cli_rejects_bad_values_naming_the_flag(argv, flag, geops_env, capsys):
    assert main(["distributor", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"geops distributor: {flag} (distributor.")


def test_item_counts_need_mode_dynamic():
    cfg = config.load(environ={})
    assert cfg["distributor.mode"] == "adaptive"
    assert build_engine(cfg.with_overrides({"distributor.mode": "dynamic",
                                            "distributor.metric": "DB"})).params.metric == "DB"
    with pytest.raises(ConfigError, match=r"--metric \(distributor.metric\): DB with --mode "
                                          r"adaptive: .*mode dynamic \(Table 1\) takes DB"):
        build_engine(cfg.with_overrides({"distributor.metric": "DB"}))


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_cli_stops_cleanly_on_a_signal(signum, kafka_cfg, geops_env):
    create_topics(kafka_cfg)
    env = {**os.environ, **geops_env, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "cli", "distributor", "--app-id", "demo",
                             "--mode", "dynamic", "--period", "0.2s"], cwd=REPO, env=env,
                            stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    started = threading.Event()

    def read() -> None:
        for line in proc.stderr:
            lines.append(line)
            if "period 1 epoch 0" in line:
                started.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        assert started.wait(30), "".join(lines)
        proc.send_signal(signum)
        assert proc.wait(15) == 0
    finally:
        proc.kill()
    reader.join(5)
    text = "".join(lines)
    assert "balancing app 'demo'" in text
    assert f"received {signal.Signals(signum).name}; stopping" in text
    assert "stopped after" in text and "Traceback" not in text


def test_a_forged_command_the_app_rejects_is_resynced_and_balancing_resumes(kafka_cfg, caplog):
    """A decodable command with workers the app does not have, recovered from the
    control topic, no longer stalls the distributor: after resync_periods it goes back to the
    epoch the app reports and commands an epoch above the forged one."""
    caplog.set_level(logging.INFO, logger="geops.distributor")
    create_topics(kafka_cfg)
    cfg = kafka_cfg.with_overrides({**FAST, "distributor.resync_periods": "2"})
    sender = Sender(kafka_cfg.kafka_client())
    send_command(sender, cfg, 99, [5, 7] * (P // 2))   # written by another tool
    sender.flush()
    in_app = [1, 0, 1, 0, 1, 0, 1, 0]                  # what the app runs, as epoch 3
    service = Service(cfg)
    app = FakeApp(cfg)
    with running(service):
        assert service.engine.epoch == 99
        app.play_until(lambda: service.counters.get("commands", 0) == 1, 3, in_app)
    issued = commands(cfg)[-1]
    assert issued["epoch"] == 100
    assert all(m["from_worker"] == in_app[m["partition"]] for m in issued["moves"])
    statuses = by_schema(cfg.kafka_client(), cfg.topic("status"))["DistributorStatus"]
    resync = [s for s in statuses if s["decision"] == "resync"]
    assert len(resync) == 1 and "re-synchronised with epoch 3" in resync[0]["reason"]
    assert any(r.levelno == logging.WARNING and "-> resync: " in r.getMessage()
               for r in caplog.records)
