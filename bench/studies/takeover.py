"""How long a standby (``geops app --standby``) takes from a fault of the active app's driver to
its own first answer, while a producer writes publications throughout.

A broker of its own, ``geops generate`` and ``geops subscribe`` of N subscriptions, an active
app (exactly-once) that answers; then ``--repeats`` rounds, each of a kill (SIGKILL of the
active app's process group) and a freeze (SIGSTOP), in turn: a standby is started and, once it
says it is ready, the active app is hit; the standby takes over and is the active app of the
next fault. After a freeze the frozen process is let go on (SIGCONT) and must end with exit
code 7 (replaced) having written nothing more. First answer = the first Match record after
the fault that a read_committed consumer receives; the phases come from the standby's log
(seconds from the fault): the lease taken, the query started.

Usage: ``python -m bench.studies.takeover --subscriptions 10000 --repeats 3 --out DIR``.
Prints one table; writes ``runs.csv.gz`` (one row per fault) to ``--out``.
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

from bench.harness.restarts import ROOT, Stream, first_answer, on_own_broker, phases
from bench.harness.trees import app_topics
from config.exitcodes import EXIT_REPLACED
from geops.avro_input import read_publications_avro
from schemas.records import publication_records

# (column, the standby's log line that ends the phase); seconds from the fault
TAKEOVER_PHASES = (("lease_s", r"took the lease of app"), ("query_s", r"streaming from "))
READY = "standby: ready to take over"


def start_app(env: dict[str, str], log: Path, args, standby: bool) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "cli.main", "app", "--master", "local[2]", "--workers", "2",
         "--strategy", args.strategy, "--partitions", "16", "--trigger", "0s",
         "--max-records-per-trigger", str(args.per_batch), "--delivery", "exactly-once",
         *(["--standby"] if standby else [])],
        cwd=ROOT, env=env, stdout=open(log, "w"),
        stderr=subprocess.STDOUT, start_new_session=True)


def hit(proc: subprocess.Popen, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, sig)


def wait_ready(proc: subprocess.Popen, log: Path, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while READY not in log.read_text(errors="replace"):
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"the standby did not get ready; see {log}")
        time.sleep(0.2)


def fault(kind: str, active: subprocess.Popen, standby: subprocess.Popen, log: Path,
          cfg, args) -> dict:
    """Hit ``active`` with ``kind`` and measure ``standby``'s takeover; a frozen ``active`` is
    let go on afterwards and must end as replaced."""
    load = os.getloadavg()[0]
    hit(active, signal.SIGKILL if kind == "kill" else signal.SIGSTOP)
    at = time.time()
    answer = first_answer(cfg, standby, at, args.timeout)
    row = {"fault": kind, "first_answer_s": round(answer, 2), "load": round(load, 1),
           **phases(log.read_text(errors="replace"), at, TAKEOVER_PHASES)}
    if kind == "freeze":
        hit(active, signal.SIGCONT)
        row["old_exit"] = active.wait(60)
        if row["old_exit"] != EXIT_REPLACED:
            raise RuntimeError(f"the frozen app ended with {row['old_exit']}, not "
                               f"{EXIT_REPLACED}")
    hit(active, signal.SIGKILL)
    active.wait(60)
    return row


def run(args, address: str, work: Path) -> list[dict]:
    """The active app, then the faults in turn, each taken over by a new standby."""
    workload = work / "w"
    subprocess.run([sys.executable, "-m", "cli.main", "generate", "--out", str(workload),
                    "--subscriptions", str(args.subscriptions), "--publications", "2000",
                    "--seed", "7"], check=True, stdout=subprocess.DEVNULL, cwd=ROOT)
    env, cfg = app_topics(ROOT, address, work, "takeover-", workload, work / "setup.log")
    pubs, _, _ = read_publications_avro(workload / "publications.avro")
    stream = Stream(cfg, list(publication_records(pubs)), args.rate)
    stream.start()
    rows: list[dict] = []
    active = start_app(env, work / "active.log", args, standby=False)
    try:
        first_answer(cfg, active, time.time(), args.timeout)
        for i in range(2 * args.repeats):
            log = work / f"standby-{i}.log"
            standby = start_app(env, log, args, standby=True)
            wait_ready(standby, log, args.timeout)
            row = {"round": i // 2, **fault("kill" if i % 2 == 0 else "freeze", active,
                                            standby, log, cfg, args)}
            rows.append(row)
            print(row, flush=True)
            active = standby
    finally:
        hit(active, signal.SIGKILL)
        stream.done.set()
        stream.join(30)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.studies.takeover",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--subscriptions", type=int, default=10000)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--strategy", default="sPIS")
    parser.add_argument("--repeats", type=int, default=3, help="rounds of a kill and a freeze")
    parser.add_argument("--rate", type=float, default=50.0, help="publications per second")
    parser.add_argument("--per-batch", type=int, default=100,
                        help="--max-records-per-trigger of the app")
    parser.add_argument("--timeout", type=float, default=300.0)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    rows = on_own_broker("takeover-", args.out, lambda address, work: run(args, address, work))
    print(f"{'fault':>8} {'first answer s':>26} {'median':>7} "
          + " ".join(f"{name:>22}" for name, _ in TAKEOVER_PHASES) + "   (one value per round)")
    for kind in ("kill", "freeze"):
        mine = [r for r in rows if r["fault"] == kind]
        cells = [" / ".join(f"{r.get(k, float('nan')):.1f}" for r in mine)
                 for k in ("first_answer_s", *(name for name, _ in TAKEOVER_PHASES))]
        median = np.median([r["first_answer_s"] for r in mine]) if mine else float("nan")
        print(f"{kind:>8} {cells[0]:>26} {median:>7.1f} "
              + " ".join(f"{c:>22}" for c in cells[1:]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
