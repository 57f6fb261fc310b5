"""How long a restarted micro-batch app takes from its process start to its first answer, from
the static side's snapshot (``app.static_snapshot`` on) and from the subscriptions topic (off),
interleaved on one checkpoint, while a producer writes publications throughout.

Per size: a broker of its own, ``geops generate`` and ``geops subscribe`` of N subscriptions,
a first app that builds the static side and its snapshot, is killed (SIGKILL) after its first
answers; then ``--repeats`` pairs of restarts, on and off in turn (the order alternating),
each killed after its first answer, with ``--changes`` subscription changes made while the
app is down before each. First answer = the first Match record that reaches a consumer after
the process started; the phases come from the app's log (seconds from the process start):
Spark started (the snapshot checked, or found off), the subscriptions known to the driver
(the snapshot's, or the topic scanned), the static side in the workers, warmed up, the query
started; the rest up to the first answer is the query's first batch.

Usage: ``python -m bench.studies.restart --sizes 10000 --repeats 3 --out DIR``. Prints one
table; writes ``runs.csv.gz`` (one row per restart) to ``--out``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from app.main import checkpoint_dir
from app.static.snapshot import CURRENT, root_of
from bench.harness.restarts import PHASES, ROOT, Stream, first_answer, on_own_broker, phases
from bench.harness.trees import app_topics
from geops.avro_input import read_publications_avro
from geops.workload import generate_workload
from kafkaio.sender import Sender
from schemas import codec
from schemas.records import publication_records, subscription_records

FIRST_ID = 2_000_000_000  # of the subscriptions added while the app is down


def change_while_down(cfg, n: int, seed: int, next_id: int) -> None:
    """``n`` new subscriptions and ``n // 4`` deletes of those the change before added."""
    if n <= 0:
        return
    c = codec()
    fresh = generate_workload(seed=seed, subscriptions=n, publications=1).subscriptions
    fresh.ids[:] = np.arange(next_id, next_id + n)
    sender = Sender(cfg.kafka_client())
    for rec in subscription_records(fresh):
        sender.send(cfg.topic("subscriptions"), c.encode("Subscription", rec),
                    key=str(rec["id"]).encode())
    earlier = next_id - n  # the ones the change before added
    for sid in range(earlier, earlier + n // 4) if earlier >= FIRST_ID else ():
        sender.send(cfg.topic("subscriptions"), None, key=str(sid).encode())
    sender.close()


def start_app(env: dict[str, str], snapshot: str, log: Path, args) -> tuple[subprocess.Popen,
                                                                              float]:
    started = time.time()
    proc = subprocess.Popen(
        [sys.executable, "-m", "cli.main", "app", "--master", "local[2]", "--workers", "2",
         "--strategy", args.strategy, "--partitions", "16", "--trigger", "0s",
         "--max-records-per-trigger", str(args.per_batch), "--static-snapshot", snapshot],
        cwd=ROOT, env=env, stdout=open(log, "w"),  # noqa: SIM115 - the child keeps it
        stderr=subprocess.STDOUT, start_new_session=True)
    return proc, started


def kill(proc: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(60)


def run_size(size: int, args, address: str, work: Path) -> list[dict]:
    """The first app, then the interleaved restarts, on one checkpoint."""
    workload = work / f"w{size}"
    subprocess.run([sys.executable, "-m", "cli.main", "generate", "--out", str(workload),
                    "--subscriptions", str(size), "--publications", "2000", "--seed", "7"],
                   check=True, stdout=subprocess.DEVNULL, cwd=ROOT)
    prefix = f"restart{size}-"
    env, cfg = app_topics(ROOT, address, work, prefix, workload, work / f"{prefix}setup.log")
    pubs, _, _ = read_publications_avro(workload / "publications.avro")
    stream = Stream(cfg, list(publication_records(pubs)), args.rate)
    stream.start()
    rows = []
    try:
        proc, started = start_app(env, "on", work / f"{prefix}first.log", args)
        first_answer(cfg, proc, started, args.timeout)
        current = root_of(checkpoint_dir(cfg)) / CURRENT
        while not current.exists():
            time.sleep(0.2)
        kill(proc)
        for rep in range(args.repeats):
            for mode in (("on", "off") if rep % 2 == 0 else ("off", "on")):
                change_while_down(cfg, args.changes, seed=100 + len(rows),
                                  next_id=FIRST_ID + len(rows) * args.changes)
                log = work / f"{prefix}{rep}-{mode}.log"
                load = os.getloadavg()[0]
                proc, started = start_app(env, mode, log, args)
                try:
                    answer = first_answer(cfg, proc, started, args.timeout)
                finally:
                    kill(proc)
                row = {"subscriptions": size, "repeat": rep, "snapshot": mode,
                       "first_answer_s": round(answer, 2), "load": round(load, 1),
                       **phases(log.read_text(errors="replace"), started)}
                rows.append(row)
                print(row, flush=True)
    finally:
        stream.done.set()
        stream.join(30)
    return rows


def index_cost(n: int) -> None:
    """What keeping a partition's built index would save over keeping its payload: decode and
    build from the payload, against unpickling the built index (``PartitionIndex``), for a
    partition of ``n`` subscriptions."""
    import pickle

    from geops.index.partition import PartitionIndex
    from geops.strategies import payload

    subs = generate_workload(seed=7, subscriptions=n, publications=1).subscriptions
    data = payload.encode(subs)
    t0 = time.perf_counter()
    index = PartitionIndex(payload.decode(data)[0], tree=True)
    t1 = time.perf_counter()
    kept = pickle.dumps(index)
    t2 = time.perf_counter()
    pickle.loads(kept)
    t3 = time.perf_counter()
    print(f"{n:,} subscriptions: payload {len(data):,} bytes, decoded and indexed in "
          f"{t1 - t0:.2f} s; the index pickled {len(kept):,} bytes ({len(kept) / len(data):.1f} "
          f"x), unpickled in {t3 - t2:.2f} s ({(t3 - t2) / (t1 - t0):.2f} x)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.studies.restart",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000", help="subscriptions, comma-separated")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--strategy", default="sPIS")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--rate", type=float, default=50.0, help="publications per second")
    parser.add_argument("--per-batch", type=int, default=100,
                        help="--max-records-per-trigger of the app")
    parser.add_argument("--changes", type=int, default=100,
                        help="subscriptions added while the app is down, before each restart")
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--index-cost", type=int, default=0, metavar="N",
                        help="only compare keeping a payload with keeping the built index of "
                             "a partition of N subscriptions")
    args = parser.parse_args(argv)
    if args.index_cost:
        index_cost(args.index_cost)
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    rows = on_own_broker("restart-", args.out, lambda address, work: [
        row for size in (int(s) for s in args.sizes.split(","))
        for row in run_size(size, args, address, work)])
    print(f"{'subscriptions':>13} {'snapshot':>8} {'first answer s':>22} "
          + " ".join(f"{name:>16}" for name, _ in PHASES) + "   (one value per repeat)")
    for size in sorted({r["subscriptions"] for r in rows}):
        for mode in ("on", "off"):
            mine = [r for r in rows if r["subscriptions"] == size and r["snapshot"] == mode]
            cells = [" / ".join(f"{r.get(k, float('nan')):.1f}" for r in mine)
                     for k in ("first_answer_s", *(name for name, _ in PHASES))]
            print(f"{size:>13,} {mode:>8} {cells[0]:>22} "
                  + " ".join(f"{c:>16}" for c in cells[1:]))
        on = [r["first_answer_s"] for r in rows if r["subscriptions"] == size
              and r["snapshot"] == "on"]
        off = [r["first_answer_s"] for r in rows if r["subscriptions"] == size
               and r["snapshot"] == "off"]
        if on and off:
            print(f"{'':>13} on / off median: {np.median(on) / np.median(off):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
