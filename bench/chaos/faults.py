"""The faults of the chaos run and their schedule: one at a time, drawn at random from
``KINDS`` by a seeded generator, every ``every`` seconds jittered by ±50 %."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import shapely

from app.errors import OffsetLogError
from app.read.offsetlog import batch_end_offsets, batch_start_offsets
from bench.chaos.stack import Stack
from bench.harness.publisher import now_ms
from geops.model import Relation
from kafkaio import broker
from kafkaio.sender import Sender
from schemas import codec
from schemas.records import relation_symbols

BROKER_DOWN_S = (10.0, 30.0)
BROKER_FROZEN_S = (10.0, 40.0)
BURST_CHANGES = 1000
BURST_FIRST_ID = 1_000_000_000  # ids no workload uses


@dataclass
class Fault:
    """One fault: its kind, when it began and when its action ended (the process or node back,
    the burst written), what it hit, and the records of batches the app runs again."""

    kind: str
    start_ms: int
    end_ms: int = 0
    detail: str = ""
    reread: int = 0
    recovered_ms: int | None = None  # when the lag was back under 2 s of input (run.py)
    answer_gap_ms: int | None = None  # the longest stretch without an answer (answers.py)
    handovers: int = 0  # the app handed over to its standby after the fault (its lease lapsed)


def schedule(seed: int, duration_s: float, every_s: float, kinds: list[str],
             max_faults: int = 0) -> list[tuple[float, str]]:
    """(offset in seconds from the stream's start, kind) of every fault: the first after
    ``every_s`` × U(0.5, 1.5), each next as far after the one before, up to ``duration_s``
    (and at most ``max_faults``, when positive)."""
    rng = np.random.default_rng(seed)
    out: list[tuple[float, str]] = []
    t = 0.0
    while True:
        t += every_s * rng.uniform(0.5, 1.5)
        if t >= duration_s or (max_faults and len(out) >= max_faults):
            return out
        out.append((t, str(rng.choice(kinds))))


def _reread(stack: Stack) -> tuple[int, str]:
    """Records of the batch the restarted app will run again: the last one Spark planned
    (offsets/N) and did not commit (no commits/N); (0, '') when it committed all."""
    offsets = stack.checkpoint / "offsets"
    planned = [int(p.name) for p in offsets.glob("[0-9]*")] if offsets.exists() else []
    if not planned:
        return 0, ""
    last = max(planned)
    if (stack.checkpoint / "commits" / str(last)).exists():
        return 0, ""
    try:
        start = batch_start_offsets(str(stack.checkpoint), last)
        end = batch_end_offsets(str(stack.checkpoint), last)
    except OffsetLogError:
        return 0, ""
    return sum(end[p] - start.get(p, 0) for p in end), f", batch {last} runs again"


def broker_kill(stack: Stack, rng: np.random.Generator) -> str:
    node = int(rng.integers(1, len(stack.broker_info().nodes) + 1))
    broker.kill_node(stack.broker_state, node)
    down = rng.uniform(*BROKER_DOWN_S)
    time.sleep(down)
    broker.start(stack.broker_state, port=0, nodes=len(stack.broker_info().nodes))
    return f"node {node} down {down:.0f} s"


def broker_freeze(stack: Stack, rng: np.random.Generator) -> str:
    info = stack.broker_info()
    node = info.node(int(rng.integers(1, len(info.nodes) + 1)))
    frozen = rng.uniform(*BROKER_FROZEN_S)
    os.kill(node.pid, signal.SIGSTOP)
    try:
        time.sleep(frozen)
    finally:
        os.kill(node.pid, signal.SIGCONT)
    return f"node {node.node_id} frozen {frozen:.0f} s"


def driver_kill(stack: Stack, rng: np.random.Generator) -> tuple[str, int]:
    """Without a standby the app is started again on its checkpoint; with one, the standby
    takes over (the fault ends when its log says it took the lease) and the killed app is
    started again as the next standby."""
    killed = stack.app
    stack.procs.kill9(killed)
    reread, which = _reread(stack)
    if stack.standby is None:
        stack.start_app()
        return f"restarted on its checkpoint{which}", reread
    taker, waited = stack.take_over()
    stack.start_app(standby=True)
    return (f"{taker.log.stem} (standby) took the lease {waited:.1f} s after the kill and "
            f"answers{which}; {killed.log.stem} killed, "
            f"{stack.standby.log.stem} started as the next standby"), reread


def executor_kill(stack: Stack, rng: np.random.Generator) -> str:
    pids = stack.cluster.executors(stack.driver_port(stack.app))
    if not pids:
        return "no executor was running"
    pid = int(rng.choice(pids))
    stack.cluster.kill_executor(pid)
    return f"executor pid {pid}"


def distributor_kill(stack: Stack, rng: np.random.Generator) -> str:
    stack.procs.kill9(stack.distributor)
    stack.start_distributor()
    return "restarted"


def producer_kill(stack: Stack, rng: np.random.Generator) -> str:
    stack.procs.kill9(stack.producer)
    stack.start_producer()
    return "restarted, resuming where it left off"


def subscription_burst(stack: Stack, rng: np.random.Generator) -> str:
    """BURST_CHANGES subscription changes in a second: half as many new subscriptions, then
    their removal. Their squares lie outside every publication of the stream (far south of the
    world), so the answers the oracle gives stay right whatever batch sees them."""
    half = BURST_CHANGES // 2
    first = BURST_FIRST_ID + int(rng.integers(0, 10**6)) * BURST_CHANGES
    c = codec()
    sender = Sender(stack.cfg.kafka_client(), rate=float(BURST_CHANGES))
    topic = stack.cfg.topic("subscriptions")
    for i in range(half):
        square = shapely.box(-170.0 + i * 0.01, -89.0, -170.0 + i * 0.01 + 0.005, -88.995)
        sender.send(topic, c.encode("Subscription", {
            "id": first + i, "geometry": shapely.to_wkb(square),
            "relation": relation_symbols()[int(Relation.INTERSECTS)]}), key=str(first + i).encode())
    for i in range(half):
        sender.send(topic, None, key=str(first + i).encode())
    sender.close()
    return f"{half} subscribed and removed (ids from {first})"


KINDS: dict[str, Callable[[Stack, np.random.Generator], str | tuple[str, int]]] = {
    "broker-kill": broker_kill,
    "broker-freeze": broker_freeze,
    "driver-kill": driver_kill,
    "executor-kill": executor_kill,
    "distributor-kill": distributor_kill,
    "producer-kill": producer_kill,
    "subscription-burst": subscription_burst,
}


def inject(kind: str, stack: Stack, rng: np.random.Generator) -> Fault:
    """Run one fault of ``kind`` to its end (the process or node back)."""
    fault = Fault(kind, now_ms())
    done = KINDS[kind](stack, rng)
    fault.detail, fault.reread = done if isinstance(done, tuple) else (done, 0)
    fault.end_ms = now_ms()
    return fault
