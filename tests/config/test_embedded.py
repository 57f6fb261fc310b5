"""The local broker's record, as the configuration reads it (no broker needed)."""

import json
import os

from config import load
from config.embedded import read_record, record_file, running_address


def _write(state, record) -> None:
    record_file(state).parent.mkdir(parents=True, exist_ok=True)
    record_file(state).write_text(json.dumps(record))


def test_the_address_of_a_running_broker_is_the_default_bootstrap(tmp_path) -> None:
    env = {"GEOPS_STATE_DIR": str(tmp_path)}
    assert running_address(tmp_path) is None
    assert load(environ=env).bootstrap_servers() == "127.0.0.1:9092"
    _write(tmp_path, {"pid": os.getpid(), "address": "127.0.0.1:4711"})  # a process that runs
    assert running_address(tmp_path) == "127.0.0.1:4711"
    assert load(environ=env).bootstrap_servers() == "127.0.0.1:4711"
    explicit = {**env, "GEOPS_BOOTSTRAP_SERVERS": "kafka:9092"}
    assert load(environ=explicit).bootstrap_servers() == "kafka:9092"


def test_stale_or_unreadable_records_give_no_address(tmp_path) -> None:
    _write(tmp_path, {"pid": 2**22 + 12345, "address": "127.0.0.1:1"})  # beyond pid_max
    assert running_address(tmp_path) is None
    record_file(tmp_path).write_text("not json")
    assert read_record(tmp_path) is None and running_address(tmp_path) is None
    blocker = tmp_path / "file"
    blocker.write_text("")
    assert running_address(blocker / "state") is None  # a path through a file
