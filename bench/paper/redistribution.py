"""Fig. 8: how long moving static partitions takes, for growing static data.

As in the paper, the rebalance is forced: once the app has run two batches, the harness
commands a new assignment that moves a quarter of the partitions to the other worker, and the
app's MoveReport says how many bytes moved and how long it took. No distributor runs.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import config
from bench.paper.collect import read_run, run_rows
from bench.paper.evaluation import Tables, Workloads
from bench.paper.plan import DYNAMIC_LB_STAL, RunSpec, Sizes
from bench.paper.runner import run
from kafkaio.clients import consumer
from kafkaio.dump import decoded_records
from kafkaio.sender import Sender
from schemas import codec
from schemas.assignment import initial_assignment, moves_between

SIZES = (1_000, 10_000, 100_000)


def forced_assignment(partitions: int, workers: int) -> list[int]:
    """The initial assignment with every fourth partition moved to the next worker."""
    return [(w + 1) % workers if p % 4 == 0 else w
            for p, w in enumerate(initial_assignment(partitions, workers))]


def force_rebalance(spec: RunSpec, after_batches: int = 2, timeout: float = 600.0
                    ) -> Callable[[config.Config], None]:
    """A ``during`` hook: wait for ``after_batches`` batches, then command the forced move."""
    def during(cfg: config.Config) -> None:
        from confluent_kafka import TopicPartition

        c = consumer(cfg.kafka_client())
        c.assign([TopicPartition(cfg.topic("metrics"), 0, 0)])
        seen = 0
        deadline = time.monotonic() + timeout
        try:
            while seen < after_batches and time.monotonic() < deadline:
                seen += sum(name == "BatchSummary"
                            for name, _ in decoded_records(c.consume(100, timeout=0.5)))
        finally:
            c.close()
        old = initial_assignment(spec.partitions, spec.workers)
        new = forced_assignment(spec.partitions, spec.workers)
        sender = Sender(cfg.kafka_client())
        sender.send(cfg.topic("control"), codec().encode("RebalanceCommand", {
            "epoch": 1, "assignment": new,
            "moves": [{"partition": p, "from_worker": a, "to_worker": b}
                      for p, a, b in moves_between(old, new)],
            "mldc_before": 0.0, "mldc_predicted": 0.0, "metric": "LB",
            "reason": "forced by the Fig. 8 benchmark", "time": int(time.time() * 1000),
            "app_id": ""}), key=b"geops")
        sender.flush()
    return during


def plan(repeats: int, sizes: tuple[int, ...] = SIZES) -> list[RunSpec]:
    return [RunSpec("sPS", DYNAMIC_LB_STAL, 0.7, r, Sizes(n, 12_000, 2_000), label=f"n{n}")
            for r in range(repeats) for n in sizes]


def run_redistribution(specs: list[RunSpec], out: Path, workdir: Path, resume: bool = True,
                       log: Callable[[str], None] = print) -> None:
    """Run the forced-move runs; their rows go to the same CSVs (moves.csv holds Fig. 8)."""
    tables = Tables(out)
    done = tables.done() if resume else {}
    workloads = Workloads()
    todo = [s for s in specs if s.run_id not in done]
    for n, spec in enumerate(todo, 1):
        t0 = time.monotonic()
        data = run(spec, workloads.get(spec), workdir, None, read_run,
                   during=force_rebalance(spec))
        rows = run_rows(spec, data, time.monotonic() - t0)
        for name, table in rows.items():
            tables.append(name, table)
        moves = rows["moves"]
        summary = ", ".join(f"{m['bytes'] / 1e6:.1f} MB in {m['duration_ms']:.0f} ms"
                            for m in moves) or "no move reported"
        log(f"[{n}/{len(todo)}] redistribution with {spec.sizes.subscriptions:,} "
            f"subscriptions r{spec.repeat}: {summary} ({time.monotonic() - t0:.0f} s)")
