"""How fast the app answers the first publications after it says it is ready, against the
publications that follow, for one or more versions of the app, interleaved.

Per repeat and tree, on one local broker with topics of their own: the subscriptions are
loaded, ``geops app`` starts, and as soon as its log says ``ready:`` a producer writes ``--rate``
publications/s for ``--seconds`` (event time = time of sending). Latency = the Match record's
match time - event time, in the first ``--head`` seconds of the stream and in the rest.

Usage: ``python -m bench.studies.cold_start --tree old=/work/wt-old --tree new=/work/main
--out DIR``. Prints one table; writes ``runs.csv.gz`` (one row per run) to ``--out``.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import tempfile
import time
import uuid
from pathlib import Path

import numpy as np

from bench.harness.csv_tables import columns, write_csv
from bench.harness.trees import app_topics, generate, geops, trees_of
from geops.avro_input import read_publications_avro
from kafkaio import broker
from kafkaio.dump import by_schema
from kafkaio.sender import Sender
from schemas import codec
from schemas.records import publication_records

READY = "ready: the query has started"


def run_one(tree: Path, args: argparse.Namespace, address: str, work: Path) -> dict:
    """One app from ``tree``, started cold: latency of the head and of the rest."""
    prefix = f"cold{uuid.uuid4().hex[:8]}-"
    log = work / f"{prefix}app.log"
    env, cfg = app_topics(tree, address, work, prefix, args.workload, log)
    started = time.monotonic()
    proc = geops(tree, env, "app", "--strategy", args.strategy, "--join", "STAL", "--workers",
                 "2", "--partitions", "64", "--master", "local[2]", "--trigger", "500ms",
                 "--stop-after-idle", "6s", log=log, wait=False)
    assert proc is not None
    try:
        while READY not in log.read_text(errors="replace"):
            if proc.poll() is not None or time.monotonic() - started > 300:
                raise RuntimeError(f"the app did not get ready (log {log})")
            time.sleep(0.1)
        ready_s = time.monotonic() - started
        c = codec()
        topic = cfg.topic("publications")
        paced = Sender(cfg.kafka_client(), rate=args.rate)
        first = int(time.time() * 1000)
        for i in range(int(args.rate * args.seconds)):
            rec = args.pubs[i % len(args.pubs)]
            rec["event_time"] = int(time.time() * 1000)
            paced.send(topic, c.encode("Publication", rec), key=str(i).encode())
        paced.flush()
        paced.close()
        proc.wait(300)
    finally:  # the app and its JVM, also when the run failed
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    matches = by_schema(cfg.kafka_client(), cfg.topic("matches")).get("Match", [])
    event = np.array([m["event_time"] for m in matches], float)
    lat = np.array([m["match_time"] - m["event_time"] for m in matches], float)
    head = event < first + args.head * 1000
    row = {"ready_s": round(ready_s, 1), "matches": len(lat)}
    for name, part in (("head", lat[head]), ("rest", lat[~head])):
        for q in (50, 99):
            row[f"{name}_p{q}"] = float(np.percentile(part, q)) if len(part) else float("nan")
    row["head_max"] = float(lat[head].max()) if head.any() else float("nan")
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.studies.cold_start",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", action="append", required=True, metavar="NAME=DIR",
                        help="a version to run (the first is the baseline)")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--strategy", default="sPIS")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--rate", type=float, default=2_000)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--head", type=float, default=3,
                        help="seconds of the stream that count as its head")
    args = parser.parse_args(argv)
    trees = trees_of(args.tree)
    args.out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="cold-start-"))
    args.workload = work / "workload"
    generate(args.workload, 20_000)
    pubs, _, _ = read_publications_avro(args.workload / "publications.avro")
    args.pubs = list(publication_records(pubs))
    info, _ = broker.start(work / "broker", port=0)
    rows = []
    try:
        for rep in range(args.repeats):
            for name, tree in trees if rep % 2 == 0 else trees[::-1]:  # interleaved
                row = {"repeat": rep, "tree": name, "load": os.getloadavg()[0],
                       **run_one(tree, args, info.address, work)}
                rows.append(row)
                print(row, flush=True)
    finally:
        broker.stop(work / "broker")
    write_csv(args.out / "runs.csv.gz", rows, sorted(columns(rows)))
    print(f"\n{'tree':<12} {'ready s':>10} {'head p50':>16} {'head p99':>16} "
          f"{'rest p50':>16} {'rest p99':>16}   (ms, one value per repeat)")
    for name, _ in trees:
        mine = [r for r in rows if r["tree"] == name]
        cells = [" / ".join(f"{r[k]:,.0f}" for r in mine)
                 for k in ("head_p50", "head_p99", "rest_p50", "rest_p99")]
        ready = " / ".join(f"{r['ready_s']:.1f}" for r in mine)
        print(f"{name:<12} {ready:>10} " + " ".join(f"{c:>16}" for c in cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
