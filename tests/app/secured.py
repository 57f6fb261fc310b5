"""The secured broker the secured tests share (one per test module): its principals' settings
files, and a geops command run as one of its parts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

import config
from kafkaio import broker as local
from tests.conftest import kafka_env

PREFIX = "sec-"


@dataclass(frozen=True)
class Secured:
    """The secured broker of this module and where each part's settings file is."""

    info: local.BrokerInfo
    state: Path
    topics: dict[str, str]

    def settings_file(self, part: str) -> Path:
        return Path(self.info.secure_dir) / f"{part}.toml"

    def env(self, part: str, **extra: str) -> dict[str, str]:
        """A process environment that makes geops connect as ``part``."""
        env = {**os.environ, **kafka_env(self.info.address, str(self.state), PREFIX),
               "GEOPS_CONFIG": str(self.settings_file(part)), **extra}
        env.pop("GEOPS_BOOTSTRAP_SERVERS")  # the part's settings file names the broker
        return env

    def cfg(self, part: str) -> config.Config:
        return config.load(environ=self.env(part))

    def passwords(self) -> list[str]:
        saved = json.loads((Path(self.info.secure_dir) / "credentials.json").read_text())
        return list(saved.values())


@pytest.fixture(scope="module")
def secured(tmp_path_factory) -> Secured:
    state = tmp_path_factory.mktemp("secured") / "state"
    topics = {t: f"{PREFIX}{t.replace('_', '-')}" for t in config.TOPICS}
    info, _ = local.start(state, port=0, secure=True, topic_names=topics)
    s = Secured(info, state, topics)
    try:
        done = geops(s, "admin", "topics", "create")
        assert done.returncode == 0, done.stderr
        yield s
    finally:
        local.stop(state)


def geops(s: Secured, part: str, *args: str, timeout: float = 120,
          **env: str) -> subprocess.CompletedProcess:
    """A geops command as ``part`` (its settings file), with ``env`` on top."""
    return subprocess.run([sys.executable, "-m", "cli.main", *args], env=s.env(part, **env),
                          capture_output=True, text=True, timeout=timeout)
