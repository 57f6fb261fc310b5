"""`geops app` on a cluster ships the app's own packages as a zip (``--py-files``), so that the
executors need only the third-party dependencies. No Spark here: the command is captured."""

from __future__ import annotations

import io
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import cli.app
from cli.main import main
from tests.isolated import environ_without_pythonpath, python_without_project


def test_the_zip_holds_the_apps_packages_and_their_data(tmp_path: Path) -> None:
    first = cli.app.packages_zip(tmp_path)
    assert cli.app.packages_zip(tmp_path) == first  # same content, same file
    names = zipfile.ZipFile(first).namelist()
    assert {"app/main.py", "app/records.py", "geops/strategies/strategy.py",
            "kafkaio/control.py", "schemas/Subscription.avsc", "config/default.toml",
            "schemas/history/Subscription.v1.avsc"} <= set(names)
    assert {name.split("/")[0] for name in names} == set(cli.app.APP_PACKAGES)
    assert not [name for name in names if "__pycache__" in name or name.endswith(".pyc")]


def test_a_python_without_the_project_runs_the_app_from_the_zip(tmp_path: Path) -> None:
    python = python_without_project(tmp_path)
    hidden = subprocess.run([python, "-c", "import geops"], cwd=tmp_path, capture_output=True,
                            env=environ_without_pythonpath())
    assert hidden.returncode != 0, "the project is importable without the zip"
    zipped = cli.app.packages_zip(tmp_path / "py-files")
    code = """
import sys
import app.batch.tasks, app.static.side, geops.strategies, kafkaio.control
import config
from schemas import codec
assert app.batch.tasks.__file__.startswith(sys.argv[1]), app.batch.tasks.__file__
assert config.load(environ={})["app.strategy"] == "sPIS"
c = codec()
assert c.decode(c.encode("Publication", {"id": 1, "geometry": b"", "event_time": 2}))[0]
for absent in ("cli", "bench", "distributor"):
    try:
        __import__(absent)
    except ImportError:
        continue
    raise SystemExit(f"{absent} is importable")
"""
    done = subprocess.run([python, "-c", code, str(zipped)], cwd=tmp_path, capture_output=True,
                          text=True, env={"PYTHONPATH": str(zipped)}, timeout=120)
    assert done.returncode == 0, done.stderr


class _Launched:
    def __init__(self, cmd, env, **_):
        self.cmd, self.env, self.pid = cmd, env, 0
        self.stdout, self.stderr = io.BytesIO(), io.BytesIO()

    def wait(self, timeout: float | None = None) -> int:
        return 0


@pytest.fixture
def launched(monkeypatch: pytest.MonkeyPatch) -> list[_Launched]:
    seen: list[_Launched] = []
    monkeypatch.setattr(cli.app.subprocess, "Popen",
                        lambda cmd, env, **kw: seen.append(_Launched(cmd, env)) or seen[-1])
    return seen


@pytest.mark.parametrize("master", ["local[2]", "local", "local[*]"])
def test_locally_executors_run_this_python_without_a_zip(master, tmp_path, launched,
                                                          monkeypatch) -> None:
    monkeypatch.setenv("PYSPARK_PYTHON", "/elsewhere/python")
    assert main(["app", "--master", master, "--state-dir", str(tmp_path),
                 "--bootstrap-servers", "kafka:9092"]) == 0
    (run,) = launched
    assert "--py-files" not in run.cmd and run.env["PYSPARK_PYTHON"] == sys.executable
    assert run.cmd[1:3] == ["--master", master]


def test_on_a_cluster_the_packages_go_with_the_job(tmp_path, launched, monkeypatch) -> None:
    monkeypatch.setenv("PYSPARK_PYTHON", "/cluster/python")
    assert main(["app", "--master", "spark://h:7077", "--state-dir", str(tmp_path),
                 "--bootstrap-servers", "kafka:9092", "--strategy", "RIhPS"]) == 0
    (run,) = launched
    zipped = Path(run.cmd[run.cmd.index("--py-files") + 1])
    assert zipped.parent == tmp_path / "py-files" and zipped.exists()
    assert run.cmd.index("--py-files") < run.cmd.index(str(cli.app.APP_MAIN))
    assert run.cmd[-2:] == ["--strategy", "RIhPS"]
    assert run.env["PYSPARK_PYTHON"] == "/cluster/python"  # the executors' own Python
    assert run.env["PYSPARK_DRIVER_PYTHON"] == sys.executable
