"""`geops bench scale`: the app with 10k .. 1M subscriptions.

Per run (strategy x number of subscriptions, STAL, W workers in ``local[W]``) on a broker of its
own, with topics of a fresh prefix:

1. ``geops subscribe --file subscriptions.avro`` and ``geops publish --file publications.avro``
   (``--publish-times`` times, event time from the file) of a workload written by
   ``geops generate --seed S --subscriptions N``: the publications are a **backlog** written
   before the app starts, so the app runs at its capacity (``--max-records-per-trigger``
   records a batch) and throughput is what it processed, not what was offered;
2. ``geops app`` starts (time 0 = the launch of its process); the time to its first batch is
   the ``end_time`` of its first BatchSummary minus the launch; its log gives the static
   build time and bytes (``static data: ...`` line);
3. after ``--move-after`` batches one RebalanceCommand (epoch 1) moves every fourth partition
   to the next worker (as Fig. 8 does); the MoveReport gives ``duration_ms`` and ``bytes``;
4. once every publication was processed the app is stopped; the metrics topic gives the
   throughput (records / busy time of the batches after the first, the move's batch left out)
   and the cost per candidate pair (batch time / candidates, and the join tasks'
   ``processing_ns`` / candidates);
5. a thread samples every process of the app's tree each second (VmRSS, VmHWM) by role: the
   driver's Python (and the `geops app` wrapper), the JVM, the Python workers.

A run that fails (the app exits, no batch within ``--first-batch-timeout``) is recorded with
its reason (the app's last error line); with ``--retry-driver-memory`` it is run once more with
that driver heap. Rows are appended to ``runs.csv`` after every run, so results exist early.
"""

from __future__ import annotations

import contextlib
import csv
import gzip
import os
import re
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.live import calc
from bench.live.deployment import session_env, unique_prefix
from bench.processes import GEOPS, REPO, BenchFailed, Processes

Log = Callable[[str], None]

STATIC_LINE = re.compile(
    r"static data: (?P<bytes>\d+) bytes in (?P<partitions>\d+) partitions \((?P<per_sub>[\d.]+) "
    r"bytes per subscription, the largest partition (?P<largest>\d+) bytes\), built on the "
    r"executors in (?P<build_s>[\d.]+) s")
SUBS_LINE = re.compile(r"(?P<subs>\d+) subscriptions \((?P<records>\d+) records read.*?"
                       r"\(built in (?P<router_s>[\d.]+) s\)")
_KB = re.compile(r"^(VmRSS|VmHWM):\s+(\d+)\s+kB", re.M)
ERROR_HINTS = ("OutOfMemoryError", "ERROR", "Error", "Traceback", "Killed")


# -- pure parts ------------------------------------------------------------------------------

def parse_app_log(text: str) -> dict[str, float | None]:
    """Static side and router figures from an app log (None where the line is missing)."""
    out: dict[str, float | None] = {"static_bytes": None, "static_partitions": None,
                                    "bytes_per_subscription": None, "largest_partition_bytes": None,
                                    "static_build_s": None, "router_build_s": None}
    m = STATIC_LINE.search(text)
    if m:
        out.update(static_bytes=int(m["bytes"]), static_partitions=int(m["partitions"]),
                   bytes_per_subscription=float(m["per_sub"]),
                   largest_partition_bytes=int(m["largest"]), static_build_s=float(m["build_s"]))
    m = SUBS_LINE.search(text)
    if m:
        out["router_build_s"] = float(m["router_s"])
    return out


_STAMP = r"^(?P<t>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) geops\.app INFO "
PHASE_LINES = {
    "router_at_s": re.compile(_STAMP + r"\d+ subscriptions \(", re.M),
    "static_at_s": re.compile(_STAMP + r"static data: ", re.M),
    "streaming_at_s": re.compile(_STAMP + r"streaming from ", re.M),
    "first_batch_at_s": re.compile(_STAMP + r"batch \d+ epoch \d+: [1-9]\d* records", re.M),
}


def _log_time(stamp: str) -> float:
    """Seconds of a log timestamp (local time, as Python's logging writes it)."""
    return time.mktime(time.strptime(stamp[:19], "%Y-%m-%d %H:%M:%S")) + int(stamp[20:]) / 1000


def phases(text: str, first_batch_s: float | None) -> dict[str, float | None]:
    """When the app's start-up steps ended, in seconds from its launch: the subscriptions are
    scanned (by the executors) and the router built, the static side is built, the query
    streams, the first batch with records is done. Anchored on the first batch
    (``first_batch_s`` from the launch, as the metrics say), so the log's clock and time zone
    do not matter."""
    out: dict[str, float | None] = dict.fromkeys(PHASE_LINES)
    stamps = {k: (m["t"] if (m := rx.search(text)) else None) for k, rx in PHASE_LINES.items()}
    anchor = stamps["first_batch_at_s"]
    if anchor is None or first_batch_s is None:
        return out
    t_anchor = _log_time(anchor)
    for k, stamp in stamps.items():
        if stamp is not None:
            out[k] = round(first_batch_s - (t_anchor - _log_time(stamp)), 1)
    return out


def failure_reason(text: str, limit: int = 300) -> str:
    """The most telling line of a failed app's log: an OutOfMemoryError first, else the last
    line naming an error."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for ln in lines:
        if "OutOfMemoryError" in ln:
            return ln[:limit]
    for ln in reversed(lines):
        if any(h in ln for h in ERROR_HINTS):
            return ln[:limit]
    return (lines[-1] if lines else "(empty log)")[:limit]


def memory_kb(status_text: str) -> tuple[int, int]:
    """(VmRSS, VmHWM) in kB of a /proc/<pid>/status text (0 for what is missing)."""
    vals = dict(_KB.findall(status_text))
    return int(vals.get("VmRSS", 0)), int(vals.get("VmHWM", 0))


@dataclass
class MemoryPeaks:
    """Peak memory by role: the largest sum of VmRSS over one sample, and the largest VmHWM of
    one process (the kernel's own peak, so nothing between samples is missed)."""

    rss_sum_kb: dict[str, int] = field(default_factory=dict)
    hwm_kb: dict[str, int] = field(default_factory=dict)
    hwm_by_pid: dict[int, tuple[str, int]] = field(default_factory=dict)

    def add(self, sample: Iterable[tuple[int, str, int, int]]) -> None:
        """One sample: (pid, role, VmRSS kB, VmHWM kB) per process."""
        sums: dict[str, int] = {}
        for pid, role, rss, hwm in sample:
            sums[role] = sums.get(role, 0) + rss
            prev = self.hwm_by_pid.get(pid, (role, 0))[1]
            self.hwm_by_pid[pid] = (role, max(prev, hwm))
            self.hwm_kb[role] = max(self.hwm_kb.get(role, 0), hwm)
        for role, kb in sums.items():
            self.rss_sum_kb[role] = max(self.rss_sum_kb.get(role, 0), kb)

    def hwm_sum_kb(self, role: str) -> int:
        """Sum of the per-process peaks of a role (an upper bound of its peak together)."""
        return sum(h for r, h in self.hwm_by_pid.values() if r == role)

    def row(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for role in ("app-driver-python", "app-jvm", "app-python-workers"):
            key = role.removeprefix("app-").replace("-", "_")
            out[f"{key}_hwm_mb"] = round(self.hwm_kb.get(role, 0) / 1024, 1)
            out[f"{key}_rss_peak_mb"] = round(self.rss_sum_kb.get(role, 0) / 1024, 1)
        out["python_workers_hwm_sum_mb"] = round(self.hwm_sum_kb("app-python-workers") / 1024, 1)
        return out


def dedupe_batches(summaries: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """One summary per batch id (a replayed batch reports again; the last one counts)."""
    return sorted({s["batch_id"]: s for s in summaries}.values(), key=lambda s: s["batch_id"])


def summarise(batches: Sequence[Mapping[str, Any]], loads: Sequence[Mapping[str, Any]],
              moves: Sequence[Mapping[str, Any]], launch_ms: int) -> dict[str, Any]:
    """Time to the first batch, throughput and cost per candidate pair of one run.

    The first batch (warm-up) and the batch a move ran before are left out of the steady
    figures; throughput = records / summed batch time (busy throughput: the backlog keeps the
    app busy) and records / span of those batches."""
    done = [b for b in dedupe_batches(batches) if b["records"]]
    if not done:
        raise ValueError("no batch with records")
    first = done[0]
    moved = {m["batch_id"] for m in moves}
    steady = [b for b in done[1:] if b["batch_id"] not in moved]
    ids = {b["batch_id"] for b in steady}
    cand = {}
    proc_ns = {}
    for r in loads:
        cand[r["batch_id"]] = cand.get(r["batch_id"], 0) + r["candidates"]
        proc_ns[r["batch_id"]] = proc_ns.get(r["batch_id"], 0) + r["processing_ns"]
    records = sum(b["records"] for b in steady)
    busy_ms = sum(b["duration_ms"] for b in steady)
    candidates = sum(cand.get(i, 0) for i in ids)
    span_ms = (max(b["end_time"] for b in steady) - min(b["start_time"] for b in steady)
               if steady else 0)
    move = moves[0] if moves else None
    return {
        "first_batch_s": (first["end_time"] - launch_ms) / 1000,
        "first_batch_start_s": (first["start_time"] - launch_ms) / 1000,
        "first_batch_ms": first["duration_ms"],
        "batches": len(done), "steady_batches": len(steady),
        "records": sum(b["records"] for b in done), "steady_records": records,
        "throughput_busy": records / (busy_ms / 1000) if busy_ms else None,
        "throughput_span": records / (span_ms / 1000) if span_ms else None,
        "candidates": candidates,
        "candidates_per_record": candidates / records if records else None,
        "batch_us_per_candidate": busy_ms * 1000 / candidates if candidates else None,
        "join_us_per_candidate": (sum(proc_ns.get(i, 0) for i in ids) / 1000 / candidates
                                  if candidates else None),
        "move_batch": move["batch_id"] if move else None,
        "move_partitions": len(move["partitions_moved"]) if move else None,
        "move_bytes": move["bytes"] if move else None,
        "move_ms": move["duration_ms"] if move else None,
    }


def batch_rows(batches: Sequence[Mapping[str, Any]], loads: Sequence[Mapping[str, Any]],
               launch_ms: int, base: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One row per batch (the raw data): its summary, its candidates and join-task time."""
    cand: dict[int, int] = {}
    proc_ns: dict[int, int] = {}
    for r in loads:
        cand[r["batch_id"]] = cand.get(r["batch_id"], 0) + r["candidates"]
        proc_ns[r["batch_id"]] = proc_ns.get(r["batch_id"], 0) + r["processing_ns"]
    return [{**base, "batch_id": b["batch_id"], "epoch": b.get("epoch"),
             "start_s": (b["start_time"] - launch_ms) / 1000,
             "end_s": (b["end_time"] - launch_ms) / 1000, "records": b["records"],
             "items": b.get("items"), "duration_ms": b["duration_ms"],
             "job_ms": b.get("job_ms"), "write_ms": b.get("write_ms"),
             "candidates": cand.get(b["batch_id"], 0),
             "processing_ns": proc_ns.get(b["batch_id"], 0)}
            for b in dedupe_batches(batches)]


REL_KEYS = ("first_batch_s", "throughput_busy", "batch_us_per_candidate", "join_us_per_candidate")


def batch_size(row: Mapping[str, Any]) -> int | None:
    """Records per batch of a run (its batches were full: the backlog outlasted them)."""
    records, batches = _num(row.get("records")), _num(row.get("batches"))
    return round(records / batches) if records and batches else None


def relative_to_reference(rows: Sequence[dict[str, Any]], reference: int) -> list[dict[str, Any]]:
    """Each row with ``<key>_rel`` = its value / the same strategy's value at ``reference``
    subscriptions, from the reference run with the same records per batch when there is one
    (else the strategy's last ok reference run); ``reference_batch`` says which."""
    ok = [r for r in rows if r.get("status") == "ok" and int(r["subscriptions"]) == reference]
    by_size = {(r["strategy"], batch_size(r)): r for r in ok}
    last = {r["strategy"]: r for r in ok}
    out = []
    for r in rows:
        r = dict(r)
        base = by_size.get((r["strategy"], batch_size(r))) or last.get(r["strategy"])
        r["reference_batch"] = batch_size(base) if base else None
        for k in REL_KEYS:
            v, b = _num(r.get(k)), _num(base.get(k)) if base else None
            r[f"{k}_rel"] = round(v / b, 3) if v is not None and b else None
        out.append(r)
    return out


def _num(v: Any) -> float | None:
    if v is None or v == "":
        return None
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def forced_assignment(partitions: int, workers: int) -> tuple[list[int], list[int]]:
    """(old, new): the initial assignment and the one with every fourth partition moved to the
    next worker (Fig. 8's forced move)."""
    from schemas.assignment import initial_assignment
    old = list(initial_assignment(partitions, workers))
    return old, [(w + 1) % workers if p % 4 == 0 else w for p, w in enumerate(old)]


# -- CSV -------------------------------------------------------------------------------------

def append_rows(path: Path, rows: Sequence[Mapping[str, Any]]) -> None:
    """Append rows to a CSV (gzip when the name ends in .gz), widening the header when a row
    brings new columns (the file is rewritten then)."""
    if not rows:
        return
    old = read_rows(path) if path.exists() else []
    fields: list[str] = []
    for r in [*old, *rows]:
        fields.extend(k for k in r if k not in fields)
    opener = gzip.open if path.suffix == ".gz" else open
    path.parent.mkdir(parents=True, exist_ok=True)
    with opener(path, "wt", newline="") as fh:
        w = csv.DictWriter(fh, fields)
        w.writeheader()
        for r in [*old, *rows]:
            w.writerow(r)


def read_rows(path: Path) -> list[dict[str, Any]]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", newline="") as fh:
        return list(csv.DictReader(fh))


# -- running ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class ScaleSpec:
    out: Path
    workdir: Path
    sizes: tuple[int, ...] = (10_000, 100_000, 300_000, 1_000_000)
    strategies: tuple[str, ...] = ("sPIS", "RIsPS")
    join: str = "STAL"
    workers: int = 2
    partitions: int = 16
    publications: int = 20_000
    publish_times: int = 2
    seed: int = 9
    trigger: str = "100ms"
    max_records: int = 2_000
    move_after: int = 3
    max_batches: int = 0                 # stop after this many batches with records (0: all)
    driver_memory: str = "4g"
    retry_driver_memory: str | None = "8g"
    first_batch_timeout: float = 600.0
    run_timeout: float = 900.0
    reference: int = 10_000
    memory_limit_mb: float = 10_240.0    # stop a run whose app tree's RSS exceeds this


class UptimeLog(threading.Thread):
    """``uptime`` every ``every`` seconds into a CSV (time, load averages, the line)."""

    def __init__(self, path: Path, every: float = 10.0):
        super().__init__(daemon=True, name="bench-scale-uptime")
        self.path, self.every = path, every
        self.stopping = threading.Event()
        self.rows: list[dict[str, Any]] = []

    def run(self) -> None:
        while not self.stopping.is_set():
            line = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
            load = [float(x) for x in re.findall(r"[\d.]+", line.rsplit("average:", 1)[-1])[:3]]
            row = {"time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                   "epoch_s": round(time.time(), 1),
                   "load1": load[0] if load else None, "load5": load[1] if len(load) > 1 else None,
                   "load15": load[2] if len(load) > 2 else None, "uptime": line}
            self.rows.append(row)
            append_rows(self.path, [row])
            self.stopping.wait(self.every)

    def mean_load(self, t0: float, t1: float) -> float | None:
        vals = [r["load1"] for r in self.rows
                if r["load1"] is not None and t0 <= r["epoch_s"] <= t1]
        return round(sum(vals) / len(vals), 2) if vals else None

    def close(self) -> None:
        self.stopping.set()
        self.join(15)


class MemorySampler(threading.Thread):
    """The app's process tree every ``every`` s; ``over`` is set (with the sample's total)
    when the tree's summed RSS exceeds ``limit_mb`` (0: no limit)."""

    def __init__(self, root_pid: int, every: float = 1.0, limit_mb: float = 0.0):
        super().__init__(daemon=True, name="bench-scale-memory")
        self.root, self.every, self.limit_mb = root_pid, every, limit_mb
        self.over: float | None = None
        self.peaks = MemoryPeaks()
        self.samples: list[dict[str, Any]] = []
        self.stopping = threading.Event()

    def run(self) -> None:
        from bench.live.monitor import process_parents
        while not self.stopping.is_set():
            sample = []
            for pid in calc.descendants(self.root, process_parents()):
                with contextlib.suppress(OSError):
                    cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
                    rss, hwm = memory_kb(Path(f"/proc/{pid}/status").read_text())
                    sample.append((pid, calc.role(cmd.decode(errors="replace"),
                                                  "app-driver-python"), rss, hwm))
            self.peaks.add(sample)
            sums: dict[str, int] = {}
            for _, role, rss, _ in sample:
                sums[role] = sums.get(role, 0) + rss
            total_mb = sum(sums.values()) / 1024
            if self.limit_mb and total_mb > self.limit_mb and self.over is None:
                self.over = total_mb
            self.samples.append({"time_ms": calc_now_ms(),
                                 **{f"{r}_rss_mb": round(kb / 1024, 1)
                                    for r, kb in sorted(sums.items())}})
            self.stopping.wait(self.every)

    def close(self) -> None:
        self.stopping.set()
        self.join(10)


def _run_cli(argv: list[str], env: Mapping[str, str], log_path: Path, timeout: float) -> float:
    t0 = time.monotonic()
    with open(log_path, "w") as fh:
        p = subprocess.run([*GEOPS, *argv], env=dict(env), stdout=fh, stderr=subprocess.STDOUT,
                           stdin=subprocess.DEVNULL, cwd=REPO, timeout=timeout)
    if p.returncode != 0:
        raise BenchFailed(f"geops {' '.join(argv[:3])} exited with {p.returncode}; see {log_path}")
    return time.monotonic() - t0


def workload_dir(spec: ScaleSpec, n: int, log: Log) -> Path:
    d = spec.workdir / "workloads" / f"n{n}-s{spec.seed}-p{spec.publications}"
    if (d / "subscriptions.avro").exists() and (d / "publications.avro").exists():
        return d
    log(f"generating {n:,} subscriptions and {spec.publications:,} publications "
        f"(seed {spec.seed}) in {d}")
    d.parent.mkdir(parents=True, exist_ok=True)
    t = _run_cli(["generate", "--out", str(d), "--seed", str(spec.seed), "--subscriptions",
                  str(n), "--publications", str(spec.publications)], os.environ,
                 d.parent / f"generate-n{n}.log", 3600)
    log(f"generated in {t:.0f} s")
    return d


class Run:
    """One (strategy, subscriptions, driver memory) run on the broker at ``address``."""

    def __init__(self, spec: ScaleSpec, procs: Processes, address: str, strategy: str, n: int,
                 driver_memory: str, log: Log):
        self.spec, self.procs, self.strategy, self.n = spec, procs, strategy, n
        self.driver_memory, self.log = driver_memory, log
        self.prefix = unique_prefix(f"scale-{strategy}-{n}")
        self.dir = spec.workdir / self.prefix
        self.dir.mkdir(parents=True, exist_ok=True)
        self.env = session_env(os.environ, address, self.dir, self.prefix, {})
        import config
        self.cfg = config.load(environ=self.env)

    def app_argv(self) -> list[str]:
        s = self.spec
        return ["app", "--master", f"local[{s.workers}]", "--workers", str(s.workers),
                "--strategy", self.strategy, "--join", s.join, "--partitions", str(s.partitions),
                "--trigger", s.trigger, "--max-records-per-trigger", str(s.max_records),
                "--driver-memory", self.driver_memory,
                "--checkpoint", str(self.dir / "checkpoint")]

    def execute(self, wl: Path) -> dict[str, Any]:
        from kafkaio.topics import create_topics
        s = self.spec
        row: dict[str, Any] = {"strategy": self.strategy, "join": s.join, "workers": s.workers,
                               "partitions": s.partitions, "subscriptions": self.n,
                               "driver_memory": self.driver_memory, "seed": s.seed,
                               "prefix": self.prefix, "status": "failed"}
        create_topics(self.cfg)
        row["subscribe_s"] = round(_run_cli(["subscribe", "--file", str(wl / "subscriptions.avro")],
                                            self.env, self.dir / "subscribe.log", 1800), 1)
        self.log(f"{self.prefix}: {self.n:,} subscriptions loaded in {row['subscribe_s']:.0f} s")
        for i in range(s.publish_times):
            _run_cli(["publish", "--file", str(wl / "publications.avro")], self.env,
                     self.dir / f"publish-{i}.log", 600)
        total = s.publications * s.publish_times
        row["published"] = total
        self.log(f"{self.prefix}: backlog of {total:,} publications written; starting the app "
                 f"(driver memory {self.driver_memory})")
        launch_ms = calc_now_ms()
        row["launch_ms"] = launch_ms
        app = self.procs.start("app", [*GEOPS, *self.app_argv()], self.env, self.dir / "app.log")
        sampler = MemorySampler(app.popen.pid, limit_mb=s.memory_limit_mb)
        sampler.start()
        data: dict[str, list[dict]] = {}
        try:
            data = self._follow(app, launch_ms, total, row, sampler)
        finally:
            sampler.close()
            code = self.procs.stop(app, grace=60)
            row["app_exit"] = code
            row.update(sampler.peaks.row())
            append_rows(s.out / "memory.csv.gz",
                        [{"prefix": self.prefix, "strategy": self.strategy,
                          "subscriptions": self.n, "t_s": (m.pop("time_ms") - launch_ms) / 1000,
                          **m} for m in sampler.samples])
        text = (self.dir / "app.log").read_text(errors="replace")
        row.update(parse_app_log(text))
        if row.get("failure"):
            row["reason"] = failure_reason(text)
            with contextlib.suppress(ValueError):  # what it did before it stopped
                row.update(summarise(data.get("BatchSummary", []),
                                     data.get("PartitionLoad", []),
                                     data.get("MoveReport", []), launch_ms))
            row.update(phases(text, row.get("first_batch_s")))
            return row
        row.update(summarise(data.get("BatchSummary", []), data.get("PartitionLoad", []),
                             data.get("MoveReport", []), launch_ms))
        row.update(phases(text, row["first_batch_s"]))
        append_rows(s.out / "batches.csv.gz", batch_rows(
            data.get("BatchSummary", []), data.get("PartitionLoad", []), launch_ms,
            {"prefix": self.prefix, "strategy": self.strategy, "subscriptions": self.n}))
        row["status"] = "ok"
        return row

    def _follow(self, app: Any, launch_ms: int, total: int, row: dict[str, Any],
                sampler: MemorySampler | None = None) -> dict[str, list[dict]]:
        """Follow the metrics topic until every publication was processed (and the move
        reported); send the move after ``move_after`` batches with records."""
        from confluent_kafka import TopicPartition

        from kafkaio.clients import consumer
        from kafkaio.dump import decoded_records
        from kafkaio.sender import Sender
        from schemas import codec
        from schemas.assignment import moves_between
        s = self.spec
        dec = codec()
        c = consumer(self.cfg.kafka_client())
        c.assign([TopicPartition(self.cfg.topic("metrics"), 0, 0)])
        data: dict[str, list[dict]] = {}
        t0 = time.monotonic()
        moved_sent = False
        first_seen = False
        try:
            while True:
                if app.popen.poll() is not None:
                    row["failure"] = f"the app exited with {app.popen.returncode}"
                    self.log(f"{self.prefix}: {row['failure']}; see {app.log}")
                    return data
                if sampler is not None and sampler.over is not None:
                    row["failure"] = (f"stopped by the benchmark: the app's processes held "
                                      f"{sampler.over:,.0f} MB, over the limit of "
                                      f"{s.memory_limit_mb:,.0f} MB, "
                                      f"{(calc_now_ms() - launch_ms) / 1000:.0f} s after the "
                                      "launch")
                    self.log(f"{self.prefix}: {row['failure']}")
                    return data
                el = time.monotonic() - t0
                if not first_seen and el > s.first_batch_timeout:
                    row["failure"] = f"no batch within {s.first_batch_timeout:.0f} s"
                    self.log(f"{self.prefix}: {row['failure']}; see {app.log}")
                    return data
                if el > s.run_timeout:
                    row["failure"] = f"not done within {s.run_timeout:.0f} s"
                    self.log(f"{self.prefix}: {row['failure']}; see {app.log}")
                    return data
                for name, rec in decoded_records(c.consume(200, timeout=0.5)):
                    data.setdefault(name, []).append(rec)
                    if name == "BatchSummary" and rec["records"] and not first_seen:
                        first_seen = True
                        self.log(f"{self.prefix}: first batch {rec['end_time'] - launch_ms:,} ms "
                                 f"after the launch ({rec['records']:,} records, "
                                 f"{rec['duration_ms']:,} ms)")
                    elif name == "MoveReport":
                        self.log(f"{self.prefix}: moved {len(rec['partitions_moved'])} partitions, "
                                 f"{rec['bytes'] / 1e6:.1f} MB in {rec['duration_ms']:,} ms")
                batches = [b for b in dedupe_batches(data.get("BatchSummary", [])) if b["records"]]
                if not moved_sent and len(batches) >= s.move_after:
                    old, new = forced_assignment(batches[0]["partitions"], batches[0]["workers"])
                    sender = Sender(self.cfg.kafka_client())
                    sender.send(self.cfg.topic("control"), dec.encode("RebalanceCommand", {
                        "epoch": 1, "assignment": new,
                        "moves": [{"partition": p, "from_worker": a, "to_worker": b}
                                  for p, a, b in moves_between(old, new)],
                        "mldc_before": 0.0, "mldc_predicted": 0.0, "metric": "LB",
                        "reason": "forced by geops bench scale", "time": calc_now_ms(),
                        "app_id": ""}), key=b"geops")
                    sender.flush()
                    moved_sent = True
                    self.log(f"{self.prefix}: move commanded after batch "
                             f"{batches[-1]['batch_id']}")
                done = sum(b["records"] for b in batches)
                enough = done >= total or 0 < s.max_batches <= len(batches)
                if enough and (data.get("MoveReport") or not moved_sent):
                    self.log(f"{self.prefix}: {done:,} publications in {len(batches)} batches")
                    # the last batch's PartitionLoad records follow its summary closely
                    end = time.monotonic() + 3
                    while time.monotonic() < end:
                        for name, rec in decoded_records(c.consume(200, timeout=0.5)):
                            data.setdefault(name, []).append(rec)
                    return data
        finally:
            c.close()

    def delete_topics(self) -> None:
        from kafkaio.topics import drop_topics
        drop_topics(self.cfg, timeout=60)

def calc_now_ms() -> int:
    return int(time.time() * 1000)


def run_scale(spec: ScaleSpec, log: Log = print) -> list[dict[str, Any]]:
    """Every run of ``spec`` (sizes ascending, each strategy), rows appended to
    ``out/runs.csv`` as they finish; the uptime log beside it. Returns the rows."""
    spec.out.mkdir(parents=True, exist_ok=True)
    spec.workdir.mkdir(parents=True, exist_ok=True)
    procs = Processes()
    uptime = UptimeLog(spec.out / "uptime.csv")
    uptime.start()
    rows: list[dict[str, Any]] = []
    try:
        for attempt in range(3):  # another process may take the free port first
            try:
                address = procs.start_broker(spec.workdir / "broker")
                break
            except Exception as exc:  # BrokerError: the port was taken meanwhile
                if attempt == 2:
                    raise BenchFailed(f"the broker did not start: {exc}") from None
                log(f"broker: {exc}; trying another port")
        log(f"broker at {address}")
        for n in sorted(spec.sizes):
            wl = workload_dir(spec, n, log)
            for strategy in spec.strategies:
                memories = [spec.driver_memory]
                if spec.retry_driver_memory and spec.retry_driver_memory != spec.driver_memory:
                    memories.append(spec.retry_driver_memory)
                for attempt, mem in enumerate(memories):
                    run = Run(spec, procs, address, strategy, n, mem, log)
                    t0 = time.time()
                    try:
                        row = run.execute(wl)
                    except (BenchFailed, subprocess.TimeoutExpired) as exc:
                        row = {"strategy": strategy, "join": spec.join, "subscriptions": n,
                               "driver_memory": mem, "prefix": run.prefix, "status": "failed",
                               "failure": str(exc)}
                    finally:
                        run.delete_topics()
                    t1 = time.time()
                    row.update(attempt=attempt, started=time.strftime(
                        "%Y-%m-%dT%H:%M:%SZ", time.gmtime(t0)), wall_s=round(t1 - t0, 1),
                        load1_mean=uptime.mean_load(t0, t1))
                    rows.append(row)
                    append_rows(spec.out / "runs.csv", [row])
                    log(format_row(row))
                    if row["status"] == "ok" or "stopped by the benchmark" in str(
                            row.get("failure")):  # a larger heap would not help that
                        break
    finally:
        procs.stop_all()
        uptime.close()
    return rows


def format_row(r: Mapping[str, Any]) -> str:
    if r.get("status") != "ok":
        return (f"{r['strategy']} {int(r['subscriptions']):,}: FAILED with driver memory "
                f"{r.get('driver_memory')}: {r.get('failure')} - {r.get('reason', '')}")

    def f(k: str, fmt: str) -> str:
        v = _num(r.get(k))
        return "-" if v is None else format(v, fmt)
    return (f"{r['strategy']} {int(r['subscriptions']):,}: first batch "
            f"{f('first_batch_s', '.1f')} s "
            f"(static build {f('static_build_s', '.1f')} s, {f('bytes_per_subscription', '.0f')} "
            f"B/sub), {f('throughput_busy', ',.0f')} pub/s busy, "
            f"{f('batch_us_per_candidate', '.2f')} us/candidate (join "
            f"{f('join_us_per_candidate', '.2f')}), move {f('move_bytes', ',.0f')} B in "
            f"{f('move_ms', ',.0f')} ms, peak driver py {f('driver_python_hwm_mb', ',.0f')} "
            f"MB, JVM {f('jvm_hwm_mb', ',.0f')} MB, workers "
            f"{f('python_workers_rss_peak_mb', ',.0f')} MB")
