"""Where the local broker of a state directory records itself, and reading that record.

`geops broker start` (``kafkaio.broker``) writes ``<state_dir>/broker/broker.json`` (pids, ports,
address, logs, ...) and removes it when the broker stops. A command with no bootstrap servers
configured uses the address in it (``Config.bootstrap_servers``). Reading the record is here, at
the bottom of the layers, so that the configuration does not depend on the broker module.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any


def record_file(state_dir: str | os.PathLike[str]) -> Path:
    """The file in which the local broker of ``state_dir`` records itself."""
    return Path(state_dir) / "broker" / "broker.json"


def read_record(state_dir: str | os.PathLike[str]) -> dict[str, Any] | None:
    """The broker's record as written, or None when there is none (or it is not a JSON object).

    Raises OSError when the state directory cannot be read (e.g. a path through a file).
    """
    try:
        record = json.loads(record_file(state_dir).read_text())
    except (FileNotFoundError, json.JSONDecodeError, UnicodeDecodeError):
        return None
    return record if isinstance(record, dict) else None


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie, exited but not yet reaped, does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    with contextlib.suppress(OSError):
        stat = Path(f"/proc/{pid}/stat").read_text()
        if stat.rsplit(")", 1)[1].split()[0] == "Z":
            return False
    return True


def running_address(state_dir: str | os.PathLike[str]) -> str | None:
    """The address of this state directory's broker while its process runs, else None (also
    when the state directory or the record cannot be read)."""
    try:
        record = read_record(state_dir)
    except OSError:
        return None
    if record is None:
        return None
    address = record.get("address")
    pids = [n.get("pid") for n in record.get("nodes", []) if isinstance(n, dict)]
    pids = pids or [record.get("pid")]
    if not isinstance(address, str) or not any(isinstance(p, int) and pid_alive(p)
                                                for p in pids):
        return None
    return address
