"""The local broker's lifecycle, through the API and the `geops broker` command."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys

import pytest

from config.embedded import running_address
from kafkaio import broker

pytestmark = pytest.mark.integration


def geops(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cli.main", *args], capture_output=True,
                          text=True, env={**os.environ, **env}, timeout=60)


def test_start_twice_is_harmless_and_stop_stops(tmp_path):
    env = {"GEOPS_STATE_DIR": str(tmp_path)}
    first = geops("broker", "start", "--port", "0", env=env)
    assert first.returncode == 0, first.stderr
    assert "broker started" in first.stdout
    address = first.stdout.strip().splitlines()[-1].split()[-1]
    try:
        second = geops("broker", "start", "--port", "0", env=env)
        assert second.returncode == 0 and "already running" in second.stdout
        assert address in second.stdout
        status = geops("broker", "status", env=env)
        assert status.returncode == 0 and address in status.stdout
        host, port = address.split(":")
        socket.create_connection((host, int(port)), timeout=2).close()
    finally:
        stopped = geops("broker", "stop", env=env)
    assert stopped.returncode == 0 and "stopped" in stopped.stdout
    assert geops("broker", "status", env=env).returncode == 1
    assert "no broker running" in geops("broker", "stop", env=env).stdout


def test_port_in_use_is_a_clear_error(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        result = geops("broker", "start", "--port", str(port),
                       env={"GEOPS_STATE_DIR": str(tmp_path)})
    assert result.returncode == 1
    assert f"port {port} is already in use" in result.stderr
    assert "Traceback" not in result.stderr
    assert broker.status(tmp_path) is None


def test_stale_record_is_ignored(tmp_path):
    _, started = broker.start(tmp_path, port=0)
    assert started
    broker.stop(tmp_path)
    (tmp_path / "broker").mkdir(exist_ok=True)
    (tmp_path / "broker" / "broker.json").write_text(
        '{"pid": 999999, "port": 1, "address": "x", "log": "", "kafka_version": "", '
        '"started_at": 0}')
    assert broker.status(tmp_path) is None
    assert running_address(tmp_path) is None


def test_a_record_from_an_older_version_still_names_the_running_broker(tmp_path):
    # an older version recorded keys this one no longer writes (a plaintext SASL listener)
    (tmp_path / "broker").mkdir()
    (tmp_path / "broker" / "broker.json").write_text(json.dumps({
        "pid": os.getpid(), "port": 1, "address": "127.0.0.1:1", "log": "", "kafka_version": "",
        "started_at": 0, "sasl_address": "127.0.0.1:2",
        "nodes": [{"node_id": 1, "port": 1, "controller_port": 3, "pid": os.getpid(),
                   "retired": True}]}))
    info = broker.status(tmp_path)
    assert info is not None and info.address == "127.0.0.1:1" and info.pids == [os.getpid()]
