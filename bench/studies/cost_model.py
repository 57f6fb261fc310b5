"""Per-batch cost model of the app: for each stage of a micro-batch, a fixed cost per batch and
a cost per record, fitted by least squares (ms = fixed + per_record × records) over batches of
many sizes, from one ``geops bench live`` run with Spark's event log on.

Three sources, joined by batch id:

- Spark's event log (``spark.eventLog.enabled``, uncompressed): the streaming query's
  ``QueryProgressEvent`` (``durationMs``: latestOffset, queryPlanning, getBatch, walCommit,
  addBatch, commitOffsets, triggerExecution) and the batch's Spark job (the job property
  ``streaming.sql.batchId``) with its read and join stages and their tasks, parsed by
  ``bench.studies.eventlog``;
- the app's ``BatchSummary`` records on the metrics topic (start_time, job_ms, write_ms,
  duration_ms, records), followed while the run goes on (the run drops its topics at the end);
- the app's log line per batch (``batch N epoch E: ... X ms``), written after
  ``output.finish``: the time from the start of the batch function to the end of its commit.

``STAGES`` are the wall-time stages of one batch, in order; they add up to Spark's
``triggerExecution``. ``TASK_PARTS`` split the read and join stages by task metrics (summed
over the stage's tasks, so core-ms, not wall time). Kafka fetch, decode and route run in one
Python function inside one task: no source times them apart.

Usage::

    python -m bench.studies.cost_model run --workdir DIR --out DIR [--tree DIR] [--max-rate R ...]
    python -m bench.studies.cost_model analyse WORKDIR --out DIR
    python -m bench.studies.cost_model fit RUNS.csv.gz

``run`` drives ``geops bench live`` (fixed rates, no search) with the event log on and keeps its
work dir, then analyses it; ``analyse`` writes ``runs.csv.gz`` (one row per batch) to ``--out``
and prints the fitted table; ``fit`` prints it again from ``runs.csv.gz``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bench.harness import eventlog, tables
from bench.harness.batches import SMALL_BATCH as SMALL
from bench.harness.batches import fit
from bench.harness.csv_tables import read_rows, write_csv
from bench.harness.tables import number

REPO = Path(__file__).resolve().parents[2]
PROGRESS = "org.apache.spark.sql.streaming.StreamingQueryListener$QueryProgressEvent"
BATCH_KEY = "streaming.sql.batchId"
SUMMARIES = "summaries.jsonl"   # the run's BatchSummary records, captured by ``run``
# "batch 12 epoch 0: 356 records, 535 items, 356 matched, 0 dead letters, two stages, 5607 ms"
BATCH_LINE = re.compile(r"batch (\d+) epoch \d+: (\d+) records, .* (\d+) ms$")

# (column, stage, what it covers): the wall time of one batch, in order; sums to ``trigger``.
STAGES: tuple[tuple[str, str, str], ...] = (
    ("offsets", "latest offsets", "Spark asks Kafka for the end offsets (latestOffset)"),
    ("planning", "planning", "query planning and getBatch of the Kafka source"),
    ("wal", "offset log", "Spark writes the batch's offsets to the checkpoint (walCommit)"),
    ("call", "foreachBatch call", "Spark to the Python batch function and back (addBatch "
     "minus the function's own time)"),
    ("prepare", "driver: prepare", "control, subscriptions, fold, task contexts, the job's "
     "RDDs, job submission"),
    ("read", "read stage", "tasks: Kafka fetch, decode, route, shuffle write"),
    ("between", "stage gap", "read stage done to join stage submitted"),
    ("join", "join stage", "tasks: shuffle read, join, result serialization"),
    ("collect", "collect", "join stage done to the results in the Python driver"),
    ("gather", "driver: gather", "going over the results: loads, read stats"),
    ("write", "write", "merge partial matches, encode and produce matches and metrics, flush"),
    ("output", "output commit", "BatchSummary, layout, output.finish"),
    ("commit", "commit log", "Spark writes the batch's commit to the checkpoint "
     "(commitOffsets)"),
    ("other", "other", "triggerExecution minus its parts above"),
)
# (column, part): the read and join stages by task metrics, summed over the stage's tasks.
TASK_PARTS: tuple[tuple[str, str], ...] = (
    ("read_launch", "read: task launch delay (wall, latest task)"),
    ("read_deser", "read: task deserialization"),
    ("read_work", "read: Kafka fetch + decode + route"),
    ("read_shuffle_write", "read: shuffle write"),
    ("read_gc", "read: JVM GC (within the above)"),
    ("join_deser", "join: task deserialization"),
    ("join_fetch", "join: shuffle fetch wait"),
    ("join_work", "join: task run minus fetch wait"),
    ("join_busy", "join: Python join time (busiest task)"),
    ("join_result_ser", "join: result serialization"),
    ("join_gc", "join: JVM GC (within the above)"),
)


# -- sources ------------------------------------------------------------------------------------

def event_files(workdir: Path) -> list[Path]:
    """The event log files under ``workdir`` (rolling ``events_<n>_*`` in index order, or
    single files)."""
    files = sorted(workdir.rglob("events_*_*"),
                   key=lambda p: (str(p.parent), int(p.name.split("_")[1])))
    if not files:
        files = sorted(p for p in workdir.rglob("local-*") if p.is_file())
    return files


def read_lines(path: Path) -> list[str]:
    if path.suffix in (".zst", ".zstd"):
        out = subprocess.run(["zstd", "-dc", str(path)], check=True, capture_output=True)
        return out.stdout.decode().splitlines()
    return path.read_text().splitlines()


def progress_and_batch_jobs(lines: Iterable[str]) -> tuple[dict[int, dict], dict[int, list[int]]]:
    """The query's progress by batch id, and the Spark jobs of each batch id (in job order)."""
    progress: dict[int, dict] = {}
    jobs: dict[int, list[int]] = {}
    for line in lines:
        e = json.loads(line)
        if e["Event"] == PROGRESS:
            p = e["progress"]
            progress[int(p["batchId"])] = p
        elif e["Event"] == "SparkListenerJobStart":
            batch = (e.get("Properties") or {}).get(BATCH_KEY)
            if batch is not None:
                jobs.setdefault(int(batch), []).append(e["Job ID"])
    return progress, jobs


def app_totals(lines: Iterable[str]) -> dict[int, float]:
    """Batch id -> ms from the start of the batch function to after its output commit."""
    out = {}
    for line in lines:
        m = BATCH_LINE.search(line.rstrip())
        if m:
            out[int(m.group(1))] = float(m.group(3))
    return out


# -- one row per batch --------------------------------------------------------------------------

def _task_sums(tasks: Sequence[dict], stage: dict) -> dict[str, float]:
    m = [t["Task Metrics"] for t in tasks]
    return {
        "tasks": len(tasks),
        "launch": max(t["Task Info"]["Launch Time"] - stage["Submission Time"] for t in tasks),
        "deser": sum(x["Executor Deserialize Time"] for x in m),
        "run": sum(x["Executor Run Time"] for x in m),
        "gc": sum(x["JVM GC Time"] for x in m),
        "result_ser": sum(x["Result Serialization Time"] for x in m),
        "shuffle_write": sum(x["Shuffle Write Metrics"]["Shuffle Write Time"] for x in m) / 1e6,
        "shuffle_bytes": sum(x["Shuffle Write Metrics"]["Shuffle Bytes Written"] for x in m),
        "fetch": sum(x["Shuffle Read Metrics"]["Fetch Wait Time"] for x in m),
        "result_bytes": sum(x["Result Size"] for x in m),
    }


def batch_rows(event_lines: Sequence[str], summaries: Iterable[Mapping[str, Any]],
               totals: Mapping[int, float]) -> list[dict[str, Any]]:
    """One row per batch found in all three sources: records, ``stages`` (2: a read stage and
    a join stage; 1: a small batch read in its join tasks, whose read columns are 0), every
    ``STAGES`` and ``TASK_PARTS`` column in ms, and ``trigger`` (Spark's triggerExecution)."""
    jobs, stages, tasks = eventlog.parse(event_lines)
    progress, batch_jobs = progress_and_batch_jobs(event_lines)
    rows = []
    for s in sorted(summaries, key=lambda s: s["batch_id"]):
        b = s["batch_id"]
        p = progress.get(b)
        pairs = [(j, pair) for j in batch_jobs.get(b, [])
                 if j in jobs and "end" in jobs[j]
                 and (pair := eventlog.batch_stages(jobs[j], stages)) is not None]
        if p is None or b not in totals or not pairs:
            continue
        job_id, (read, join) = pairs[-1]   # the batch's collect (its last job)
        if (read is not None and not tasks[read["Stage ID"]]) or not tasks[join["Stage ID"]]:
            continue
        d = p["durationMs"]
        r = (_task_sums(tasks[read["Stage ID"]], read) if read is not None
             else dict.fromkeys(_task_sums(tasks[join["Stage ID"]], join), 0.0))
        j = _task_sums(tasks[join["Stage ID"]], join)
        read_end = read["Completion Time"] if read is not None else jobs[job_id]["start"]
        start, total = s["start_time"], totals[b]
        parts = ("latestOffset", "queryPlanning", "getBatch", "walCommit", "addBatch",
                 "commitOffsets")
        rows.append({
            "batch_id": b, "records": s["records"], "items": s["items"],
            "input_rows": sum(src.get("numInputRows", 0) for src in p.get("sources", [])),
            "jobs": len(batch_jobs[b]), "stages": 1 if read is None else 2,
            "trigger_start": p["timestamp"],
            "trigger": d["triggerExecution"],
            "offsets": d.get("latestOffset", 0),
            "planning": d.get("queryPlanning", 0) + d.get("getBatch", 0),
            "wal": d.get("walCommit", 0),
            "call": d.get("addBatch", 0) - total,
            "prepare": jobs[job_id]["start"] - start,
            "read": read_end - jobs[job_id]["start"],
            "between": join["Submission Time"] - read_end,
            "join": join["Completion Time"] - join["Submission Time"],
            "collect": start + s["job_ms"] - join["Completion Time"],
            "gather": s["duration_ms"] - s["job_ms"] - s["write_ms"],
            "write": s["write_ms"],
            "output": total - s["duration_ms"],
            "commit": d.get("commitOffsets", 0),
            "other": d["triggerExecution"] - sum(d.get(k, 0) for k in parts),
            "read_tasks": r["tasks"], "read_launch": r["launch"], "read_deser": r["deser"],
            "read_work": r["run"] - r["shuffle_write"], "read_shuffle_write": r["shuffle_write"],
            "read_gc": r["gc"], "shuffle_bytes": r["shuffle_bytes"],
            "join_tasks": j["tasks"], "join_deser": j["deser"], "join_fetch": j["fetch"],
            "join_work": j["run"] - j["fetch"], "join_busy": s.get("join_stage_ms", 0.0),
            "join_result_ser": j["result_ser"], "join_gc": j["gc"],
            "result_bytes": j["result_bytes"],
        })
    return rows


# -- the fit ------------------------------------------------------------------------------------

def cost_table(rows: Sequence[Mapping[str, Any]], skip: int = 3
               ) -> tuple[list[dict[str, Any]], list[Mapping[str, Any]]]:
    """The fit of every stage, task part and the total over ``rows`` but the first ``skip``
    (the query's warm-up); and the rows used."""
    used = list(rows)[skip:]
    x = [float(r["records"]) for r in used]
    small = [r for r in used if r["records"] <= SMALL]
    out = []
    for col, name, what in (*STAGES, ("trigger", "total", "triggerExecution"),
                            *((c, n, "") for c, n in TASK_PARTS)):
        fixed, slope, r2 = fit(x, [float(r[col]) for r in used])
        small_fixed = (fit([r["records"] for r in small], [float(r[col]) for r in small])[0]
                       if len(small) > 2 else float("nan"))
        out.append({"column": col, "stage": name, "what": what, "fixed_ms": fixed,
                    "us_per_record": slope * 1000, "r2": r2, "small_fixed_ms": small_fixed,
                    "mean_ms": float(np.mean([float(r[col]) for r in used]))})
    return out, used


def markdown(table: Sequence[Mapping[str, Any]], used: Sequence[Mapping[str, Any]],
             at: Sequence[int] = (200, 5000), load: float = 0.7) -> list[str]:
    """The two tables (wall-time stages with the total; task parts) and what the fixed cost
    means for latency at ``load``."""
    sizes = [int(r["records"]) for r in used]
    tasks = {c for c, _ in TASK_PARTS}
    lines = [f"{len(used)} batches, {min(sizes):,} to {max(sizes):,} records "
             f"(median {int(np.median(sizes)):,}).", "",
             *tables.markdown(
                 ["stage", "covers", "fixed ms", "µs / record", "R²",
                  f"fixed ms, ≤ {SMALL:,} records", *(f"ms at {n:,}" for n in at)],
                 ([("**" + t["stage"] + "**") if t["column"] == "trigger" else t["stage"],
                   t["what"], number(t["fixed_ms"], ",.1f"), number(t["us_per_record"], ",.2f"),
                   number(t["r2"], ",.2f"), number(t["small_fixed_ms"], ",.1f"),
                   *(number(t["fixed_ms"] + t["us_per_record"] * n / 1000) for n in at)]
                  for t in table if t["column"] not in tasks), "llrrrr" + "r" * len(at)),
             "", *tables.markdown(
                 ["task part (core-ms, summed over the stage's tasks)", "fixed ms",
                  "µs / record", "R²"],
                 ([t["stage"], number(t["fixed_ms"], ",.1f"), number(t["us_per_record"], ",.2f"),
                   number(t["r2"], ",.2f")] for t in table if t["column"] in tasks), "lrrr")]
    total = next(t for t in table if t["column"] == "trigger")
    f_ms, b_us = total["fixed_ms"], total["us_per_record"]
    capacity = 1e6 / b_us if b_us > 0 else float("inf")
    d = f_ms / (1 - load)
    small = [r for r in used if r["records"] <= SMALL]
    if len(small) > 2:
        sf, sb, sr2 = fit([r["records"] for r in small], [r["trigger"] for r in small])
        lines += ["", f"Total over the {len(small)} batches of at most {SMALL:,} records alone: "
                  f"fixed {sf:,.0f} ms + {sb * 1000:,.1f} µs per record (R² {sr2:.2f})."]
    lines += ["", f"Total: fixed {f_ms:,.0f} ms per batch + {b_us:,.1f} µs per record: capacity "
              f"{capacity:,.0f} records/s; at {load:.0%} load ({load * capacity:,.0f} records/s) "
              f"back-to-back batches last d = F / (1 − ρ) = {d:,.0f} ms, latency ≈ 1.5 d = "
              f"{1.5 * d:,.0f} ms."]
    return lines


# -- files --------------------------------------------------------------------------------------

def write_runs(path: Path, rows: Sequence[Mapping[str, Any]]) -> None:
    write_csv(path, [{k: round(v, 3) if isinstance(v, float) else v for k, v in r.items()}
                     for r in rows])


def read_runs(path: Path) -> list[dict[str, Any]]:
    return [{k: (v if k == "trigger_start" else float(v or "nan")) for k, v in r.items()}
            for r in read_rows(path)]


def session_dir(workdir: Path) -> Path:
    """The run's one session directory (``bench-live-*``, holding app.log)."""
    found = sorted(p.parent for p in workdir.glob("bench-live-*/app.log"))
    if len(found) != 1:
        raise SystemExit(f"{workdir}: expected one bench-live-*/app.log, found {len(found)}")
    return found[0]


def summaries_of(workdir: Path) -> list[dict[str, Any]]:
    """The run's BatchSummary records: those ``run`` captured while the run went on
    (``summaries.jsonl``), else the metrics topic of the run's broker, started again (when the
    run kept its topics), else the phases' ``batches.csv`` (no warm-up or backlog batches)."""
    captured = workdir / SUMMARIES
    if captured.exists():
        return [json.loads(line) for line in captured.read_text().splitlines() if line]
    import config
    from kafkaio import broker
    from kafkaio.dump import by_schema
    from kafkaio.errors import TopicMissing

    prefix = session_dir(workdir).name
    state = workdir / "broker-state"
    info, _ = broker.start(state, port=0)
    try:
        topic = f"{prefix}.{config.defaults().topic('metrics')}"
        got = by_schema({"bootstrap.servers": info.address}, topic).get("BatchSummary", [])
        return [s for s in got if s["app_id"] == prefix]
    except TopicMissing:
        print(f"{topic} is gone; the phases' batches.csv instead", file=sys.stderr)
    finally:
        broker.stop(state)
    return [{"batch_id": int(r["batch_id"]), "records": int(r["records"]), "items": "",
             "start_time": int(r["start_ms"]), "job_ms": float(r["job_ms"]),
             "write_ms": float(r["write_ms"]), "duration_ms": float(r["duration_ms"]),
             "join_stage_ms": float(r["join_stage_ms"])}
            for r in read_rows(workdir / "bench-out" / "batches.csv")]


class Capture(threading.Thread):
    """Follows the metrics topic of the run in ``workdir`` (once its broker and app run) and
    appends every BatchSummary of its app to ``workdir/summaries.jsonl``, until ``done``."""

    def __init__(self, workdir: Path):
        super().__init__(daemon=True)
        self.workdir, self.done = workdir, threading.Event()

    def run(self) -> None:
        import config
        from kafkaio import broker
        from kafkaio.clients import consumer as committed_consumer
        from kafkaio.dump import decoded_records

        while not self.done.wait(1.0):
            apps = list(self.workdir.glob("bench-live-*/app.log"))
            info = broker.status(self.workdir / "broker-state")
            if apps and info is not None:
                break
        else:
            return
        prefix = apps[0].parent.name
        consumer = committed_consumer({"bootstrap.servers": info.address},
                                      group_id=prefix + "-costs")
        consumer.subscribe([f"{prefix}.{config.defaults().topic('metrics')}"])
        with open(self.workdir / SUMMARIES, "a") as out:
            while not self.done.is_set():
                for name, rec in decoded_records(consumer.consume(500, 1.0)):
                    if name == "BatchSummary" and rec["app_id"] == prefix:
                        out.write(json.dumps(rec, default=str) + "\n")
                out.flush()
        consumer.close()


def analyse(workdir: Path, out: Path) -> list[dict[str, Any]]:
    lines = [line for f in event_files(workdir / "eventlog") for line in read_lines(f)]
    totals = app_totals((session_dir(workdir) / "app.log").read_text().splitlines())
    rows = batch_rows(lines, summaries_of(workdir), totals)
    out.mkdir(parents=True, exist_ok=True)
    write_runs(out / "runs.csv.gz", rows)
    print(f"{len(rows)} batches -> {out / 'runs.csv.gz'}")
    return rows


EVENTLOG_TOML = """# Spark's event log, uncompressed, for bench.studies.cost_model
[spark.conf]
"spark.eventLog.enabled" = "true"
"spark.eventLog.dir" = "file://{dir}"
"spark.eventLog.compress" = "false"
"""


def run_bench(workdir: Path, bench_args: Sequence[str], tree: Path = REPO) -> None:
    """``geops bench live`` of the checkout ``tree`` (e.g. ``git archive`` of a commit, run
    with this interpreter and ``PYTHONPATH`` at the tree) with the event log on, keeping its
    work dir (``workdir``)."""
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "eventlog").mkdir(exist_ok=True)
    toml = workdir / "eventlog.toml"
    toml.write_text(EVENTLOG_TOML.format(dir=(workdir / "eventlog").resolve()))
    argv = [sys.executable, "-m", "cli.main", "bench", "live", "--config", str(toml),
            "--workdir", str(workdir), "--out", str(workdir / "bench-out"), *bench_args]
    print("$", " ".join(argv), flush=True)
    (workdir / SUMMARIES).unlink(missing_ok=True)
    capture = Capture(workdir)
    capture.start()
    try:   # the run drops its topics at the end: its BatchSummary records are read meanwhile
        subprocess.run(argv, check=True, cwd=tree, env={**os.environ, "PYTHONPATH": str(tree)})
    finally:
        capture.done.set()
        capture.join(30)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.studies.cost_model",
                                     description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="geops bench live with the event log on, then analyse")
    r.add_argument("--workdir", type=Path, required=True)
    r.add_argument("--out", type=Path, required=True)
    r.add_argument("--max-rate", default="7000")
    r.add_argument("--levels", default="3,10,30,60,90,130")
    r.add_argument("--duration", default="20s")
    r.add_argument("--backlog", default="100000")
    r.add_argument("--tree", type=Path, default=REPO, help="the checkout to run (this one)")
    a = sub.add_parser("analyse", help="runs.csv.gz and the table from a kept work dir")
    a.add_argument("workdir", type=Path)
    a.add_argument("--out", type=Path, required=True)
    f = sub.add_parser("fit", help="the table from runs.csv.gz")
    f.add_argument("runs", type=Path)
    for p in (r, a, f):
        p.add_argument("--skip", type=int, default=3, help="warm-up batches left out (3)")
    args = parser.parse_args(argv)
    if args.cmd == "run":
        run_bench(args.workdir, ["--max-rate", args.max_rate, "--levels", args.levels,
                                 "--duration", args.duration, "--backlog", args.backlog],
                  args.tree.resolve())
    if args.cmd in ("run", "analyse"):
        rows = analyse(args.workdir, args.out)
    else:
        rows = read_runs(args.runs)
    print("\n".join(markdown(*cost_table(rows, args.skip))))


if __name__ == "__main__":
    main()
