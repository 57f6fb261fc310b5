"""The whole story on the secured broker (``geops broker start --secure``), each part under
its own principal: subscribe, the app in exactly-once, the distributor rebalancing, a live
publisher, tail, the dashboard; and no password shows in a command line, a log or a file of
the state directory. (A file of its own, so that it runs beside the refusals.)"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import urllib.request
from pathlib import Path

import pytest

from geops.workload import SkewSpec, generate_workload
from kafkaio.dump import by_schema
from kafkaio.sender import produce_records
from schemas.records import subscription_records
from tests.app.conftest import matches, metrics
from tests.app.secured import geops
from tests.faults.stack import (
    Procs,
    Publisher,
    assert_matches_oracle,
    oracle_of,
    wait_for,
    wait_ready,
)

pytestmark = [pytest.mark.integration, pytest.mark.slow]


class CommandLines:
    """Every process's command line, sampled each half second while it runs (what ``ps``
    shows)."""

    def __init__(self):
        self.seen: set[str] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            out = subprocess.run(["ps", "-eww", "-o", "args="], capture_output=True, text=True)
            self.seen.update(out.stdout.splitlines())
            self._stop.wait(0.5)

    def stop(self) -> set[str]:
        self._stop.set()
        self._thread.join()
        return self.seen


def _files_holding(root: Path, secrets_: list[str], skip: set[Path]) -> list[str]:
    """Files under ``root`` (but ``skip``) that contain any of ``secrets_``."""
    found = []
    for f in root.rglob("*"):
        if f.is_file() and f not in skip and f.stat().st_size < 50_000_000:
            data = f.read_bytes()
            found += [str(f) for pw in secrets_ if pw.encode() in data]
    return found


def test_the_whole_story_runs_with_each_part_under_its_own_principal(secured, tmp_path):
    w = generate_workload(seed=5, subscriptions=600, publications=6000,
                          skew=SkewSpec(workers=2, hot_workers=1, partitions=16,
                                        partitioner="kdbtree", target=0.9))
    oracle = oracle_of(w.subscriptions, w.publications)
    ps = CommandLines()
    procs = Procs(tmp_path / "logs")
    try:
        sub_cfg = secured.cfg("subscriber")
        produce_records(sub_cfg.kafka_client(), sub_cfg.topic("subscriptions"), "Subscription",
                        subscription_records(w.subscriptions))
        # a low threshold: the test needs one rebalance, whatever the join costs here
        dist = procs.distributor(secured.env("distributor"), "--threshold", "0.2")
        app = procs.app(secured.env("app"), "--delivery", "exactly-once")
        dash = subprocess.Popen([sys.executable, "-m", "cli.main", "dashboard", "--port", "0"],
                                env=secured.env("dashboard"), stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
        app_cfg = secured.cfg("app")
        wait_ready(app_cfg, app)
        dash_cfg = secured.cfg("dashboard")
        pub = Publisher(secured.cfg("publisher"), w.publications, rate=500)

        def rebalanced() -> bool:
            return bool(by_schema(dash_cfg.kafka_client(), dash_cfg.topic("control")))

        while pub.left and not rebalanced():  # live, until the distributor has commanded
            pub.publish(500)
            pub.sender.flush()
        pub.publish(pub.left)
        pub.close()
        wait_for("the app to answer every publication",
                 lambda: set(oracle) <= set(matches(sub_cfg)), 180, [app, dist])
        wait_for("the app to apply the rebalance",
                 lambda: bool(metrics(app_cfg).get("MoveReport")), 60, [app])

        line = dash.stdout.readline()
        assert " at http://" in line, line
        url = line.split(" at ", 1)[1].split(" ", 1)[0].rstrip("/")

        state: dict = {}

        def dashboard_saw_it() -> bool:
            with urllib.request.urlopen(f"{url}/api/state", timeout=5) as r:
                state.update(json.load(r))
            return (state["problem"] is None and state["app"] is not None
                    and any(rb["applied"] for rb in state["rebalances"]))

        try:
            wait_for("the dashboard to show the applied rebalance", dashboard_saw_it, 60)
        except AssertionError:
            pytest.fail(f"the dashboard did not show the applied rebalance; it shows {state}")
        tail = geops(secured, "subscriber", "tail", "--topic", "matches", "--from-beginning",
                     "--max", "3")
        assert tail.returncode == 0 and len(tail.stdout.splitlines()) == 3, tail.stderr

        assert app.stop() == 0 and dist.stop() == 0
        dash.terminate()
        dash_out = dash.communicate(timeout=30)[0]
        assert assert_matches_oracle(sub_cfg, oracle) == 0  # exactly once: no duplicate
    finally:
        lines = ps.stop()
        procs.reap()
    passwords = secured.passwords()
    shown = [line for line in lines for pw in passwords if pw in line]
    assert not shown, f"a password on a command line: {shown[0][:200]}"
    logs = "\n".join(p.logs() for p in procs.started) + dash_out + tail.stdout + tail.stderr
    assert not [pw for pw in passwords if pw in logs]
    secure_dir = Path(secured.info.secure_dir)
    private = set(secure_dir.iterdir()) | set(secured.state.glob("broker/node-*/server.properties"))
    assert _files_holding(secured.state, passwords, private) == []
