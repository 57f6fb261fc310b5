"""Other versions of geops, each a checkout (e.g. a git worktree at an older commit) run with
this interpreter and ``PYTHONPATH`` pointing at the tree, so that every version uses the same
installed packages: how the A/B studies run them side by side on one broker."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import config


def trees_of(specs: Sequence[str]) -> list[tuple[str, Path]]:
    """The versions named on a command line, ``NAME=DIR`` each, as (name, resolved directory)."""
    return [(name, Path(d).resolve()) for name, d in (s.split("=", 1) for s in specs)]


def generate(workload: Path, publications: int) -> None:
    """The workload the versions share, written by this tree's ``geops generate``: 10,000
    subscriptions and ``publications`` publications (seed 7, 64 partitions, 2 workers)."""
    subprocess.run([sys.executable, "-m", "cli.main", "generate", "--out", str(workload),
                    "--subscriptions", "10000", "--publications", str(publications),
                    "--partitions", "64", "--workers", "2", "--seed", "7"], check=True,
                   stdout=subprocess.DEVNULL)


def geops(tree: Path, env: dict[str, str], *args: str, log: Path | None = None,
          wait: bool = True) -> subprocess.Popen | None:
    """Run ``geops ARGS`` from ``tree``; wait for it unless ``wait`` is False."""
    out = open(log, "a") if log else subprocess.DEVNULL  # noqa: SIM115 - the child keeps it
    proc = subprocess.Popen([sys.executable, "-m", "cli.main", *args], cwd=tree, env=env,
                            stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    if not wait:
        return proc
    if proc.wait() != 0:
        raise RuntimeError(f"geops {' '.join(args)} failed in {tree} (log {log})")
    return None


def app_topics(tree: Path, address: str, work: Path, prefix: str, workload: Path, log: Path
               ) -> tuple[dict[str, str], config.Config]:
    """The environment that runs ``tree``'s geops on topics of their own (``prefix``), those
    topics created and the workload's subscriptions loaded; with its configuration."""
    env = {**os.environ, "PYTHONPATH": str(tree), "GEOPS_BOOTSTRAP_SERVERS": address,
           "GEOPS_STATE_DIR": str(work / prefix), "GEOPS_SPARK_UI": "off"}
    for logical in config.TOPICS:
        env[f"GEOPS_{logical.upper()}_TOPIC"] = f"{prefix}{logical.replace('_', '-')}"
    geops(tree, env, "topics", "create", "--publications-partitions", "4", log=log)
    geops(tree, env, "subscribe", "--file", str(workload / "subscriptions.avro"), log=log)
    return env, config.load(environ=env)
