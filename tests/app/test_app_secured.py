"""The secured broker (``geops broker start --secure``): SASL_SSL with SCRAM-SHA-512 only, no
access without an ACL, one principal per part, on one node and on three. Each part trying what
is not its job, and clients with wrong credentials or TLS settings, are refused in one line
naming what was refused, without a password in it. (The whole story under the parts'
principals: ``test_app_secured_story.py``.)"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

import config
from kafkaio import broker as local
from kafkaio import security
from tests.app.secured import PREFIX, Secured, geops

pytestmark = [pytest.mark.integration, pytest.mark.slow]


def test_the_broker_takes_sasl_ssl_only_and_its_files_are_private(secured):
    props = (Path(secured.info.log).parent / "server.properties").read_text()
    assert "listener.security.protocol.map=CLIENT:SASL_SSL,CONTROLLER:SSL" in props
    assert "allow.everyone.if.no.acl.found=false" in props
    for f in Path(secured.info.secure_dir).iterdir():
        if f.name != "ca.pem":
            assert f.stat().st_mode & 0o077 == 0, f"{f} is readable by others"


@pytest.fixture
def a_file(tmp_path) -> str:
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
    started = time.monotonic()
    done = geops(secured, part, *args, **env)
    took = time.monotonic() - started
    assert done.returncode != 0
    if case == "no TLS":  # the listener answered in TLS: said at once, never waited out
        assert took < 10, took
    lines = done.stderr.strip().splitlines()
    if part == "app":  # the app logs to stdout (Spark to stderr): its errors are geops.app's
        lines = [line for line in done.stdout.splitlines() if " geops.app ERROR " in line]
    assert len(lines) == 1, done.stdout[-3000:] + done.stderr[-3000:]
    assert expected in lines[0], lines[0]
    assert "Traceback" not in done.stdout + done.stderr
    for pw in secured.passwords():
        assert pw not in done.stdout + done.stderr


def test_a_three_node_cluster_is_secured_the_same_way(tmp_path, a_file):
    state = tmp_path / "cluster"
    topics = {t: f"{PREFIX}{t.replace('_', '-')}" for t in config.TOPICS}
    info, _ = local.start(state, port=0, nodes=3, secure=True, topic_names=topics)
    try:
        props = (Path(info.node(3).log).parent / "server.properties").read_text()
        assert "listener.name.controller.ssl.client.auth=required" in props
        s = Secured(info, state, topics)
        assert geops(s, "admin", "topics", "create").returncode == 0
        done = geops(s, "publisher", "publish", "--file", a_file)
        assert done.returncode == 0, done.stderr
        refused = geops(s, "publisher", "publish", "--file", a_file, "--topic",
                        topics["control"], GEOPS_OUTAGE_LIMIT="15s")
        assert "Kafka denied User:publisher WRITE on topic 'sec-control'" in refused.stderr
    finally:
        local.stop(state)


def test_a_client_without_credentials_is_told_where_they_are(secured):
    env = secured.env("subscriber", GEOPS_OUTAGE_LIMIT="15s")
    del env["GEOPS_CONFIG"]  # the state directory's broker, found from its record
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "cli.main", "tail", "--topic", "matches",
                           "--until-idle", "1s"], env=env, capture_output=True, text=True,
                          timeout=120)
    assert time.monotonic() - started < 10  # a plaintext client at the TLS listener: at once
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert f"is secured: connect as a part of geops with --config {secured.info.secure_dir}/" \
           "<part>.toml" in lines[0]
