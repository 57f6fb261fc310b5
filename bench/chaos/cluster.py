"""A standalone Spark cluster on this machine: a master and workers of one core each, started
from the pyspark installation, and the executors they launch (which a fault kills)."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import time
from pathlib import Path

import pyspark

from bench.harness.errors import BenchFailed
from bench.harness.processes import Proc, Processes
from bench.harness.procfs import descendants, process_parents

SPARK_BIN = Path(pyspark.__file__).parent / "bin"
EXECUTOR_CLASS = b"CoarseGrainedExecutorBackend"
DRIVER_URL = b"spark://CoarseGrainedScheduler@"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class SparkCluster:
    """A master and ``workers`` workers (``cores`` and ``memory`` each; two apps, the active
    one and its standby, need two 1-core executors on each), registered with ``procs`` so
    that they are stopped with everything else."""

    def __init__(self, procs: Processes, workdir: Path, env: dict[str, str], workers: int = 2,
                 memory: str = "1g", timeout: float = 90.0, cores: int = 1):
        port = free_port()
        self.master = f"spark://127.0.0.1:{port}"
        env = {**{k: v for k, v in env.items() if k != "PYTHONPATH"},
               "SPARK_HOME": str(SPARK_BIN.parent), "SPARK_LOCAL_IP": "127.0.0.1",
               "SPARK_WORKER_DIR": str(workdir / "spark-work")}
        self.master_proc = procs.start(
            "spark-master", [str(SPARK_BIN / "spark-class"),
                             "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                             "--port", str(port), "--webui-port", str(free_port())],
            env, workdir / "spark-master.log")
        self.workers: list[Proc] = [procs.start(
            f"spark-worker-{i}", [str(SPARK_BIN / "spark-class"),
                                  "org.apache.spark.deploy.worker.Worker", self.master,
                                  "--cores", str(cores), "--memory", memory,
                                  "--webui-port", str(free_port()),
                                  "--work-dir", str(workdir / "spark-work")],
            env, workdir / f"spark-worker-{i}.log") for i in range(workers)]
        deadline = time.monotonic() + timeout
        while not all(b"Successfully registered with master" in w.log.read_bytes()
                      for w in self.workers):
            for p in (self.master_proc, *self.workers):
                if p.popen.poll() is not None:
                    raise BenchFailed(f"{p.name} exited while starting; see {p.log}")
            if time.monotonic() > deadline:
                raise BenchFailed(f"the Spark workers did not register within {timeout:.0f} s; "
                                  f"see {self.workers[0].log}")
            time.sleep(0.5)

    def executors(self, driver_port: int | None = None) -> list[int]:
        """The pids of the executors the workers run now (one per worker and app); with
        ``driver_port``, only those of the app whose driver listens there (an executor's
        command line names its driver's address)."""
        parents = process_parents()
        driver = f":{driver_port}".encode()
        out = []
        for w in self.workers:
            for pid in descendants(w.popen.pid, parents):
                with contextlib.suppress(OSError):
                    cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
                    urls = [a for a in cmd.split(b"\0") if a.startswith(DRIVER_URL)]
                    if EXECUTOR_CLASS in cmd and (driver_port is None
                                                  or any(u.endswith(driver) for u in urls)):
                        out.append(pid)
        return out

    def kill_executor(self, pid: int) -> None:
        """``kill -9`` one executor JVM; its worker launches a new one for the app."""
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
