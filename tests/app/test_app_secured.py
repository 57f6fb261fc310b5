"""The secured broker (``geops broker start --secure``): SASL_SSL with SCRAM-SHA-512 only, no
access without an ACL, one principal per part. The whole story runs with each part under its
own principal (subscribe, the app in exactly-once, the distributor rebalancing, a live
publisher, tail, the dashboard); each part trying what is not its job, and clients with wrong
credentials or TLS settings, are refused in one line naming what was refused; no password
shows in a log, an error or a command line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

import config
from geops.workload import SkewSpec, generate_workload
from kafkaio import broker as local
from kafkaio import security
from kafkaio.dump import by_schema
from kafkaio.sender import produce_records
from schemas.records import subscription_records
from tests.app.conftest import matches, metrics
from tests.conftest import kafka_env
from tests.faults.stack import (
    Procs,
    Publisher,
    assert_matches_oracle,
    oracle_of,
    wait_for,
    wait_ready,
)

pytestmark = [pytest.mark.integration, pytest.mark.slow]

PREFIX = "sec-"


@dataclass(frozen=True)
class Secured:
    """The secured broker of this module and where each part's settings file is."""

    info: local.BrokerInfo
    state: Path
    topics: dict[str, str]

    def settings_file(self, part: str) -> Path:
        return Path(self.info.secure_dir) / f"{part}.toml"

    def env(self, part: str, **extra: str) -> dict[str, str]:
        """A process environment that makes geops connect as ``part``."""
        env = {**os.environ, **kafka_env(self.info.address, str(self.state), PREFIX),
               "GEOPS_CONFIG": str(self.settings_file(part)), **extra}
        env.pop("GEOPS_BOOTSTRAP_SERVERS")  # the part's settings file names the broker
        return env

    def cfg(self, part: str) -> config.Config:
        return config.load(environ=self.env(part))

    def passwords(self) -> list[str]:
        saved = json.loads((Path(self.info.secure_dir) / "credentials.json").read_text())
        return list(saved.values())


@pytest.fixture(scope="module")
def secured(tmp_path_factory) -> Secured:
    state = tmp_path_factory.mktemp("secured") / "state"
    topics = {t: f"{PREFIX}{t.replace('_', '-')}" for t in config.TOPICS}
    info, _ = local.start(state, port=0, secure=True, topic_names=topics)
    s = Secured(info, state, topics)
    try:
        done = geops(s, "admin", "topics", "create")
        assert done.returncode == 0, done.stderr
        yield s
    finally:
        local.stop(state)


def geops(s: Secured, part: str, *args: str, timeout: float = 120,
          **env: str) -> subprocess.CompletedProcess:
    """A geops command as ``part`` (its settings file), with ``env`` on top."""
    return subprocess.run([sys.executable, "-m", "cli.main", *args], env=s.env(part, **env),
                          capture_output=True, text=True, timeout=timeout)


def test_the_broker_takes_sasl_ssl_only_and_its_files_are_private(secured):
    props = (Path(secured.info.log).parent / "server.properties").read_text()
    assert "listener.security.protocol.map=CLIENT:SASL_SSL,CONTROLLER:SSL" in props
    assert "allow.everyone.if.no.acl.found=false" in props
    for f in Path(secured.info.secure_dir).iterdir():
        if f.name != "ca.pem":
            assert f.stat().st_mode & 0o077 == 0, f"{f} is readable by others"


@pytest.fixture
def a_file(secured, tmp_path) -> str:
    """A GeoJSON file of three publications."""
    path = tmp_path / "pubs.geojson"
    features = [{"type": "Feature", "properties": {"id": i},
                 "geometry": {"type": "Point", "coordinates": [10.0 + i, 45.0]}}
                for i in range(3)]
    path.write_text(json.dumps({"type": "FeatureCollection", "features": features}))
    return str(path)


def _other_ca(tmp_path: Path) -> str:
    other = security.tls_files(tmp_path / "other-ca")
    return str(other.ca)


@pytest.mark.parametrize(("part", "case", "expected"), [
    ("distributor", "writes matches", "Kafka denied User:distributor WRITE on topic 'sec-matches'"),
    ("publisher", "writes control", "Kafka denied User:publisher WRITE on topic 'sec-control'"),
    ("dashboard", "writes metrics", "Kafka denied User:dashboard WRITE on topic 'sec-metrics'"),
    ("publisher", "reads matches", "Kafka denied User:publisher DESCRIBE on topic 'sec-matches'"),
    ("subscriber", "wrong password", "refused the credentials"),
    ("subscriber", "no TLS", "another security protocol than this client's "
                             "security.protocol=SASL_PLAINTEXT"),
    ("subscriber", "untrusted CA", "TLS handshake"),
    ("app", "wrong password", "refused the credentials"),
])
def test_what_a_part_may_not_do_is_refused_in_one_line(secured, a_file, tmp_path, part, case,
                                                       expected):
    logical = {"writes matches": "matches", "writes control": "control",
               "writes metrics": "metrics"}
    env: dict[str, str] = {"GEOPS_OUTAGE_LIMIT": "15s"}
    env.update({"wrong password": {"GEOPS_KAFKA_SASL_PASSWORD": "not-the-password"},
                "no TLS": {"GEOPS_KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT"},
                "untrusted CA": {"GEOPS_KAFKA_SSL_CA_LOCATION": _other_ca(tmp_path)},
                }.get(case, {}))
    if case in logical:
        args = ["publish", "--file", a_file, "--topic", secured.topics[logical[case]]]
    elif part == "app":
        args = ["app", "--master", "local[1]"]
    else:
        args = ["tail", "--topic", "matches", "--from-beginning", "--until-idle", "1s"]
    done = geops(secured, part, *args, **env)
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    if part == "app":  # the app logs to stdout (Spark to stderr): its errors are geops.app's
        lines = [line for line in done.stdout.splitlines() if " geops.app ERROR " in line]
    assert len(lines) == 1, done.stdout[-3000:] + done.stderr[-3000:]
    assert expected in lines[0], lines[0]
    assert "Traceback" not in done.stdout + done.stderr
    for pw in secured.passwords():
        assert pw not in done.stdout + done.stderr


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

