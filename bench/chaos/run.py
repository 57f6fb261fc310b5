"""One chaos run: the stack started, the stream live, the faults injected on their schedule,
then the producer stopped, the app drained and stopped, and the checks: the publications topic
holds every id once, the matches (read committed) equal the oracle's exactly, the distributor's
last epoch is the app's, nothing is left running. Writes ``faults.csv``, ``lag.csv.gz``,
``summary.json`` and ``README.md`` to the results directory."""

from __future__ import annotations

import json
import os
import pickle
import statistics
import time
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

import config
from bench.chaos.cluster import SparkCluster
from bench.chaos.faults import KINDS, Fault, inject, schedule
from bench.chaos.stack import Stack
from bench.harness.csv_tables import read_rows, write_csv
from bench.harness.deployment import session_env
from bench.harness.errors import BenchFailed
from bench.harness.machine import machine
from bench.harness.monitor import Monitor
from bench.harness.processes import Processes
from bench.harness.publisher import Log
from bench.harness.reap import with_environ
from bench.harness.tables import cell, markdown
from geops.oracle import oracle_answers
from geops.workload import SkewSpec, generate_workload
from kafkaio import broker
from kafkaio.dump import by_schema
from kafkaio.offsets import read_to_end
from kafkaio.sender import produce_records
from kafkaio.topics import create_topics
from schemas.records import publication_records, subscription_records

NODES = 3
RECOVERED_INPUT_S = 2.0  # a fault is over once the lag is under this many seconds of input
DRAIN_TIMEOUT_S = 600.0
PROGRESS_S = 60.0


@dataclass
class ChaosOptions:
    duration_s: float = 1200.0
    every_s: float = 60.0
    seed: int = 0
    rate: float = 500.0
    max_faults: int = 0
    kinds: list[str] = field(default_factory=lambda: list(KINDS))
    subscriptions: int = 10_000
    base_publications: int = 20_000
    app_flags: list[str] = field(default_factory=list)


@dataclass
class Verdict:
    """What the end of the run found."""

    published: int = 0
    duplicate_publications: int = 0
    missing_publications: int = 0
    answered: int = 0
    missing_answers: int = 0
    extra_answers: int = 0
    wrong_answers: int = 0
    duplicate_answers: int = 0
    distributor_epoch: int = 0
    app_epoch: int = 0
    left_running: list[str] = field(default_factory=list)

    @property
    def exact(self) -> bool:
        return not (self.duplicate_publications or self.missing_publications
                    or self.missing_answers or self.extra_answers or self.wrong_answers
                    or self.duplicate_answers or self.left_running
                    or self.distributor_epoch != self.app_epoch)


def run_chaos(opts: ChaosOptions, out: Path, workdir: Path, log: Log,
              command: list[str]) -> Verdict:
    """The whole run; the verdict (``Verdict.exact`` says whether it passed)."""
    out.mkdir(parents=True, exist_ok=True)
    workdir.mkdir(parents=True, exist_ok=True)
    procs = Processes()
    stack = None
    monitor = None
    try:
        stack, oracle = _start(opts, procs, workdir, log)
        monitor = Monitor(stack.cfg, stack.env["GEOPS_APP_ID"], interval=0.5)
        monitor.start()
        stack.start_producer()
        log(f"stream live at {opts.rate:,.0f} publications/s; faults every {opts.every_s:.0f} s "
            f"± 50 % for {opts.duration_s:.0f} s (seed {opts.seed})")
        faults = _inject_all(stack, opts, log, monitor)
        verdict = _finish(stack, monitor, oracle, opts.base_publications, log)
    finally:
        if monitor is not None:
            monitor.close()
        procs.stop_all()
    verdict.left_running = _left_running(procs, stack)
    samples = [(s.time_ms, s.lag) for s in monitor.data.samples] if monitor else []
    recoveries(faults, samples, opts.rate)
    _write(out, opts, faults, samples, verdict, command)
    return verdict


def _start(opts: ChaosOptions, procs: Processes, workdir: Path, log: Log
           ) -> tuple[Stack, dict[int, tuple[int, ...]]]:
    state = workdir / "state"
    info, _ = broker.start(state, port=0, nodes=NODES)
    procs.broker_state, procs.broker_pid = state, info.pid
    log(f"Apache Kafka: {NODES} nodes at {info.address}")
    prefix = f"chaos-{time.strftime('%H%M%S')}"
    env = session_env(os.environ, info.address, workdir, prefix, {})
    cfg = config.load(environ=env)
    create_topics(cfg)
    # the stream's items 90 % on one worker's partitions: the distributor rebalances, and the
    # faults meet an assignment other than the first
    w = generate_workload(seed=opts.seed, subscriptions=opts.subscriptions,
                          publications=opts.base_publications,
                          skew=SkewSpec(workers=2, hot_workers=1,
                                        partitions=cfg.view.app.partitions,
                                        partitioner=cfg.view.app.partitioner, target=0.9))
    produce_records(cfg.kafka_client(), cfg.topic("subscriptions"), "Subscription",
                    subscription_records(w.subscriptions))
    oracle = oracle_answers(w.subscriptions, w.publications.ids, w.publications.geoms)
    base = workdir / "base-publications.pickle"
    base.write_bytes(pickle.dumps(list(publication_records(w.publications))))
    log(f"{opts.subscriptions:,} subscriptions loaded; {opts.base_publications:,} base "
        f"publications and their oracle ready")
    cluster = SparkCluster(procs, workdir, env)
    log(f"Spark: master {cluster.master}, 2 workers of 1 core")
    stack = Stack(procs, workdir, state, env, cfg, cluster, opts.rate, base,
                  app_flags=list(opts.app_flags))
    stack.start_distributor()
    stack.start_app()
    stack.wait_app_ready()
    log("the app (exactly-once) and the distributor run")
    return stack, oracle


def _inject_all(stack: Stack, opts: ChaosOptions, log: Log, monitor: Monitor) -> list[Fault]:
    """The faults at their times; a line per fault and, between them, the lag each minute."""
    plan = schedule(opts.seed, opts.duration_s, opts.every_s, opts.kinds, opts.max_faults)
    rng = np.random.default_rng([opts.seed, 1])
    t0 = time.monotonic()
    faults: list[Fault] = []
    next_note = PROGRESS_S

    def wait_until(at: float) -> None:
        nonlocal next_note
        while (el := time.monotonic() - t0) < at:
            stack.check_alive()
            if el >= next_note:
                next_note += PROGRESS_S
                lag = monitor.latest_lag()
                log(f"[{el:6.0f} s] lag {'?' if lag is None else f'{lag:,}'} records"
                    + ("" if lag is None else f" ({lag / opts.rate:.1f} s of input)"))
            time.sleep(0.5)

    for at, kind in plan:
        wait_until(at)
        fault = inject(kind, stack, rng)
        faults.append(fault)
        log(f"[{time.monotonic() - t0:6.0f} s] fault {len(faults)}/{len(plan)}: {kind}, "
            f"{fault.detail} ({(fault.end_ms - fault.start_ms) / 1000:.0f} s)")
    wait_until(opts.duration_s)
    return faults


def _finish(stack: Stack, monitor: Monitor, oracle: dict[int, tuple[int, ...]], base: int,
            log: Log) -> Verdict:
    """Stop the producer, let the app drain, stop it and the distributor, check the topics."""
    stack.procs.stop(stack.producer, grace=120)
    stack.producer = None
    v = Verdict()
    counts = Counter(int(m.key()) for m in read_to_end(stack.cfg.kafka_client(),
                                                       stack.cfg.topic("publications")))
    v.published = len(counts)
    v.duplicate_publications = sum(n - 1 for n in counts.values())
    top = max(counts, default=-1)
    v.missing_publications = top + 1 - len(counts)
    log(f"producer stopped: {v.published:,} publications, ids 0..{top:,}")
    deadline = time.monotonic() + DRAIN_TIMEOUT_S
    while True:
        stack.check_alive()
        done = sum(b["records"] for b in monitor.data.batches)
        lag = monitor.latest_lag()
        if lag == 0 and done:
            break
        if time.monotonic() > deadline:
            raise BenchFailed(f"the app did not drain within {DRAIN_TIMEOUT_S:.0f} s (lag {lag}, "
                              f"{sum(counts.values()):,} records published); see {stack.app.log}")
        time.sleep(1.0)
    for proc in (stack.app, stack.distributor):
        code = stack.procs.stop(proc, grace=120)
        if code != 0:
            raise BenchFailed(f"{proc.name} ended with {code} when stopped; see {proc.log}")
    log("the app drained and stopped; reading the matches (read committed)")
    got: dict[int, list[tuple[int, ...]]] = defaultdict(list)
    for rec in by_schema(stack.cfg.kafka_client(), stack.cfg.topic("matches")).get("Match", []):
        got[rec["publication_id"]].append(tuple(rec["subscription_ids"]))
    expected = {i: oracle[i % base] for i in counts if i % base in oracle}
    v.answered = len(got)
    v.missing_answers = len(expected.keys() - got.keys())
    v.extra_answers = len(got.keys() - expected.keys())
    v.wrong_answers = sum(1 for i, lists in got.items()
                          if i in expected and any(x != expected[i] for x in lists))
    v.duplicate_answers = sum(len(lists) - 1 for lists in got.values())
    commands = by_schema(stack.cfg.kafka_client(), stack.cfg.topic("control"))
    v.distributor_epoch = max((c["epoch"] for c in commands.get("RebalanceCommand", [])),
                              default=0)
    summaries = by_schema(stack.cfg.kafka_client(),
                          stack.cfg.topic("metrics")).get("BatchSummary", [])
    v.app_epoch = max(summaries, key=lambda s: s["batch_id"])["epoch"] if summaries else 0
    return v


def _left_running(procs: Processes, stack: Stack | None) -> list[str]:
    """What still runs of the processes the run started, and the broker."""
    left = [f"{p.name} (pid {pid})" for p in procs.started for pid in with_environ(p.marker)]
    if stack is not None and broker.status(stack.broker_state) is not None:
        left.append("the broker")
    return left


def recoveries(faults: list[Fault], samples: list[tuple[int, int | None]],
               rate: float) -> None:
    """Each fault's recovery (``recovered_ms``): the first sample with the lag under
    ``RECOVERED_INPUT_S`` seconds of input after the last sample at or over it between the
    fault's start and the next fault's; the fault's start when there was none (the app did not
    fall that far behind). A fault that comes before the one before it recovered shares that
    lag."""
    limit = RECOVERED_INPUT_S * rate
    for i, f in enumerate(faults):
        until = faults[i + 1].start_ms if i + 1 < len(faults) else float("inf")
        behind = [t for t, lag in samples
                  if f.start_ms <= t < until and lag is not None and lag >= limit]
        if not behind:
            f.recovered_ms = f.start_ms
            continue
        f.recovered_ms = next((t for t, lag in samples
                               if t > behind[-1] and lag is not None and lag < limit), None)


def per_kind(faults: list[Fault]) -> list[dict]:
    """Per fault kind: how many, the recovery (median, worst) in seconds from the fault's start,
    how many never recovered before the run ended, and the records re-read."""
    rows = []
    for kind in KINDS:
        fs = [f for f in faults if f.kind == kind]
        if not fs:
            continue
        rec = [(f.recovered_ms - f.start_ms) / 1000 for f in fs if f.recovered_ms is not None]
        rows.append({"kind": kind, "count": len(fs),
                     "recovery_median_s": round(statistics.median(rec), 1) if rec else None,
                     "recovery_worst_s": round(max(rec), 1) if rec else None,
                     "not_recovered": len(fs) - len(rec),
                     "reread_records": sum(f.reread for f in fs)})
    return rows


def rerender(out: Path) -> dict:
    """Recompute the recoveries and the table from a run's ``faults.csv``, ``lag.csv.gz`` and
    ``summary.json`` and write ``faults.csv``, ``summary.json`` and ``README.md`` again."""
    summary = json.loads((out / "summary.json").read_text())
    faults = [Fault(r["kind"], int(r["start_ms"]), int(r["end_ms"]), r["detail"],
                    int(r["reread"])) for r in read_rows(out / "faults.csv")]
    samples = [(int(r["time_ms"]), int(r["lag"]) if r["lag"] else None)
               for r in read_rows(out / "lag.csv.gz")]
    recoveries(faults, samples, summary["options"]["rate"])
    _write_faults(out, faults)
    summary["per_kind"] = per_kind(faults)
    (out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    (out / "README.md").write_text(report(summary))
    return summary


def _write_faults(out: Path, faults: list[Fault]) -> None:
    write_csv(out / "faults.csv", [asdict(f) for f in faults], list(asdict(Fault("", 0))))


def _write(out: Path, opts: ChaosOptions, faults: list[Fault],
           samples: list[tuple[int, int | None]], v: Verdict, command: list[str]) -> None:
    _write_faults(out, faults)
    write_csv(out / "lag.csv.gz", [{"time_ms": t, "lag": lag} for t, lag in samples],
              ["time_ms", "lag"])
    rows = per_kind(faults)
    summary = {"command": command, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
               "machine": machine(),
               "options": asdict(opts), "verdict": {**asdict(v), "exact": v.exact},
               "per_kind": rows}
    (out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    (out / "README.md").write_text(report(summary))


def report(summary: dict) -> str:
    """The results page of a run, from its summary."""
    o, v = summary["options"], summary["verdict"]
    lines = [
        "# Chaos: faults one after another, exactly-once to the end", "",
        f"`{' '.join(['geops', *summary['command']])}` ({summary['date']}, "
        f"{summary['machine']['cpus']} CPUs; seed {o['seed']}). Three Apache Kafka nodes "
        "(replication 3, `min.insync.replicas` 2), a Spark cluster of two 1-core workers, the "
        "app (`--delivery exactly-once`) and the distributor, a producer at "
        f"{o['rate']:,.0f} publications/s for {o['duration_s']:.0f} s; a fault every "
        f"{o['every_s']:.0f} s ± 50 %, drawn from {', '.join(o['kinds'])}.", "",
        "## The end", "",
        f"- **{'Exact' if v['exact'] else 'NOT exact'}**: {v['published']:,} publications "
        f"(ids without a gap: {v['missing_publications']:,} missing, "
        f"{v['duplicate_publications']:,} twice), {v['answered']:,} answered; answers "
        f"missing {v['missing_answers']:,}, extra {v['extra_answers']:,}, different from the "
        f"oracle's {v['wrong_answers']:,}, duplicate {v['duplicate_answers']:,} (the matches "
        "topic read with `read_committed`).",
        f"- Last epoch: distributor {v['distributor_epoch']}, app {v['app_epoch']}.",
        f"- Left running: {', '.join(v['left_running']) or 'nothing'}.", "",
        "## Per fault kind", "",
        "Recovery: from the fault's start until the app's lag (publications written and not "
        f"yet in a finished batch) was back under {RECOVERED_INPUT_S:.0f} s of input for good "
        "before the next fault (0: it never fell that far behind; a fault that came before the "
        "one before it had recovered shares its lag); re-read: the records of the batches a "
        "restarted driver ran again (Spark's offset log; tasks an executor's loss retried within a "
        "batch are not counted).", "",
        *markdown(["fault", "count", "recovery median s", "worst s", "not recovered",
                   "re-read records"],
                  ([r["kind"], r["count"], cell(r["recovery_median_s"], 1),
                    cell(r["recovery_worst_s"], 1), r["not_recovered"],
                    f"{r['reread_records']:,}"] for r in summary["per_kind"]), "lrrrrr")]
    lines += ["", "Every fault with its time and what it hit: [`faults.csv`](faults.csv); the "
              "lag every half second: `lag.csv.gz`; all of it: `summary.json`.", ""]
    return "\n".join(lines)
