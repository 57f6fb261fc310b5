"""One chaos run: the stack started, the stream live, the faults injected on their schedule,
then the producer stopped, the app drained and stopped, and the checks: the publications topic
holds every id once, the matches (read committed) equal the oracle's exactly, the distributor's
last epoch is the app's, nothing is left running. Per fault kind the time to recovery and the
answer gap, each beside its goal. Writes ``faults.csv``, ``lag.csv.gz``, ``answers.csv.gz``,
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
from bench.chaos.answers import AnswerWatcher, Arrival, answer_gap_ms, waiting_gaps
from bench.chaos.cluster import SparkCluster
from bench.chaos.faults import KINDS, Fault, inject, schedule
from bench.chaos.stack import HOLDS_LEASE, Stack, wait_for_line
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
# the recovery each fault kind should stay within with a standby running (seconds), and from
# when: the fault's start, or the fault's end (a frozen broker node that answers again)
GOALS: dict[str, tuple[float, str]] = {"driver-kill": (10.0, "start"),
                                       "executor-kill": (15.0, "start"),
                                       "broker-kill": (15.0, "start"),
                                       "broker-freeze": (15.0, "end")}


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
    standby: bool = True


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
    watcher = None
    try:
        stack, oracle = _start(opts, procs, workdir, log)
        monitor = Monitor(stack.cfg, stack.env["GEOPS_APP_ID"], interval=0.5)
        monitor.start()
        watcher = AnswerWatcher(stack.cfg)
        watcher.start()
        stack.start_producer()
        log(f"stream live at {opts.rate:,.0f} publications/s; faults every {opts.every_s:.0f} s "
            f"± 50 % for {opts.duration_s:.0f} s (seed {opts.seed})")
        faults = _inject_all(stack, opts, log, monitor)
        verdict = _finish(stack, monitor, oracle, opts.base_publications, log)
    finally:
        for thread in (monitor, watcher):
            if thread is not None:
                thread.close()
        procs.stop_all()
    if watcher.error is not None:
        raise BenchFailed(f"the reader of the matches topic failed: {watcher.error}")
    verdict.left_running = _left_running(procs, stack)
    samples = [(s.time_ms, s.lag) for s in monitor.data.samples] if monitor else []
    recoveries(faults, samples, opts.rate)
    answer_gaps(faults, watcher.arrivals)
    _write(out, opts, faults, samples, watcher.arrivals, verdict, command)
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
    # with a standby each worker carries an executor of the app and one of its standby
    cores = 2 if opts.standby else 1
    cluster = SparkCluster(procs, workdir, env, cores=cores, memory=f"{cores}g")
    log(f"Spark: master {cluster.master}, 2 workers of {cores} core(s)")
    stack = Stack(procs, workdir, state, env, cfg, cluster, opts.rate, base,
                  app_flags=list(opts.app_flags), with_standby=opts.standby)
    stack.start_distributor()
    stack.start_app()
    if opts.standby:  # once the app holds the lease, its standby gets ready beside it
        wait_for_line(stack.app, HOLDS_LEASE, "holding the lease", 300.0)
        stack.start_app(standby=True)
    stack.wait_app_ready()
    log("the app (exactly-once) and the distributor run")
    if opts.standby:
        stack.wait_standby_ready()
        log("its standby is ready to take over")
    return stack, oracle


def _inject_all(stack: Stack, opts: ChaosOptions, log: Log, monitor: Monitor) -> list[Fault]:
    """The faults at their times; a line per fault and, between them, the lag each minute."""
    plan = schedule(opts.seed, opts.duration_s, opts.every_s, opts.kinds, opts.max_faults)
    rng = np.random.default_rng([opts.seed, 1])
    t0 = time.monotonic()
    faults: list[Fault] = []
    next_note = PROGRESS_S
    shift = 0.0  # the time the faults waited for a standby to get ready: the plan moves on

    def handovers() -> None:
        note = stack.handed_over()
        if note:
            log(f"[{time.monotonic() - t0:6.0f} s] {note}")
            if faults:
                faults[-1].detail += f"; then {note}"
                faults[-1].handovers += 1

    def wait_until(at: float) -> None:
        nonlocal next_note
        while (el := time.monotonic() - t0) < at + shift:
            handovers()
            stack.check_alive()
            if el >= next_note:
                next_note += PROGRESS_S
                lag = monitor.latest_lag()
                log(f"[{el:6.0f} s] lag {'?' if lag is None else f'{lag:,}'} records"
                    + ("" if lag is None else f" ({lag / opts.rate:.1f} s of input)"))
            time.sleep(0.5)

    for at, kind in plan:
        wait_until(at)
        handovers()  # a fault that is due at once still hits the app that answers now
        if stack.standby is not None:
            late = stack.wait_standby_ready()
            shift += late
            if late > 1.0:
                log(f"[{time.monotonic() - t0:6.0f} s] the next fault waited {late:.0f} s for "
                    "the standby to get ready")
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
        note = stack.handed_over(next_standby=False)
        if note:
            log(f"while draining: {note}")
        stack.check_alive()
        done = sum(b["records"] for b in monitor.data.batches)
        lag = monitor.latest_lag()
        if lag == 0 and done:
            break
        if time.monotonic() > deadline:
            raise BenchFailed(f"the app did not drain within {DRAIN_TIMEOUT_S:.0f} s (lag {lag}, "
                              f"{sum(counts.values()):,} records published); see {stack.app.log}")
        time.sleep(1.0)
    if stack.standby is not None:  # it wrote nothing; one still starting may end otherwise
        stack.procs.stop(stack.standby, grace=120)
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


def answer_gaps(faults: list[Fault], arrivals: list[Arrival]) -> None:
    """Each fault's answer gap (``answer_gap_ms``): the longest stretch without an answer while
    publications were waiting that ended between its start and the next fault's."""
    gaps = waiting_gaps(arrivals)
    for i, f in enumerate(faults):
        until = faults[i + 1].start_ms if i + 1 < len(faults) else float("inf")
        f.answer_gap_ms = answer_gap_ms(gaps, f.start_ms, until) if arrivals else None


def _seconds(values: list[float]) -> tuple[float | None, float | None]:
    """(median, worst) rounded to 0.1 s; (None, None) without values."""
    if not values:
        return None, None
    return round(statistics.median(values), 1), round(max(values), 1)


def _goal(kind: str, fs: list[Fault]) -> dict:
    """The kind's goal, the worst recovery measured from the goal's origin, and whether every
    fault of the kind recovered within it (None: the kind has no goal)."""
    if kind not in GOALS:
        return {"goal_s": None, "goal_from": None, "goal_worst_s": None, "goal_met": None}
    limit, origin = GOALS[kind]
    times = [(f.recovered_ms - (f.end_ms if origin == "end" else f.start_ms)) / 1000
             for f in fs if f.recovered_ms is not None]
    worst = round(max(times), 1) if times else None
    return {"goal_s": limit, "goal_from": origin, "goal_worst_s": worst,
            "goal_met": len(times) == len(fs) and worst is not None and worst <= limit}


def per_kind(faults: list[Fault]) -> list[dict]:
    """Per fault kind: how many, the recovery (median, worst) in seconds from the fault's start,
    the answer gap (median, worst), how many never recovered before the run ended, the records
    re-read, and the goal with the figure it is judged by."""
    rows = []
    for kind in KINDS:
        fs = [f for f in faults if f.kind == kind]
        if not fs:
            continue
        rec = [(f.recovered_ms - f.start_ms) / 1000 for f in fs if f.recovered_ms is not None]
        gap = [f.answer_gap_ms / 1000 for f in fs if f.answer_gap_ms is not None]
        rec_med, rec_worst = _seconds(rec)
        gap_med, gap_worst = _seconds(gap)
        rows.append({"kind": kind, "count": len(fs),
                     "recovery_median_s": rec_med, "recovery_worst_s": rec_worst,
                     "answer_gap_median_s": gap_med, "answer_gap_worst_s": gap_worst,
                     "not_recovered": len(fs) - len(rec),
                     "reread_records": sum(f.reread for f in fs),
                     "handovers": sum(f.handovers for f in fs), **_goal(kind, fs)})
    return rows


def rerender(out: Path) -> dict:
    """Recompute the recoveries, the answer gaps (when ``answers.csv.gz`` is there) and the
    table from a run's ``faults.csv``, ``lag.csv.gz`` and ``summary.json`` and write
    ``faults.csv``, ``summary.json`` and ``README.md`` again."""
    summary = json.loads((out / "summary.json").read_text())
    faults = [Fault(r["kind"], int(r["start_ms"]), int(r["end_ms"]), r["detail"],
                    int(r["reread"]), handovers=int(r.get("handovers") or 0))
              for r in read_rows(out / "faults.csv")]
    samples = [(int(r["time_ms"]), int(r["lag"]) if r["lag"] else None)
               for r in read_rows(out / "lag.csv.gz")]
    recoveries(faults, samples, summary["options"]["rate"])
    if (out / "answers.csv.gz").exists():
        answer_gaps(faults, [Arrival(int(r["time_ms"]), int(r["first_event_ms"]),
                                     int(r["count"])) for r in read_rows(out / "answers.csv.gz")])
    _write_faults(out, faults)
    summary["per_kind"] = per_kind(faults)
    (out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    (out / "README.md").write_text(report(summary))
    return summary


def _write_faults(out: Path, faults: list[Fault]) -> None:
    write_csv(out / "faults.csv", [asdict(f) for f in faults], list(asdict(Fault("", 0))))


def _write(out: Path, opts: ChaosOptions, faults: list[Fault],
           samples: list[tuple[int, int | None]], arrivals: list[Arrival], v: Verdict,
           command: list[str]) -> None:
    _write_faults(out, faults)
    write_csv(out / "lag.csv.gz", [{"time_ms": t, "lag": lag} for t, lag in samples],
              ["time_ms", "lag"])
    write_csv(out / "answers.csv.gz", [asdict(a) for a in arrivals],
              ["time_ms", "first_event_ms", "count"])
    rows = per_kind(faults)
    summary = {"command": command, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
               "machine": machine(),
               "options": asdict(opts), "verdict": {**asdict(v), "exact": v.exact},
               "per_kind": rows}
    (out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    (out / "README.md").write_text(report(summary))


def goal_cell(row: dict) -> str:
    """The goal of a row of ``per_kind`` beside its figure: met or not met."""
    if row.get("goal_s") is None:
        return "–"
    since = " after the broker answers again" if row["goal_from"] == "end" else ""
    worst = "not recovered" if row["goal_worst_s"] is None else f"worst {row['goal_worst_s']} s"
    return (f"≤ {row['goal_s']:.0f} s{since}: **{'met' if row['goal_met'] else 'not met'}** "
            f"({worst})")


def report(summary: dict) -> str:
    """The results page of a run, from its summary."""
    o, v = summary["options"], summary["verdict"]
    lines = [
        "# Chaos: faults one after another, exactly-once to the end", "",
        f"`{' '.join(['geops', *summary['command']])}` ({summary['date']}, "
        f"{summary['machine']['cpus']} CPUs; seed {o['seed']}). Three Apache Kafka nodes "
        "(replication 3, `min.insync.replicas` 2), a Spark cluster of two 1-core workers, the "
        "app (`--delivery exactly-once`)"
        + (" with a standby (`geops app --standby`; after a driver kill the standby takes "
           "over and the killed app is started again as the next standby)"
           if o.get("standby") else "")
        + " and the distributor, a producer at "
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
        "batch are not counted); answer gap: the longest stretch without any answer (no new "
        "`Match` record on the matches topic read with `read_committed`) while publications "
        "were waiting (written and not yet answered), among those that ended between the "
        "fault's start and the next fault's; goal: the recovery every fault of the kind "
        "should stay within with a standby running, judged by the worst (a frozen broker "
        "node's from when it answers again).", "",
        *markdown(["fault", "count", "recovery median s", "worst s", "answer gap median s",
                   "worst s", "not recovered", "re-read records", "goal"],
                  ([r["kind"], r["count"], cell(r["recovery_median_s"], 1),
                    cell(r["recovery_worst_s"], 1), cell(r.get("answer_gap_median_s"), 1),
                    cell(r.get("answer_gap_worst_s"), 1), r["not_recovered"],
                    f"{r['reread_records']:,}", goal_cell(r)] for r in summary["per_kind"]),
                  "lrrrrrrrl")]
    handed = [f"{r['kind']} ({r['handovers']})" for r in summary["per_kind"]
              if r.get("handovers")]
    if handed:
        lines += ["", "The app was handed over to its standby after a fault that kept its lease's "
                  "heartbeats from Kafka for the lease time (the app stopped with exit code 7, "
                  "the standby answered, the stopped app came back as the next standby): after "
                  + ", ".join(handed) + "."]
    lines += ["", "Every fault with its time, what it hit and its answer gap: "
              "[`faults.csv`](faults.csv); the lag every half second: `lag.csv.gz`; when "
              "answers arrived: `answers.csv.gz`; all of it: `summary.json`.", ""]
    return "\n".join(lines)
