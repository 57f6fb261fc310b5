"""Two versions of the app read the same workload, interleaved: backlog throughput and live
latency, each version's repeats side by side, and the ratio new/old with its spread.

Each tree is a checkout of geops, run as ``bench.harness.trees`` runs one. Per repeat and tree,
on one local broker with topics of their own:

- **backlog**: the subscriptions and ``--publications`` publications are written first, then the
  app drains them at ``--per-trigger`` records per batch; throughput = the records of the
  batches after the first third / the time from the end of the first third's last batch to the
  end of the last batch (the first batches carry the query's warm-up);
- **live**: the app runs, 1,000 publications warm it up, then ``--rate`` publications/s are
  written for ``--seconds``; latency = match time - event time of their Match records.

Usage: ``python -m bench.studies.read_ab --tree old=/work/wt-old --tree new=/work/main --out DIR``.
Prints one table; writes ``runs.csv.gz`` (one row per run) to ``--out``.
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
from bench.harness.trees import app_topics, generate, geops, trees_of
from kafkaio import broker
from kafkaio.dump import by_schema
from kafkaio.sender import Sender, produce_records
from schemas import codec
from schemas.records import publication_records


def backlog_rate(batches: list[dict]) -> float:
    """Records per second over the batches after the first third (see the module)."""
    cut = len(batches) // 3
    head, tail = batches[:cut] or batches[:1], batches[cut:] if cut else batches[1:]
    span = (tail[-1]["end_time"] - head[-1]["end_time"]) / 1000
    return sum(b["records"] for b in tail) / span if span > 0 else float("nan")


def run_one(tree: Path, kind: str, strategy: str, args: argparse.Namespace, address: str,
            work: Path) -> dict:
    prefix = f"ab{uuid.uuid4().hex[:8]}-"
    log = work / f"{prefix}{kind}.log"
    env, cfg = app_topics(tree, address, work, prefix, args.workload, log)
    pubs = list(publication_records(args.pubs))
    app = ["app", "--strategy", strategy, "--join", "STAL", "--workers", "2",
           "--partitions", "64", "--master", "local[2]", "--trigger", "500ms"]
    c = codec()
    if kind == "backlog":
        produce_records(cfg.kafka_client(), cfg.topic("publications"), "Publication", pubs)
        geops(tree, env, *app, "--max-records-per-trigger", str(args.per_trigger),
              "--stop-after-idle", "5s", log=log)
        batches = summaries(cfg, "geops")
        return {"records": sum(b["records"] for b in batches), "batches": len(batches),
                "rate": backlog_rate(batches)}
    proc = geops(tree, env, *app, "--stop-after-idle", "6s", log=log, wait=False)
    sender = Sender(cfg.kafka_client())
    topic = cfg.topic("publications")
    warm = pubs[:1000]
    deadline = time.monotonic() + 300
    while not summaries(cfg, "geops"):  # the app answers once its query runs
        for rec in warm[:50]:
            rec["event_time"] = int(time.time() * 1000)
            sender.send(topic, c.encode("Publication", rec), key=b"w")
        sender.flush()
        if time.monotonic() > deadline or proc.poll() is not None:
            raise RuntimeError(f"the app did not start (log {log})")
        time.sleep(2)
    started = int(time.time() * 1000)
    paced = Sender(cfg.kafka_client(), rate=args.rate)
    n = int(args.rate * args.seconds)
    for i in range(n):
        rec = pubs[1000 + i % (len(pubs) - 1000)]
        rec["event_time"] = int(time.time() * 1000)
        paced.send(topic, c.encode("Publication", rec), key=str(i).encode())
    paced.flush()
    proc.wait(300)
    lat = np.array([m["match_time"] - m["event_time"] for m in
                    by_schema(cfg.kafka_client(), cfg.topic("matches")).get("Match", [])
                    if m["event_time"] >= started], float)
    return {"records": n, "matches": len(lat),
            "p50": float(np.percentile(lat, 50)) if len(lat) else float("nan"),
            "p99": float(np.percentile(lat, 99)) if len(lat) else float("nan")}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.studies.read_ab",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", action="append", required=True, metavar="NAME=DIR",
                        help="a version to run (twice or more; the first is the baseline)")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--strategies", default="sPIS,RIsPS")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--publications", type=int, default=60_000)
    parser.add_argument("--per-trigger", type=int, default=20_000)
    parser.add_argument("--rate", type=float, default=2_000)
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--live-strategies", default="sPIS")
    args = parser.parse_args(argv)
    trees = trees_of(args.tree)
    args.out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="read-ab-"))
    args.workload = work / "workload"
    generate(args.workload, args.publications)
    from geops.avro_input import read_publications_avro

    args.pubs, _, _ = read_publications_avro(args.workload / "publications.avro")
    info, _ = broker.start(work / "broker", port=0)
    rows = []
    try:
        plan = [("backlog", s) for s in args.strategies.split(",")]
        plan += [("live", s) for s in args.live_strategies.split(",") if s]
        for rep in range(args.repeats):
            for kind, strategy in plan:
                order = trees if rep % 2 == 0 else trees[::-1]  # interleaved, alternating
                for name, tree in order:
                    t0 = time.time()
                    got = run_one(tree, kind, strategy, args, info.address, work)
                    row = {"repeat": rep, "kind": kind, "strategy": strategy, "tree": name,
                           "load": os.getloadavg()[0], "seconds": round(time.time() - t0),
                           **got}
                    rows.append(row)
                    print(row, flush=True)
    finally:
        broker.stop(work / "broker")
    write_csv(args.out / "runs.csv.gz", rows, sorted(columns(rows)))
    base = trees[0][0]
    print(f"\n{'kind':<8} {'strategy':<7} {'measure':<8} " +
          " ".join(f"{n:>22}" for n, _ in trees) + "   ratio to " + base)
    for kind, strategy in plan:
        for measure in (("rate",) if kind == "backlog" else ("p50", "p99")):
            vals = {n: [r[measure] for r in rows if r["kind"] == kind and r["strategy"] ==
                        strategy and r["tree"] == n] for n, _ in trees}
            cells = " ".join(f"{' / '.join(f'{v:,.0f}' for v in vals[n]):>22}" for n, _ in trees)
            ratios = [statistics.median(vals[n]) / statistics.median(vals[base])
                      for n, _ in trees[1:]]
            print(f"{kind:<8} {strategy:<7} {measure:<8} {cells}   "
                  + " ".join(f"{x:.2f}" for x in ratios))
    return 0


if __name__ == "__main__":
    sys.exit(main())
