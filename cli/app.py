"""`geops app`: run the streaming app through the venv's spark-submit.

Options are checked here first (bad values fail fast, without starting a JVM), then
``spark-submit [--master M] app/main.py <the same options>`` runs with this interpreter as
the Python of the driver and of every executor. Spark options go in ``[spark.conf]`` of the
configuration file; on a cluster, executors need this package installed (pip install .).
"""

from __future__ import annotations

import argparse
import os
import shutil
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
    try:
        return subprocess.call(cmd, env=env)
    except KeyboardInterrupt:
        return 130
