"""What Spark itself costs a micro-batch on this machine, with none of the app's work.

Two measurements, each in a Spark session of its own (``local[2]``, Python tasks over a Unix
domain socket as the app's defaults have them):

- **a trigger**: a micro-batch query of ten rows a batch (``rate-micro-batch``), trigger 0 and a
  ``foreachBatch`` that does nothing, for ``--seconds``; the medians of its progress events'
  parts, with the checkpoint written through Hadoop's default local file system and through the
  raw one (``spark.hadoop.fs.file.impl``, as the app's defaults set it);
- **a Python job**: ``--jobs`` jobs of two tasks that yield one row each (the shape of a small
  batch's join stage, one task per worker), collected as the app collects its join; the median
  of the whole and of its parts, from Spark's event log: the driver's Python until the job
  starts, the job's start to its first task's launch, the launch to the task's Python body, the
  body to the task's end, the last task's end to the job's end, and the job's end until
  ``collect`` returns.

The app's fixed cost per batch (``docs/results/live/costs``) cannot go below these two.

Usage: ``python -m bench.studies.spark_floor [--seconds 20] [--jobs 60] [--out FILE.md]``.
Takes about a minute.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.harness.tables import markdown

RAW = "org.apache.hadoop.fs.RawLocalFileSystem"
PARTS = ("latestOffset", "queryPlanning", "walCommit", "addBatch", "commitOffsets",
         "triggerExecution")
JOB_PARTS = ("driver until the job starts", "job start to task launch",
             "task launch to its Python", "Python to task end", "task end to job end",
             "job end to collect's return", "whole collect")


def session(**conf: str) -> Any:
    from pyspark.sql import SparkSession

    builder = (SparkSession.builder.master("local[2]").appName("geops-spark-floor")
               .config("spark.ui.enabled", "false")
               .config("spark.python.unix.domain.socket.enabled", "true")
               .config("spark.sql.streaming.checkpointFileManagerClass",
                       "org.apache.spark.sql.execution.streaming.checkpointing."
                       "FileSystemBasedCheckpointFileManager"))
    for key, value in conf.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def trigger_parts(work: Path, raw: bool, seconds: float) -> dict[str, float]:
    """Median ms of each part of a no-op micro-batch's trigger."""
    spark = session(**({"spark.hadoop.fs.file.impl": RAW} if raw else {}))
    rows = spark.readStream.format("rate-micro-batch").option("rowsPerBatch", 10).load()
    query = (rows.writeStream.foreachBatch(lambda df, batch: None)
             .option("checkpointLocation", str(work / "checkpoint"))
             .trigger(processingTime="0 seconds").start())
    time.sleep(seconds)  # a fixed span of batches is what is measured
    progress = query.recentProgress[5:]  # past the first batches' warm-up
    query.stop()
    spark.stop()
    return {p: statistics.median(e["durationMs"].get(p, 0) for e in progress) for p in PARTS}


def _noop(index: int, rows: Any) -> Any:
    yield index, time.time()


def job_parts(work: Path, jobs: int) -> dict[str, float]:
    """Median ms of each part of a two-task Python job, collected."""
    spark = session(**{"spark.eventLog.enabled": "true",
                       "spark.eventLog.dir": str(work), "spark.eventLog.compress": "false",
                       "spark.eventLog.rolling.enabled": "false"})
    sc = spark.sparkContext
    base = sc.parallelize(range(2), 2)
    timed = []
    for _ in range(jobs):
        t0 = time.time()
        out = base.mapPartitionsWithIndex(_noop).collect()
        timed.append((t0, min(t for _, t in out), max(t for _, t in out), time.time()))
    spark.stop()
    log = next(p for p in work.iterdir() if p.is_file() and "local-" in p.name)
    started: dict[int, float] = {}
    ended: dict[int, float] = {}
    tasks: dict[int, list[tuple[float, float]]] = {}
    for line in log.read_text().splitlines():
        event = json.loads(line)
        kind = event["Event"]
        if kind == "SparkListenerJobStart":
            started[event["Job ID"]] = event["Submission Time"]
        elif kind == "SparkListenerJobEnd":
            ended[event["Job ID"]] = event["Completion Time"]
        elif kind == "SparkListenerTaskEnd":
            info = event["Task Info"]
            tasks.setdefault(max(started), []).append((info["Launch Time"], info["Finish Time"]))
    rows = []
    for (t0, first, last, t1), job in zip(timed, sorted(started), strict=True):
        launch = min(t[0] for t in tasks[job])
        finish = max(t[1] for t in tasks[job])
        rows.append((started[job] - t0 * 1e3, launch - started[job], first * 1e3 - launch,
                     finish - last * 1e3, ended[job] - finish, t1 * 1e3 - ended[job],
                     (t1 - t0) * 1e3))
    rows = rows[5:]  # past the Python workers' start
    return {name: statistics.median(r[i] for r in rows) for i, name in enumerate(JOB_PARTS)}


def _child(part: str, seconds: float, jobs: int) -> dict[str, float]:
    """Run one measurement in a new process (a session's file system is fixed at its start)."""
    out = subprocess.run([sys.executable, "-m", "bench.studies.spark_floor", "--part", part,
                          "--seconds", str(seconds), "--jobs", str(jobs)],
                         capture_output=True, text=True, check=False,
                         env={**os.environ, "PYSPARK_PYTHON": sys.executable})
    if out.returncode != 0:
        raise SystemExit(f"spark_floor --part {part} failed:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.studies.spark_floor",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=20.0,
                        help="how long each micro-batch query runs (20)")
    parser.add_argument("--jobs", type=int, default=60, help="Python jobs timed (60)")
    parser.add_argument("--out", type=Path, help="also write the tables to this Markdown file")
    parser.add_argument("--part", choices=("checksum", "raw", "job"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.seconds <= 5 or args.jobs <= 5:
        parser.error("--seconds and --jobs must be above 5 (the first five are warm-up)")
    if args.part:
        with tempfile.TemporaryDirectory(prefix="geops-floor-") as tmp:
            work = Path(tmp)
            result = (job_parts(work, args.jobs) if args.part == "job"
                      else trigger_parts(work, args.part == "raw", args.seconds))
        print(json.dumps(result))
        return
    fs = {name: _child(name, args.seconds, args.jobs) for name in ("checksum", "raw")}
    job = _child("job", args.seconds, args.jobs)
    lines = [*markdown(["trigger part (median ms)", "checksum file system", "raw file system"],
                       [[p, f"{fs['checksum'][p]:.1f}", f"{fs['raw'][p]:.1f}"] for p in PARTS],
                       "lrr"),
             "",
             *markdown(["two-task Python job (median ms)", "ms"],
                       [[p, f"{job[p]:.1f}"] for p in JOB_PARTS], "lr")]
    print("\n".join(lines))
    if args.out:
        args.out.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
