"""`geops dashboard`: its options, and a run without a reachable broker."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request

import pytest

from cli.main import main


@pytest.mark.parametrize(("argv", "named"), [
    (["--port", "abc"], "--port"),
    (["--port", "70000"], "--port"),
    (["--period", "50ms"], "--period"),
    (["--history", "3h"], "--history"),
    (["--map-window", "soon"], "--map-window"),
    (["--host", ""], "--host"),
    (["--history", "2h", "--period", "0.5s"], "--history"),  # 14,400 points a series
])
def test_bad_options_are_refused_by_name(argv, named, capsys):
    assert main(["dashboard", "--bootstrap-servers", "127.0.0.1:1", *argv]) == 2
    err = capsys.readouterr().err
    assert named in err and err.startswith("geops dashboard: ")


def test_an_address_that_cannot_be_used_names_it(capsys):
    # 192.0.2.1 (TEST-NET-1) is no address of this machine: bind fails at once
    assert main(["dashboard", "--bootstrap-servers", "127.0.0.1:1", "--host", "192.0.2.1",
                 "--port", "0"]) == 1
    err = capsys.readouterr().err
    assert "--host 192.0.2.1" in err and "cannot listen" in err


def test_help_says_what_it_shows_and_where(capsys):
    with pytest.raises(SystemExit):
        main(["dashboard", "--help"])
    out = capsys.readouterr().out
    for text in ("--port", "--host", "127.0.0.1", "/api/state", "/api/events", "/metrics",
                 "map", "rebalance", "read-only"):
        assert text in out, text


def test_without_a_broker_it_serves_a_banner_and_stops_on_sigterm(tmp_path):
    env = {**os.environ, "GEOPS_BOOTSTRAP_SERVERS": "127.0.0.1:1",
           "GEOPS_STATE_DIR": str(tmp_path)}
    proc = subprocess.Popen([sys.executable, "-m", "cli", "dashboard", "--port", "0"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            text=True)
    try:
        line = proc.stdout.readline()
        assert line.startswith("geops dashboard: app 'geops' at http://127.0.0.1:"), line
        url = line.split(" at ", 1)[1].split(" ", 1)[0]
        deadline = time.monotonic() + 20
        state = None
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(url + "api/state", timeout=2) as resp:
                    state = json.loads(resp.read())
                if state["problem"]:
                    break
            except OSError:  # 503 until the first publication
                pass
            time.sleep(0.2)
        assert state is not None and "cannot reach Kafka at 127.0.0.1:1" in state["problem"]
        with urllib.request.urlopen(url, timeout=2) as resp:
            assert resp.status == 200
        assert proc.poll() is None, "the dashboard stopped on its own"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(15) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
