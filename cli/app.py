"""`geops app`: run the streaming app through the venv's spark-submit.

Options are checked here first (bad values fail fast, without starting a JVM), then
``spark-submit --master M [--py-files Z] app/main.py <the same options>`` runs with this
interpreter as the Python of the driver. Spark options go in ``[spark.conf]`` of the
configuration file.

Locally (``local``, ``local[N]``) the executors run this interpreter too. On a cluster the app's
own packages (``APP_PACKAGES``, with their data files) go to the executors with the job, as a
zip built into ``<state dir>/py-files/`` and passed as ``--py-files``, so executors need only the
third-party dependencies; their Python is ``PYSPARK_PYTHON`` when set (Spark's convention),
else this interpreter.

Spark reads some settings only when its JVM starts (in local mode the driver JVM is running
before the session's settings are applied), so they go to spark-submit (``app/launch/jvm.py``):
``--driver-memory``, ``--driver-java-options`` with ``-XX:+ExitOnOutOfMemoryError``, and
``[spark.conf]`` as ``--conf``. The JVM's output passes through this process, which recognises a
fatal error in it (the JVM ends at its first OutOfMemoryError) and ends with one line naming the
setting to change, exit code 6, instead of an app that hangs.

SIGINT and SIGTERM are passed to the Python driver only (app/main.py under the JVM), which
stops after the current batch and exits 0; a JVM that got them too would tear Spark down under
it. So spark-submit starts with both ignored (the JVM then installs no handler for them; the
driver installs its own), and stays in this process group, so ``kill -9`` of the group still
stops everything.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import importlib.util
import io
import os
import re
import shutil
import signal
import subprocess
import sys
import zipfile
from pathlib import Path

from app.launch.jvm import FatalWatch, spark_submit_args
from cli.errors import CommandError

APP_MAIN = Path(__file__).resolve().parent.parent / "app" / "main.py"
# What the app imports of this project: app and the layers below it, not the distributor
# (tests/test_layers.py keeps it so).
APP_PACKAGES = ("app", "geops", "kafkaio", "schemas", "config")
SHIPPED_SUFFIXES = (".py", ".avsc", ".toml")  # sources and package data (schemas, defaults)
LOCAL_MASTER = re.compile(r"local(\[[^\]]*\])?")


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
    from kafkaio.java_conf import java_client_conf

    cfg = config.from_args(args)  # validate everything before starting Spark
    if args.standby and cfg.view.app.mode == "real-time":
        raise CommandError("--standby: a standby takes over a micro-batch app only, not one in "
                           "real-time mode (--mode real-time)")
    if not cfg.bootstrap_servers():
        raise CommandError("no Kafka bootstrap servers configured")
    java_client_conf(cfg.kafka_client())  # the settings must reach Spark's Kafka connector too
    argv = args.raw_argv[args.raw_argv.index("app") + 1:]
    master = cfg.view.spark.master
    env = dict(os.environ, PYSPARK_DRIVER_PYTHON=sys.executable)
    cmd = [spark_submit(), "--master", master]
    if LOCAL_MASTER.fullmatch(master):
        env["PYSPARK_PYTHON"] = sys.executable
    else:
        env.setdefault("PYSPARK_PYTHON", sys.executable)
        shipped = str(packages_zip(cfg.state_dir() / "py-files"))
        cmd += ["--py-files", shipped]
    cmd += [*spark_submit_args(cfg), str(APP_MAIN), *argv]
    # The JVM's output passes through here, so that a fatal error in it ends in one line.
    child = subprocess.Popen(cmd, env=env, preexec_fn=_ignore_stop_signals,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    watch = FatalWatch()
    watch.follow(child.stdout, sys.stdout.buffer)
    watch.follow(child.stderr, sys.stderr.buffer)
    signalled: list[int] = []
    drivers: set[int] = set()

    def forward(signum: int, _frame: object) -> None:
        signalled.append(signum)
        found = driver_pids(child.pid)
        # Before the driver runs there is nothing to stop cleanly: end spark-submit.
        targets = [(pid, signum) for pid in found] or [(child.pid, signal.SIGKILL)]
        for pid, sig in targets:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)

    previous = {sig: signal.signal(sig, forward) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        while True:
            try:
                status = child.wait(timeout=1.0)
                break
            except subprocess.TimeoutExpired:
                drivers.update(driver_pids(child.pid))
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    watch.join()
    if signalled:
        return status
    code, line = watch.verdict(status, cfg)
    if line is not None:
        _end_drivers(drivers)  # a driver whose JVM died would wait for it in vain
        print(f"geops app: {line}", file=sys.stderr)
    return code


def _end_drivers(pids: set[int]) -> None:
    for pid in pids:
        try:
            if str(APP_MAIN).encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def packages_zip(folder: Path) -> Path:
    """A zip of ``APP_PACKAGES`` as installed (sources and data files) in ``folder``, named by
    its content: built for each launch, written only when that content is new."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
        for package in APP_PACKAGES:
            spec = importlib.util.find_spec(package)
            if spec is None or not spec.submodule_search_locations:
                raise CommandError(f"package {package} not found; install the project with "
                                   f"scripts/test or pip install -e .")
            home = Path(next(iter(spec.submodule_search_locations)))
            for path in sorted(home.rglob("*")):
                if (path.suffix in SHIPPED_SUFFIXES and path.is_file()
                        and "__pycache__" not in path.parts):
                    name = (Path(package) / path.relative_to(home)).as_posix()
                    info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
                    info.compress_type = zipfile.ZIP_DEFLATED
                    zf.writestr(info, path.read_bytes())
    data = buffer.getvalue()
    target = folder / f"geops-packages-{hashlib.sha256(data).hexdigest()[:16]}.zip"
    if not target.exists():
        try:
            folder.mkdir(parents=True, exist_ok=True)
            partial = target.with_name(f"{target.name}.{os.getpid()}.tmp")
            partial.write_bytes(data)
            partial.replace(target)
        except OSError as exc:
            raise CommandError(f"cannot write the packages for the executors to {folder}: "
                               f"{exc.strerror or exc}") from None
    return target


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
