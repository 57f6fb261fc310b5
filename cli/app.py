"""`geops app`: run the streaming app through the venv's spark-submit.

Options are checked here first (bad values fail fast, without starting a JVM), then
``spark-submit [--master M] app/main.py <the same options>`` runs with this interpreter as
the Python of the driver and of every executor. Spark options go in ``[spark.conf]`` of the
configuration file; on a cluster, executors need this package installed (pip install .).

SIGINT and SIGTERM are passed to the Python driver only (app/main.py under the JVM), which
stops after the current batch and exits 0; a JVM that got them too would tear Spark down under
it. So spark-submit starts with both ignored (the JVM then installs no handler for them; the
driver installs its own), and stays in this process group, so ``kill -9`` of the group still
stops everything.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

from cli.common import CommandError

APP_MAIN = Path(__file__).resolve().parent.parent / "app" / "main.py"


def register(sub: argparse._SubParsersAction) -> None:
    from app.main import build_parser

    app_parser = build_parser()
    parser = sub.add_parser("app", help="run the streaming app (spark-submit app/main.py)",
                            description=app_parser.description, parents=[app_parser],
                            add_help=False, conflict_handler="resolve")
    parser.set_defaults(func=_run)


def spark_submit() -> str:
    """The spark-submit next to this interpreter (installed by the pyspark wheel)."""
    local = Path(sys.executable).parent / "spark-submit"
    if local.exists():
        return str(local)
    found = shutil.which("spark-submit")
    if found is None:
        raise CommandError("spark-submit not found next to this Python or on PATH; "
                           "install the project with scripts/test or pip install -e .")
    return found


def _run(args: argparse.Namespace) -> int:
    import config

    cfg = config.from_args(args)  # validate everything before starting Spark
    if not cfg.bootstrap_servers():
        raise CommandError("no Kafka bootstrap servers configured")
    argv = args.raw_argv[args.raw_argv.index("app") + 1:]
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    cmd = [spark_submit(), "--master", cfg["spark.master"], str(APP_MAIN), *argv]
    child = subprocess.Popen(cmd, env=env, preexec_fn=_ignore_stop_signals)

    def forward(signum: int, _frame: object) -> None:
        drivers = driver_pids(child.pid)
        # Before the driver runs there is nothing to stop cleanly: end spark-submit.
        targets = [(pid, signum) for pid in drivers] or [(child.pid, signal.SIGKILL)]
        for pid, sig in targets:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)

    previous = {sig: signal.signal(sig, forward) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        return child.wait()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _ignore_stop_signals() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)


def driver_pids(root: int) -> list[int]:
    """Processes below ``root`` that run the app's Python driver (app/main.py)."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        parents.setdefault(ppid, []).append(int(entry.name))
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        for kid in parents.get(pid, []):
            try:
                cmdline = Path(f"/proc/{kid}/cmdline").read_bytes()
            except OSError:
                continue
            if str(APP_MAIN).encode() in cmdline:
                found.append(kid)
            todo.append(kid)
    return found
