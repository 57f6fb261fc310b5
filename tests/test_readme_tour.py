"""The README's five-minute tour, run as written in a fresh shell, so that it cannot drift.

The commands are read from the README. What the test changes, and only that: the tour's own
alternative to ``geops broker start`` ("or --bootstrap-servers yours": the test broker, with
topics of this test's own); a small workload (``geops generate`` gets sizes); an end for the
commands that watch until Ctrl-C (``--until-idle``); each background process's output in a log
file; and, before the commands that show results, a wait until the app has processed every
publication (a person watches ``geops stats --follow`` for that). The defaults the tour names
are checked against the configuration.
"""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
from pathlib import Path

import pytest

import config

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[1]
PUBLICATIONS = 2_000
SIZES = f"--subscriptions 400 --publications {PUBLICATIONS} --seed 3"
UNTIL_IDLE = {  # commands that watch until Ctrl-C, and how the test ends them
    "geops stats --follow": "--period 1s --until-idle 3s --from-beginning",
    "geops tail --topic control": "--from-beginning --until-idle 2s",
    "geops tail --topic matches": "--from-beginning --until-idle 2s",
}
READY = "ready: the query has started"  # the app's log line once it reads the stream


def wait_for_the_app(log: Path) -> str:
    """Shell lines that wait (5 minutes at most) until the app logging to ``log`` is ready and
    its batches processed every publication."""
    return (f"for _ in $(seq 600); do grep -q '{READY}' {log} && break; sleep 0.5; done\n"
            f"for _ in $(seq 60); do geops stats --expect-publications {PUBLICATIONS} "
            f">/dev/null 2>&1 && break; sleep 1; done")


def tour() -> list[str]:
    """The commands of the README's tour, one per line, comments removed."""
    text = (ROOT / "README.md").read_text()
    block = text.split("## A five-minute tour", 1)[1].split("```", 2)[1]
    return [line.split(" # ")[0].split("  #")[0].rstrip() for line in block.splitlines()
            if line.strip() and not line.lstrip().startswith("#")]


def script(commands: list[str], work: Path) -> str:
    """The tour as a bash script with the changes the module's docstring lists."""
    out = ["set -euo pipefail", f"cd {shlex.quote(str(ROOT))}"]
    app_log = None
    for n, cmd in enumerate(commands):
        cmd = cmd.replace("/tmp/w", str(work / "w"))
        if cmd == "geops broker start":
            continue  # the tour's alternative: the test broker (GEOPS_BOOTSTRAP_SERVERS)
        if cmd.startswith("geops generate"):
            cmd += " " + SIZES
        for head, tail in UNTIL_IDLE.items():
            if cmd.startswith(head):
                out.append(wait_for_the_app(app_log))
                cmd = f"{head} {tail}{cmd[len(head):]}"
        if cmd.endswith("&"):
            log = work / f"background-{n}.log"
            app_log = log if cmd.startswith("geops app") else app_log
            cmd = f"{cmd[:-1].rstrip()} > {log} 2>&1 &"
        if cmd.startswith("kill -TERM %"):
            out += [cmd, f"wait {cmd.split()[-1]}  # the app's exit code"]
            continue
        out.append(cmd)
    out.append("kill %1 %3")  # the distributor and the dashboard
    return "\n".join(out) + "\n"


def test_the_defaults_the_tour_names_are_the_defaults():
    text = (ROOT / "README.md").read_text()
    cfg = config.load(environ={})
    (mode,) = re.findall(r"geops distributor &\s+# balance the app \(--mode (\w+)", text)
    assert mode == cfg["distributor.mode"]
    (minutes,) = re.findall(r"up to `--outage-limit` \((\d+) minutes\)", text)
    assert float(minutes) * 60 == cfg["kafka.outage_limit"]


def test_the_tour_runs_as_written(geops_env, tmp_path):
    commands = tour()
    assert commands[0].startswith("source .venv/bin/activate")
    assert any(c.startswith("kill -TERM %2") for c in commands)
    assert (ROOT / ".venv" / "bin" / "geops").exists(), "the tour needs the project's .venv"
    body = script(commands, tmp_path)
    env = {k: v for k, v in os.environ.items()
           if k not in ("VIRTUAL_ENV", "PYTHONPATH") and not k.startswith("GEOPS_")}
    env.update(geops_env, GEOPS_DASHBOARD_PORT="0",
               PATH=":".join(p for p in env["PATH"].split(":") if ".venv" not in p))
    proc = subprocess.Popen(["bash", "--noprofile", "--norc", "-c", body], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=400)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)
    logs = "\n".join(f"--- {p.name}\n{p.read_text()[-2000:]}"
                     for p in sorted(tmp_path.glob("background-*.log")))
    assert proc.returncode == 0, f"{body}\n{out[-4000:]}\n{logs}"
    assert f"produced {PUBLICATIONS} publications" in out
    assert "unsubscribed 1 subscriptions" in out
    app_log = next(p for p in tmp_path.glob("background-*.log") if READY in p.read_text())
    assert "stopped after" in app_log.read_text()
    assert re.search(rf"\b{PUBLICATIONS:,}\b", out), out[-3000:]  # the epoch summary's count
