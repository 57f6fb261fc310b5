"""Every geops reader reads committed records only: the app's output is transactional, and a
reader that saw an aborted or open transaction would see matches never delivered, or twice."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import kafkaio.clients as clients
from config import ConfigError

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("app", "bench", "cli", "config", "distributor", "geops", "kafkaio", "schemas",
            "tests")


@pytest.fixture
def built(monkeypatch: pytest.MonkeyPatch) -> list[dict]:
    """The settings of every consumer ``kafkaio.clients.consumer`` builds (none is started)."""
    confs: list[dict] = []
    monkeypatch.setattr(clients, "Consumer", lambda conf: confs.append(conf) or object())
    return confs


def test_every_consumer_reads_committed(built):
    clients.consumer({"bootstrap.servers": "127.0.0.1:1"})
    clients.consumer({"bootstrap.servers": "127.0.0.1:1"}, group_id="g",
                     **{"enable.partition.eof": True})
    assert [c["isolation.level"] for c in built] == ["read_committed", "read_committed"]


@pytest.mark.parametrize("where", ["shared", "extra"])
def test_read_uncommitted_is_refused_with_its_name(built, where):
    base = {"bootstrap.servers": "127.0.0.1:1"}
    level = {"isolation.level": "read_uncommitted"}
    with pytest.raises(ConfigError, match=r"isolation\.level=read_uncommitted"):
        if where == "shared":
            clients.consumer({**base, **level})
        else:
            clients.consumer(base, **level)
    assert not built


def test_no_consumer_is_built_elsewhere():
    """Every consumer of the code base comes from ``kafkaio.clients.consumer``, and nothing asks
    for uncommitted records."""
    direct = re.compile(r"\bConsumer\(")
    found = []
    for pkg in PACKAGES:
        for path in (ROOT / pkg).rglob("*.py"):
            text = path.read_text()
            rel = path.relative_to(ROOT).as_posix()
            if path.name == Path(__file__).name:
                continue
            if "read_uncommitted" in text:
                found.append(f"{rel}: read_uncommitted")
            if direct.search(text) and rel != "kafkaio/clients.py":
                found.append(f"{rel}: builds a Consumer itself")
    assert not found, found
