"""meta.json keeps every invocation that built a results directory."""

import json
import sys
from pathlib import Path

import pytest

from bench.paper import evaluation, paper_report
from bench.paper.runner import DistributorSettings


@pytest.fixture
def fixed_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    dates = iter(["2026-11-22 01:00:00 UTC", "2026-11-22 02:00:00 UTC"])
    monkeypatch.setattr(evaluation, "machine", lambda: {"cpus": 2, "date": next(dates)})


def test_resumed_invocations_are_appended_and_reported(tmp_path: Path, fixed_machine: None,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "meta.json"
    # a directory written by the older format (one "command") is carried over
    path.write_text(json.dumps({"machine": {"date": "2026-11-21 09:00:00 UTC"},
                                "command": ["geops", "bench", "paper", "--skews", "0.5"]}))
    monkeypatch.setattr(sys, "argv", ["geops", "bench", "paper", "--skews", "0.9"])
    evaluation._record_invocation(path, DistributorSettings(), resume=True)
    monkeypatch.setattr(sys, "argv", ["geops", "bench", "paper", "--skews", "0.7"])
    evaluation._record_invocation(path, DistributorSettings(), resume=True)
    meta = json.loads(path.read_text())
    assert [c["command"][-1] for c in meta["commands"]] == ["0.5", "0.9", "0.7"]
    assert meta["machine"]["date"] == "2026-11-22 02:00:00 UTC"
    text = "\n".join(paper_report._machine(tmp_path))
    assert text.index("--skews 0.5") < text.index("--skews 0.9") < text.index("--skews 0.7")


def test_a_fresh_start_forgets_earlier_invocations(tmp_path: Path, fixed_machine: None) -> None:
    path = tmp_path / "meta.json"
    path.write_text(json.dumps({"commands": [{"command": ["old"], "date": "x"}]}))
    evaluation._record_invocation(path, DistributorSettings(), resume=False)
    assert [c["command"] for c in json.loads(path.read_text())["commands"]] == [sys.argv]
