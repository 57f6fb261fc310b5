"""`geops bench delivery`: what exactly-once output costs against at-least-once.

For each repeat, each delivery mode in turn (the order alternates between repeats, so a drift
of the machine's load does not favour one mode), a session of its own: fresh topics, the
subscriptions loaded, `geops app --delivery MODE` started and warmed up, then

- **backlog**: publications offered at ``backlog_rate`` (several times what the app can take)
  for ``backlog_s``, so the app works through a backlog at its own pace; throughput = the
  records of the batches that processed them divided by the time from the first one's start
  to the last one's end;
- **live**: ``rate`` publications/s (default 70 % of the first at-least-once backlog
  throughput, then kept for every run) for ``duration_s``; latency from the publication's
  event time to (a) its Match record's Kafka timestamp (when the app produced it) and (b) when
  a read_committed reader received the summary of its batch: the moment the batch's output
  became visible (exactly-once: the transaction's commit; at-least-once: a few ms after its
  matches).

The machine's load average is recorded at the end of each phase. Results: ``runs.csv`` (one
row per run), ``latency_percentiles.csv`` (each run's latency distribution, 1 to 100 %),
``batches_raw.csv.gz`` (every live batch's summary and when it was seen) and a README table in
``out``.
"""

from __future__ import annotations

import os
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from bench.harness.csv_tables import write_csv
from bench.harness.deployment import AppOptions
from bench.harness.environment import Bench, BenchEnv
from bench.harness.latency import latency_summary
from bench.harness.machine import command_line, describe
from bench.harness.phase import nice, phase, publisher_for
from bench.harness.publisher import Log, now_ms
from bench.harness.tables import markdown, number
from geops.workload import generate_workload

MODES = ("at-least-once", "exactly-once")
# the latency distribution of each run, kept instead of every publication's latency
PERCENTILES = [*range(1, 100), 99.5, 99.9, 100]


@dataclass(frozen=True, kw_only=True)
class DeliverySpec(BenchEnv):
    out: Path
    repeats: int = 3
    write_batches: int = 200  # the write path alone: batches per run (0: not measured)
    write_only: bool = False  # only the write path, no app
    subscriptions: int = 10_000
    pool: int = 20_000
    seed: int = 5
    start_rate: float = 500.0
    backlog_rate: float = 20000.0
    backlog_s: float = 5.0
    rate: float | None = None
    duration_s: float = 60.0


@dataclass
class Run:
    repeat: int
    mode: str
    throughput: float
    backlog_records: int
    rate: float
    latency_ts: np.ndarray
    latency_visible: np.ndarray
    write_ms: float
    load_backlog: float
    load_live: float
    batches: list[dict] = field(default_factory=list)  # the live phase's BatchSummaries

    @property
    def to_visible_ms(self) -> float | None:
        """Median time from a batch's end_time (its matches flushed) to when a read_committed
        reader saw its summary: the summary, the commit (exactly-once) and the reader's poll."""
        d = [b["seen_ms"] - b["end_time"] for b in self.batches if b["records"] and "seen_ms" in b]
        return float(np.median(d)) if d else None

    def row(self) -> dict:
        ts, vis = latency_summary(self.latency_ts), latency_summary(self.latency_visible)
        return {"repeat": self.repeat, "mode": self.mode,
                "backlog_records": self.backlog_records,
                "backlog_throughput": round(self.throughput, 1), "live_rate": self.rate,
                "matched": ts["count"], "p50_ms": ts["p50"], "p99_ms": ts["p99"],
                "visible_p50_ms": vis["p50"], "visible_p99_ms": vis["p99"],
                "write_ms_mean": round(self.write_ms, 1),
                "end_to_visible_ms": self.to_visible_ms,
                "loadavg_backlog": self.load_backlog, "loadavg_live": self.load_live}


def visible_times(match_ts: np.ndarray, batches: list[dict]) -> np.ndarray:
    """When each Match became visible: the time a read_committed reader received the summary
    of its batch. Batches run one after another and a batch's matches are produced before its
    ``end_time``, after the previous batch's, so a match belongs to the first batch whose
    ``end_time`` is not before its Kafka timestamp."""
    done = sorted((b["end_time"], b["seen_ms"]) for b in batches if "seen_ms" in b)
    ends = np.array([e for e, _ in done], np.int64)
    seen = np.array([s for _, s in done], np.int64)
    idx = np.searchsorted(ends, match_ts, side="left")
    if len(done) == 0 or (idx >= len(done)).any():
        raise RuntimeError("a match without the summary of its batch")
    return seen[idx]


def one_run(bench: Bench, spec: DeliverySpec, workload, repeat: int, mode: str,
            rate: float | None, log: Log) -> Run:
    app = AppOptions(**{**spec.app.__dict__, "delivery": mode})
    s = bench.session(f"{mode}-{repeat}", workload, app=app)
    s.start_app()
    pub = publisher_for(s, workload)
    s.warm_up(pub, spec.start_rate)
    t0 = now_ms()
    log(f"{mode} #{repeat}: backlog, offering {spec.backlog_rate:,.0f} pub/s for "
        f"{spec.backlog_s:.0f} s")
    pub.offer(spec.backlog_rate, spec.backlog_s, pub.new_base())
    s.drain()
    load_backlog = os.getloadavg()[0]
    batches = [b for b in s.batches_between(t0, now_ms() + 1000) if b["records"]]
    records = sum(b["records"] for b in batches)
    span_ms = max(b["end_time"] for b in batches) - min(b["start_time"] for b in batches)
    throughput = records / max(span_ms / 1000, 1e-9)
    log(f"  backlog: {records:,} records in {span_ms / 1000:.1f} s = {throughput:,.0f} pub/s; "
        f"load average {load_backlog:.1f}")
    live_rate = rate if rate is not None else nice(0.7 * throughput)
    result = phase(s, pub, f"{mode} #{repeat} live", live_rate, spec.duration_s, log, 0.7)
    visible = visible_times(result.match_ms, result.batches)
    pub.close()
    write = [b["write_ms"] for b in result.batches if b["records"]]
    run = Run(repeat, mode, throughput, records, live_rate, result.latency,
              (visible - result.event_ms).astype(np.float64),
              float(np.mean(write)) if write else 0.0, load_backlog, result.load or 0.0,
              result.batches)
    vis = latency_summary(run.latency_visible)
    log(f"  visible: p50 {vis['p50']:,.0f} ms, p99 {vis['p99']:,.0f} ms")
    bench.end(s)
    return run


def main(spec: DeliverySpec, log: Log) -> None:
    runs: list[Run] = []
    rate = spec.rate
    writes: list[dict] = []
    with Bench(spec, log) as bench:
        if spec.write_batches:
            writes = write_path(bench.address, spec.kafka_properties, bench.workdir,
                                WriteSpec(batches=spec.write_batches, repeats=spec.repeats),
                                log)
        workload = generate_workload(seed=spec.seed, subscriptions=spec.subscriptions,
                                     publications=spec.pool)
        for repeat in range(1, 0 if spec.write_only else spec.repeats + 1):
            order = MODES if repeat % 2 else MODES[::-1]
            for mode in order:
                run = one_run(bench, spec, workload, repeat, mode, rate, log)
                rate = run.rate  # the first run's rate for every later one
                runs.append(run)
    write(spec, runs, writes, log)


def write(spec: DeliverySpec, runs: list[Run], writes: list[dict], log: Log) -> None:
    out = Path(spec.out)
    out.mkdir(parents=True, exist_ok=True)
    if not runs:
        (out / "README.md").write_text("\n".join([
            "# geops bench delivery: the write path alone", "",
            f"Machine: {describe()}.", "",
            "```", command_line(spec.command), "```", "",
            *write_table(writes), ""]))
    if writes:
        write_csv(out / "write_path.csv", writes)
    if not runs:
        log(f"wrote {out}/README.md and write_path.csv")
        return
    rows = [r.row() for r in runs]
    write_csv(out / "runs.csv", rows)
    write_csv(out / "latency_percentiles.csv", [
        {"repeat": r.repeat, "mode": r.mode, "percentile": q, "latency_ms": round(x),
         "visible_latency_ms": round(y)}
        for r in runs if len(r.latency_ts)
        for q, x, y in zip(PERCENTILES, np.percentile(r.latency_ts, PERCENTILES).tolist(),
                           np.percentile(r.latency_visible, PERCENTILES).tolist(), strict=True)],
        ["repeat", "mode", "percentile", "latency_ms", "visible_latency_ms"])
    cols = ["batch_id", "records", "start_time", "end_time", "seen_ms", "duration_ms", "job_ms",
            "write_ms"]
    write_csv(out / "batches_raw.csv.gz",
              [{"repeat": r.repeat, "mode": r.mode, **{c: b.get(c) for c in cols}}
               for r in runs for b in r.batches], ["repeat", "mode", *cols])
    lines = ["# geops bench delivery: exactly-once against at-least-once", "",
             f"Machine: {describe()}.", "",
             "```", command_line(spec.command), "```", "",
             *table(rows), "", *summary(rows), "", *write_table(writes), ""]
    (out / "README.md").write_text("\n".join(lines))
    log(f"wrote {out}/README.md, runs.csv, latency_percentiles.csv and batches_raw.csv.gz")


def table(rows: list[dict]) -> list[str]:
    """One row per repeat and delivery mode."""
    header = ["repeat", "delivery", "backlog pub/s", "live pub/s", "p50 ms", "p99 ms",
              "visible p50 ms", "visible p99 ms", "write ms", "end to visible ms",
              "load (backlog / live)"]
    return markdown(header, ([r["repeat"], r["mode"],
                              *(f"{r[k]:,.0f}" for k in ("backlog_throughput", "live_rate",
                                                         "p50_ms", "p99_ms", "visible_p50_ms",
                                                         "visible_p99_ms")),
                              f"{r['write_ms_mean']:,.1f}", number(r["end_to_visible_ms"]),
                              f"{r['loadavg_backlog']:.1f} / {r['loadavg_live']:.1f}"]
                             for r in rows), "rl" + "r" * 8 + "l")


def write_table(writes: list[dict]) -> list[str]:
    if not writes:
        return []
    out = [f"The write path alone ({writes[0]['batches']} batches of "
           f"{writes[0]['matches_per_batch']:,} Match records, 64 PartitionLoads and a summary "
           f"each, through `app.batch.output`, no Spark):", "",
           *markdown(["repeat", "delivery", "median ms per batch", "p99 ms", "load"],
                     ([w["repeat"], w["mode"], f"{w['median_ms']:.1f}", f"{w['p99_ms']:.1f}",
                       f"{w['loadavg']:.1f}"] for w in writes), "rlrrr")]
    return out


def summary(rows: list[dict]) -> list[str]:
    """Medians per mode and exactly-once relative to at-least-once."""
    med = {m: {k: statistics.median(r[k] for r in rows if r["mode"] == m)
               for k in ("backlog_throughput", "p99_ms", "visible_p99_ms")}
           for m in MODES if any(r["mode"] == m for r in rows)}
    if len(med) < 2:
        return []
    a, e = med["at-least-once"], med["exactly-once"]
    return [f"Medians over the repeats: backlog throughput {a['backlog_throughput']:,.0f} "
            f"(at-least-once) vs {e['backlog_throughput']:,.0f} pub/s (exactly-once), "
            f"{e['backlog_throughput'] / a['backlog_throughput'] - 1:+.1%}; live p99 "
            f"{a['p99_ms']:,.0f} vs {e['p99_ms']:,.0f} ms ({e['p99_ms'] / a['p99_ms'] - 1:+.1%}),"
            f" visible p99 {a['visible_p99_ms']:,.0f} vs {e['visible_p99_ms']:,.0f} ms "
            f"({e['visible_p99_ms'] / a['visible_p99_ms'] - 1:+.1%})."]


# -- the write path alone ----------------------------------------------------------------------

@dataclass(frozen=True)
class WriteSpec:
    """Batches of ``matches`` Match records, ``loads`` PartitionLoads and a BatchSummary each,
    written as the app writes them, without Spark."""

    batches: int = 200
    matches: int = 1000
    loads: int = 64
    repeats: int = 3


def write_path(address: str, kafka_properties, workdir: Path, spec: WriteSpec,
               log: Log) -> list[dict]:
    """Per repeat and mode (order alternating), the time to write each batch through
    ``app.batch.output``'s output for that mode: from the first record sent to the output being in
    Kafka (flushed, or committed). Fresh topics per run."""
    import json

    import config
    from app.batch.output import batch_output
    from app.records import PartitionLoad
    from bench.harness.deployment import session_env
    from kafkaio.topics import create_topics
    from schemas import codec
    from schemas.match_encoder import encode_matches

    enc = codec()
    rng = np.random.default_rng(1)
    subs = np.sort(rng.integers(0, 10_000, 4 * spec.matches))
    offsets = np.arange(0, 4 * spec.matches + 1, 4)
    rows = []
    for repeat in range(1, spec.repeats + 1):
        for mode in (MODES if repeat % 2 else MODES[::-1]):
            prefix = f"bench-write-{mode}-{repeat}-{time.strftime('%H%M%S')}"
            ckpt = workdir / prefix
            ckpt.mkdir(parents=True)
            run_cfg = config.load(environ=session_env(os.environ, address, ckpt, prefix,
                                                      kafka_properties))
            create_topics(run_cfg, ["publications", "matches", "metrics"])
            (ckpt / "metadata").write_text(json.dumps({"id": prefix}))
            out = batch_output(mode, run_cfg.kafka_client(), 60.0, app_id=prefix,
                               checkpoint=str(ckpt), publications=run_cfg.topic("publications"),
                               outputs=(run_cfg.topic("matches"), run_cfg.topic("metrics")))
            matches, metrics = run_cfg.topic("matches"), run_cfg.topic("metrics")
            times = []
            for b in range(spec.batches):
                ids = np.arange(b * spec.matches, (b + 1) * spec.matches, dtype=np.int64)
                values = encode_matches(ids, offsets, subs, ids, now_ms(), b, prefix)
                t0 = time.perf_counter()
                out.written(b)
                sender = out.open(b)
                for pid, value in zip(ids.tolist(), values, strict=True):
                    sender.send(matches, value, key=str(pid).encode())
                for p in range(spec.loads):
                    sender.send(metrics, enc.encode("PartitionLoad", PartitionLoad(
                        p, p % 2, 100, 1_000_000).record(prefix, b, 0, now_ms())),
                        key=prefix.encode())
                sender.flush()
                sender.send(metrics, b"summary", key=prefix.encode(), headers=out.headers(b))
                out.finish(b)
                times.append((time.perf_counter() - t0) * 1000)
            out.close()
            a = np.array(times[5:])  # the first batches open connections
            row = {"repeat": repeat, "mode": mode, "batches": len(a),
                   "matches_per_batch": spec.matches, "median_ms": float(np.median(a)),
                   "p99_ms": float(np.percentile(a, 99)), "mean_ms": float(a.mean()),
                   "loadavg": os.getloadavg()[0]}
            log(f"write path, {mode} #{repeat}: median {row['median_ms']:.1f} ms, p99 "
                f"{row['p99_ms']:.1f} ms per batch of {spec.matches:,} matches; load average "
                f"{row['loadavg']:.1f}")
            rows.append(row)
    return rows
