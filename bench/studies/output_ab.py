"""Who writes the matches, the driver or the join tasks (``app.output_from``), interleaved: the
driver's time per batch at two batch sizes, and the backlog's throughput.

Per repeat, delivery mode and batch size, the two settings run in turn (A B, then B A), each on
one local broker with topics of their own: the subscriptions and ``--publications``
publications are written first, then the app drains them at ``--per-trigger`` records per
batch. From each batch's ``BatchSummary`` (the batches after the first third; the first carry
the query's warm-up):

- ``batch``: ``duration_ms``, the batch function from its start to its summary;
- ``driver``: ``duration_ms - join_stage_ms``, the batch function less the busiest join task's
  own time: the driver's prepare, Spark's scheduling of the job and the collect's way back, the
  merge and the writes (with ``tasks`` the tasks' writes are in ``join_stage_ms``);
- ``after job``: ``duration_ms - job_ms``, from the collect's return to the summary (gather,
  merge, encode, produce, flush): what the costs page calls the write;
- ``rate``: records per second of those batches.

Usage: ``python -m bench.studies.output_ab --out DIR [--sizes 1000,20000] [--repeats 2]``.
Prints one table (each run's median, then the medians' ratio tasks/driver); writes
``runs.csv.gz`` (one row per run) to ``--out``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

import numpy as np

from bench.harness.csv_tables import columns, write_csv
from bench.harness.summaries import summaries
from bench.harness.trees import app_topics, generate, geops
from kafkaio import broker
from kafkaio.sender import produce_records
from schemas.records import publication_records

REPO = Path(__file__).resolve().parents[2]
SETTINGS = ("driver", "tasks")
MEASURES = ("batch", "driver", "after_job")


def batch_measures(batches: list[dict]) -> dict[str, float]:
    """Medians per batch (ms) and records/s over the batches after the first third."""
    tail = batches[len(batches) // 3:] or batches
    row = {"batches": len(tail), "records_median": statistics.median(b["records"] for b in tail)}
    per = {"batch": [b["duration_ms"] for b in tail],
           "driver": [b["duration_ms"] - b["join_stage_ms"] for b in tail],
           "after_job": [b["duration_ms"] - b["job_ms"] for b in tail]}
    row.update({k: float(np.median(v)) for k, v in per.items()})
    span = (tail[-1]["end_time"] - tail[0]["start_time"]) / 1000
    row["rate"] = sum(b["records"] for b in tail) / span if span > 0 else float("nan")
    return row


def run_one(setting: str, delivery: str, size: int, args: argparse.Namespace, address: str,
            work: Path) -> dict:
    """One backlog drained by the app with ``--output-from setting``."""
    prefix = f"oab{uuid.uuid4().hex[:8]}-"
    log = work / f"{prefix}{setting}.log"
    env, cfg = app_topics(REPO, address, work, prefix, args.workload, log)
    produce_records(cfg.kafka_client(), cfg.topic("publications"), "Publication",
                    list(publication_records(args.pubs)))
    geops(REPO, env, "app", "--strategy", "sPIS", "--join", "STAL", "--workers", "2",
          "--partitions", "64", "--master", "local[2]", "--delivery", delivery,
          "--output-from", setting, "--max-records-per-trigger", str(size),
          "--stop-after-idle", "5s", log=log)
    return batch_measures(summaries(cfg, "geops"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.studies.output_ab",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--sizes", default="1000,20000", help="records per batch")
    parser.add_argument("--deliveries", default="at-least-once,exactly-once")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--publications", type=int, default=160_000)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="output-ab-"))
    args.workload = work / "workload"
    generate(args.workload, args.publications)
    from geops.avro_input import read_publications_avro

    args.pubs, _, _ = read_publications_avro(args.workload / "publications.avro")
    plan = [(d, int(s)) for d in args.deliveries.split(",") for s in args.sizes.split(",")]
    # interleaved: per repeat and case each setting in turn, the order alternating by repeat
    runs = [(rep, delivery, size, setting) for rep in range(args.repeats)
            for delivery, size in plan
            for setting in (SETTINGS if rep % 2 == 0 else SETTINGS[::-1])]
    info, _ = broker.start(work / "broker", port=0)
    rows = []
    try:
        for rep, delivery, size, setting in runs:
            t0 = time.time()
            measured = run_one(setting, delivery, size, args, info.address, work)
            rows.append({"repeat": rep, "delivery": delivery, "size": size, "setting": setting,
                         "load": os.getloadavg()[0], "seconds": round(time.time() - t0),
                         **measured})
            print(rows[-1], flush=True)
    finally:
        broker.stop(work / "broker")
    write_csv(args.out / "runs.csv.gz", rows, sorted(columns(rows)))
    print(f"\n{'delivery':<14} {'size':>6} {'measure':<10} "
          + " ".join(f"{s:>22}" for s in SETTINGS) + "   tasks/driver")
    for delivery, size in plan:
        for measure in (*MEASURES, "rate"):
            vals = {s: [r[measure] for r in rows if r["delivery"] == delivery
                        and r["size"] == size and r["setting"] == s] for s in SETTINGS}
            cells = " ".join(f"{' / '.join(f'{v:,.0f}' for v in vals[s]):>22}"
                             for s in SETTINGS)
            ratio = statistics.median(vals["tasks"]) / statistics.median(vals["driver"])
            print(f"{delivery:<14} {size:>6} {measure:<10} {cells}   {ratio:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
