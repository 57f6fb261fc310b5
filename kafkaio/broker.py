"""A local Apache Kafka (KRaft) of a state directory: one node, or a small cluster, run in the
background from the pinned Maven Central jars (``kafkaio.jvm``, bundle ``kafka``).

Each node is one ``kafka.Kafka`` process with the combined broker and controller roles, a
static controller quorum on loopback ports, and its data under
``<state_dir>/broker/node-<id>/data`` (formatted on first start). The layout (cluster id, node
ids, ports) is kept in ``<state_dir>/broker/cluster.json``, so a second start on the same state
directory comes back on the same ports with the same data: a broker restart loses nothing. The
running nodes record themselves in ``<state_dir>/broker/broker.json`` (``config.embedded``
reads it to find the address when no bootstrap servers are configured); each node writes its
own log, ``node-<id>/server.log``.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import time
import uuid
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

import config
from config.embedded import pid_alive, read_record, record_file
from kafkaio import jvm, security
from kafkaio.errors import BrokerError, JvmError, SecurityError

LISTEN_HOST = "127.0.0.1"
DEFAULT_HEAP = "512m"
MAX_NODES = 5
PORT_PATIENCE = 90.0


@dataclass
class Node:
    """One KRaft node (broker and controller) of the local cluster."""

    node_id: int
    port: int
    controller_port: int
    pid: int = 0
    log: str = ""


@dataclass
class BrokerInfo:
    """What the running local cluster recorded about itself; ``pid``, ``port`` and ``log`` are
    the first node's, ``address`` names every node (bootstrap servers)."""

    pid: int
    port: int
    address: str
    log: str
    kafka_version: str
    started_at: float
    nodes: list[Node] = field(default_factory=list)
    # Secured (``start(secure=True)``): the directory of its CA and of each part's settings
    # file (``kafkaio.security``); empty for a plaintext broker.
    secure_dir: str = ""

    @property
    def pids(self) -> list[int]:
        return [n.pid for n in self.nodes] or [self.pid]

    def node(self, node_id: int) -> Node:
        """The node with this id (KeyError if the cluster has none)."""
        for n in self.nodes:
            if n.node_id == node_id:
                return n
        raise KeyError(node_id)


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


def _home(state_dir: Path) -> Path:
    return record_file(state_dir).parent


def _layout_file(state_dir: Path) -> Path:
    return _home(state_dir) / "cluster.json"


def _node_dir(state_dir: Path, node_id: int) -> Path:
    return _home(state_dir) / f"node-{node_id}"


def log_file(state_dir: Path, node_id: int = 1) -> Path:
    """Where a node of this state directory's broker writes its log."""
    return _node_dir(state_dir, node_id) / "server.log"


def _info_from(record: dict) -> BrokerInfo | None:
    """The record's broker; keys this version does not know (a record written by an older
    one, e.g. ``sasl_address``) are left out rather than making a running broker unknown."""
    known = {f.name for f in fields(BrokerInfo)}
    try:
        nodes = [Node(**{k: v for k, v in n.items() if k in {f.name for f in fields(Node)}})
                 for n in record.get("nodes", [])]
        return BrokerInfo(**{**{k: v for k, v in record.items() if k in known}, "nodes": nodes})
    except (TypeError, AttributeError):  # not a record of ours
        return None


def status(state_dir: Path) -> BrokerInfo | None:
    """The broker of this state directory while any of its nodes runs; stale records go.

    Raises BrokerError when the state directory cannot be read (e.g. a path through a file).
    """
    try:
        record = read_record(state_dir)
    except OSError as exc:
        raise _unusable(state_dir, exc) from None
    if record is None:
        return None
    info = _info_from(record)
    if info is None:
        return None
    if any(pid_alive(pid) for pid in info.pids):  # a zombie child is not a running node
        return info
    record_file(state_dir).unlink(missing_ok=True)
    return None


def _ready(admin_conf: Mapping[str, str], nodes: int, timeout: float) -> bool:
    """True once the cluster answers a metadata request naming all its brokers."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({**admin_conf, "log_level": 0})
    try:
        return len(admin.list_topics(timeout=timeout).brokers) >= nodes
    except Exception:  # KafkaException while the broker is still starting
        return False


def cluster_id() -> str:
    """A new Kafka cluster id: a random UUID, URL-safe base64 without padding (what
    ``kafka-storage.sh random-uuid`` prints)."""
    while True:  # one that starts with '-' would read as an option (Kafka avoids them too)
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cid.startswith("-"):
            return cid


def server_properties(node: Node, voters: list[Node], data_dir: Path,
                      secure: Mapping[str, str] | None = None) -> str:
    """The ``server.properties`` of one node of a local KRaft cluster of ``len(voters)``;
    with ``secure`` (``kafkaio.security.server_settings``) its clients' listener is SASL_SSL and
    its controller listener TLS, else both are plaintext."""
    n = len(voters)
    replicas = min(n, 3)
    isr = 2 if replicas >= 3 else 1
    quorum = ",".join(f"{v.node_id}@{LISTEN_HOST}:{v.controller_port}" for v in voters)
    client, controller = ("SASL_SSL", "SSL") if secure else ("PLAINTEXT", "PLAINTEXT")
    props = {
        "process.roles": "broker,controller",
        "node.id": node.node_id,
        "controller.quorum.voters": quorum,
        "listeners": f"CLIENT://{LISTEN_HOST}:{node.port},"
                     f"CONTROLLER://{LISTEN_HOST}:{node.controller_port}",
        "advertised.listeners": f"CLIENT://{LISTEN_HOST}:{node.port}",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "CLIENT",
        "listener.security.protocol.map": f"CLIENT:{client},CONTROLLER:{controller}",
        "log.dirs": str(data_dir),
        # Internal topics sized for one machine: created on first use, 50 partitions each by
        # default, which costs seconds on the first consumer group or transaction.
        "offsets.topic.num.partitions": 8,
        "offsets.topic.replication.factor": replicas,
        "transaction.state.log.num.partitions": 8,
        "transaction.state.log.replication.factor": replicas,
        "transaction.state.log.min.isr": isr,
        "share.coordinator.state.topic.replication.factor": replicas,
        "share.coordinator.state.topic.min.isr": isr,
        "default.replication.factor": replicas,
        "min.insync.replicas": isr,
        "group.initial.rebalance.delay.ms": 0,
        # Time retention is checked each minute (5 by default), so disk follows retention.ms.
        "log.retention.check.interval.ms": 60_000,
        "num.network.threads": 2,
        "num.io.threads": 4,
        "log.cleaner.threads": 1,
        **(secure or {}),
    }
    return "".join(f"{k}={v}\n" for k, v in props.items())


LOG4J2 = """\
# Warnings and errors of the broker; the line that says it started.
rootLogger.level=WARN
rootLogger.appenderRef.file.ref=file
appender.file.type=RollingFile
appender.file.name=file
appender.file.fileName=${sys:geops.log.file}
appender.file.filePattern=${sys:geops.log.file}.%i
appender.file.layout.type=PatternLayout
appender.file.layout.pattern=[%d] %p %m (%c)%n
appender.file.policies.type=Policies
appender.file.policies.size.type=SizeBasedTriggeringPolicy
appender.file.policies.size.size=20MB
appender.file.strategy.type=DefaultRolloverStrategy
appender.file.strategy.max=2
logger.started.name=kafka.server.KafkaRaftServer
logger.started.level=INFO
"""


def _java() -> str:
    home = os.environ.get("JAVA_HOME")
    java = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    if not java or not Path(java).exists():
        raise BrokerError("java not found; Apache Kafka needs Java 17 or newer "
                          "(apt-get install openjdk-17-jre-headless, or set JAVA_HOME)")
    return java


def _plan(state_dir: Path, nodes: int, port: int, secure: bool
          ) -> tuple[str, list[Node], bool]:
    """The cluster id, nodes and security of this state directory: as recorded, or new. A
    secured broker stays secured; a plaintext one cannot become secured (its data was written
    without ACLs)."""
    layout = _layout_file(state_dir)
    if layout.exists():
        saved = json.loads(layout.read_text())
        plan = [Node(n["node_id"], n["port"], n["controller_port"]) for n in saved["nodes"]]
        was_secure = bool(saved.get("secure"))
        if secure and not was_secure:
            raise BrokerError(f"the broker of {state_dir} was made without --secure; delete "
                              f"{_home(state_dir)} (its topics go with it) to make a secured one")
        if len(plan) != nodes:
            raise BrokerError(
                f"the state directory {state_dir} holds a {len(plan)}-node broker, not "
                f"{nodes}; start it with --nodes {len(plan)}, or delete {_home(state_dir)} "
                f"(its topics go with it) to make a new one")
        if port and port != plan[0].port:
            plan[0].port = port
        return saved["cluster_id"], plan, was_secure
    first = port or free_port()
    plan = []
    taken = {first}
    for node_id in range(1, nodes + 1):
        client = first if node_id == 1 else _free_other(taken)
        taken.add(client)
        controller = _free_other(taken)
        taken.add(controller)
        plan.append(Node(node_id, client, controller))
    return cluster_id(), plan, secure


def _wait_port_free(port: int, patience: float) -> None:
    """Return once ``port`` can be bound. A node's own port stays held for a while after the
    node was killed (its closed connections linger), hence the patience for recorded ports."""
    deadline = time.monotonic() + patience
    while not _port_free(port):
        if time.monotonic() >= deadline:
            raise BrokerError(
                f"port {port} is already in use by another process; choose another port with "
                f"--port (e.g. --port 0 for any free port) or stop what listens there")
        time.sleep(0.2)


def _free_other(taken: set[int]) -> int:
    while True:
        port = free_port()
        if port not in taken:
            return port


def _format(java: str, cp: str, cid: str, props: Path, extra: list[str]) -> None:
    """Format a node's storage. The arguments go through a java argument file (``@file``,
    readable by the user only, deleted after), so the SCRAM passwords among ``extra`` never
    show on a command line."""
    args = props.parent / "format.args"
    lines = ["-cp", cp, "kafka.tools.StorageTool", "format", "-t", cid, "-c", str(props),
             "--ignore-formatted", *extra]
    security.write_private(args, "\n".join(_java_arg(a) for a in lines) + "\n")
    try:
        done = subprocess.run([java, "-Xmx256m", f"@{args}"], capture_output=True, text=True)
    finally:
        args.unlink(missing_ok=True)
    if done.returncode != 0:
        raise BrokerError(f"formatting the broker's storage failed ({props.parent}):\n"
                          f"{(done.stdout + done.stderr).strip()[-2000:]}")


def _java_arg(arg: str) -> str:
    """One argument of a java argument file, quoted (its syntax: double quotes, backslash
    escapes)."""
    return '"' + arg.replace("\\", "\\\\").replace('"', '\\"') + '"'


@dataclass
class _Security:
    """What a secured start needs: the node settings, the SCRAM bootstrap, the admin's."""

    directory: Path
    node_settings: dict[str, str]
    format_args: list[str]
    creds: dict[str, str]
    ca: Path

    @classmethod
    def make(cls, home: Path) -> _Security:
        directory = security.secure_dir(home)
        try:
            tls = security.tls_files(directory)
            creds = security.passwords(directory)
        except (OSError, SecurityError) as exc:
            raise BrokerError(f"cannot make the secured broker's TLS files or credentials in "
                              f"{directory}: {exc}") from None
        return cls(directory, security.server_settings(tls.node, tls.ca, creds[security.BROKER]),
                   security.scram_arguments(creds), creds, tls.ca)

    def admin_conf(self, address: str) -> dict[str, str]:
        return {"bootstrap.servers": address,
                **security.client_settings("admin", self.creds["admin"], self.ca)}


def start(state_dir: Path, port: int = 9092, timeout: float = 90.0, nodes: int = 1,
          heap: str = DEFAULT_HEAP, secure: bool = False,
          topic_names: Mapping[str, str] | None = None) -> tuple[BrokerInfo, bool]:
    """Start this state directory's broker (``nodes`` KRaft nodes) unless it runs already.

    ``secure`` makes a new broker secured (``kafkaio.security``): SASL_SSL with SCRAM-SHA-512
    only, ACLs for each part of geops on the topics named in ``topic_names`` (logical ->
    name; the configured defaults when None), and a settings file per part; a broker made
    secured stays so on every later start.

    Returns (info, started): ``started`` is False when every node was already running. Nodes of
    a cluster that stopped are started again on their data. ``port=0`` picks a free port for
    a new broker and reuses the recorded one for an existing one.
    """
    if not 0 <= port <= 65535:
        raise BrokerError(f"port {port} is outside 0..65535; choose another with --port "
                          f"(0 = any free port)")
    if not 1 <= nodes <= MAX_NODES:
        raise BrokerError(f"--nodes {nodes} is outside 1..{MAX_NODES}")
    state_dir = Path(state_dir)
    running = status(state_dir)
    if running is not None and all(pid_alive(p) for p in running.pids):
        return running, False
    try:
        _home(state_dir).mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise _unusable(state_dir, exc) from None
    alive = {n.node_id: n for n in (running.nodes if running else []) if pid_alive(n.pid)}
    cid, plan, secure = _plan(state_dir, nodes, 0 if alive else port, secure)
    sec = _Security.make(_home(state_dir)) if secure else None
    to_start = [n for n in plan if n.node_id not in alive]
    recorded = _layout_file(state_dir).exists()
    for n in to_start:
        for p in (n.port, n.controller_port):
            _wait_port_free(p, patience=PORT_PATIENCE if recorded else 0.0)
    java = _java()
    try:
        cp = jvm.classpath("kafka")
    except JvmError as exc:
        raise BrokerError(str(exc)) from None
    _prepare_nodes(state_dir, cid, plan, to_start, java, cp, sec)
    procs = _launch(state_dir, to_start, java, cp, heap)
    for n in plan:
        n.log = str(log_file(state_dir, n.node_id))
        if n.node_id in alive:
            n.pid = alive[n.node_id].pid
    address = ",".join(f"{LISTEN_HOST}:{n.port}" for n in plan)
    admin = sec.admin_conf(address) if sec else {"bootstrap.servers": address}
    _wait_ready(state_dir, procs, plan, admin, timeout)
    info = BrokerInfo(plan[0].pid, plan[0].port, address, plan[0].log,
                      jvm.pinned_version("kafka", "kafka.version"), time.time(), plan,
                      str(sec.directory) if sec else "")
    if sec is not None:
        _secure_parts(sec, address, admin, topic_names)
    record_file(state_dir).write_text(json.dumps(asdict(info)))
    return info, True


def _prepare_nodes(state_dir: Path, cid: str, plan: list[Node], to_start: list[Node],
                   java: str, cp: str, sec: _Security | None) -> None:
    """Write the nodes' settings, format their storage (first start) and record the layout."""
    (_home(state_dir) / "log4j2.properties").write_text(LOG4J2)
    for n in to_start:
        home = _node_dir(state_dir, n.node_id)
        home.mkdir(parents=True, exist_ok=True)
        props = server_properties(n, plan, home / "data", sec.node_settings if sec else None)
        # the secured node's settings hold the broker principal's password
        security.write_private(home / "server.properties", props)
    extra = sec.format_args if sec else []
    with ThreadPoolExecutor(len(to_start)) as pool:
        list(pool.map(lambda n: _format(java, cp, cid, _node_dir(state_dir, n.node_id)
                                        / "server.properties", extra), to_start))
    _layout_file(state_dir).write_text(json.dumps(
        {"cluster_id": cid, "secure": sec is not None,
         "nodes": [{"node_id": n.node_id, "port": n.port,
                    "controller_port": n.controller_port} for n in plan]}))


def _launch(state_dir: Path, to_start: list[Node], java: str, cp: str,
            heap: str) -> dict[int, subprocess.Popen]:
    """One ``kafka.Kafka`` process per node to start, in its own session; node id -> process."""
    log4j = _home(state_dir) / "log4j2.properties"
    procs = {}
    for n in to_start:
        home = _node_dir(state_dir, n.node_id)
        out = open(home / "console.log", "ab")  # noqa: SIM115 - closed below, the child has it
        with out:
            procs[n.node_id] = subprocess.Popen(
                # the heap is fixed and touched at start, so the broker's memory is flat from
                # its first minute rather than growing as G1 first uses each region
                [java, f"-Xms{heap}", f"-Xmx{heap}", "-XX:+AlwaysPreTouch", "-XX:+UseG1GC",
                 "-XX:MaxGCPauseMillis=20", "-XX:+ExitOnOutOfMemoryError",
                 "-Djava.awt.headless=true",
                 f"-Dlog4j2.configurationFile={log4j}",
                 f"-Dgeops.log.file={log_file(state_dir, n.node_id)}",
                 "-cp", cp, "kafka.Kafka", str(home / "server.properties")],
                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True, cwd=home)
        n.pid = procs[n.node_id].pid
    return procs


def _wait_ready(state_dir: Path, procs: dict[int, subprocess.Popen], plan: list[Node],
                admin: dict[str, str], timeout: float) -> None:
    """Return once every node answers; a node that exits or a timeout stops the started
    nodes and raises BrokerError with the log's last lines."""
    deadline = time.monotonic() + timeout
    while True:
        for node_id, proc in procs.items():
            if proc.poll() is not None:
                _stop_pids([p.pid for p in procs.values()])
                raise BrokerError(
                    f"broker node {node_id} exited with code {proc.returncode} while "
                    f"starting; last log lines:\n"
                    f"{_tail(_node_dir(state_dir, node_id) / 'console.log')}\n"
                    f"{_tail(log_file(state_dir, node_id))}")
        if all(_accepts(n.port) for n in plan) and _ready(admin, len(plan), timeout=2.0):
            return
        if time.monotonic() > deadline:
            _stop_pids([p.pid for p in procs.values()])
            raise BrokerError(f"the broker did not answer on {admin['bootstrap.servers']} "
                              f"within {timeout:.0f} s; "
                              f"log: {log_file(state_dir, plan[0].node_id)}")
        time.sleep(0.1)


def _secure_parts(sec: _Security, address: str, admin: dict[str, str],
                  topic_names: Mapping[str, str] | None) -> None:
    """Grant each part its ACLs and write its settings file."""
    if topic_names is None:
        cfg = config.load(environ={})
        topic_names = {t: cfg.topic(t) for t in config.TOPICS}
    try:
        security.apply_acls(admin, security.acl_bindings(topic_names))
    except SecurityError as exc:
        raise BrokerError(str(exc)) from None
    security.write_client_configs(sec.directory, address, sec.creds, sec.ca)


def stop(state_dir: Path, timeout: float = 30.0) -> BrokerInfo | None:
    """Stop every node of this state directory's broker (their data stays); returns what was
    stopped, or None if none ran."""
    info = status(state_dir)
    if info is None:
        return None
    _stop_pids(info.pids, timeout)
    record_file(state_dir).unlink(missing_ok=True)
    return info


def _stop_pids(pids: list[int], timeout: float = 30.0) -> None:
    """SIGTERM (a controlled shutdown), then SIGKILL what is left after ``timeout``."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while any(pid_alive(p) for p in pids) and time.monotonic() < deadline:
        for pid in pids:
            _reap(pid)
        time.sleep(0.05)
    for pid in pids:
        if pid_alive(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        _reap(pid)


def kill_node(state_dir: Path, node_id: int) -> Node:
    """``kill -9`` one node of the running broker (a crash, for fault tests); ``start`` brings
    it back on its data."""
    info = status(state_dir)
    if info is None:
        raise BrokerError(f"no broker runs in {state_dir}")
    node = info.node(node_id)
    with contextlib.suppress(ProcessLookupError):
        os.kill(node.pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while pid_alive(node.pid) and time.monotonic() < deadline:
        _reap(node.pid)
        time.sleep(0.02)
    _reap(node.pid)
    return node


def _reap(pid: int) -> None:
    """Collect the exit status if the node is our child (started in this process)."""
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


def _tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"
