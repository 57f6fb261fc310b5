"""`geops bench events`: what detecting geofence events costs, against the same stream
without objects.

A moving-object workload (``--objects`` objects, ``--subscriptions`` subscriptions of which a
fifth are fences). For each repeat, each mode in turn (the order alternates between repeats):

- ``positions``: the workload's positions, each with its object id (keyed by object): the app
  matches them and its events query keeps every object's fences and writes the events;
- ``anonymous``: the same geometries without object ids: matching only (the fences still
  match by their shape, so the join's work is the same).

Each run is a session of its own (fresh topics, the app started and warmed up), then

- **backlog**: offered at ``backlog_rate`` for ``backlog_s``, more than the app takes;
  matching throughput = the records of the batches that processed them over the time from the
  first one's start to the last one's end; for ``positions`` also the events' throughput, to the
  end of the events query's last batch over the backlog (when its checkpoint has committed the
  positions topic's end);
- **live**: ``rate`` publications/s (default 70 % of the first anonymous backlog throughput,
  then kept) for ``duration_s``: the Match records' latency and, for ``positions``, the
  events' (event time to the event record's Kafka timestamp).

And, without Spark, the state per object: the bucket states (``app.events.query.Held``) the
workload's positions leave, pickled as the state store holds them, over the objects.
"""

from __future__ import annotations

import json
import pickle
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bench.harness.csv_tables import write_csv
from bench.harness.environment import Bench, BenchEnv
from bench.harness.errors import BenchFailed
from bench.harness.latency import latency_summary
from bench.harness.machine import command_line, describe
from bench.harness.phase import nice, phase
from bench.harness.publisher import Log, Publisher, now_ms
from bench.harness.tables import markdown, number
from geops.workload import generate_workload

MODES = ("anonymous", "positions")
COLUMNS = ("repeat", "mode", "backlog_records", "matching_throughput", "backlog_events",
           "events_throughput", "live_rate", "match_p50_ms", "match_p99_ms", "live_events",
           "event_p50_ms", "event_p99_ms")


@dataclass(frozen=True, kw_only=True)
class EventsSpec(BenchEnv):
    out: Path
    repeats: int = 2
    objects: int = 100_000
    subscriptions: int = 50_000
    pool: int = 200_000
    seed: int = 5
    start_rate: float = 500.0
    backlog_rate: float = 30_000.0
    backlog_s: float = 5.0
    rate: float | None = None
    duration_s: float = 30.0


def events_checkpoint_done(checkpoint: Path, ends: dict[int, int]) -> bool:
    """Whether the events query's checkpoint has committed a batch reaching ``ends`` (the
    positions topic's end offsets)."""
    from app.read.offsetlog import batch_end_offsets, last_committed

    batch = last_committed(str(checkpoint))
    if batch is None:
        return not any(ends.values())
    done = batch_end_offsets(str(checkpoint), batch)
    return all(done.get(str(p), 0) >= e for p, e in ends.items())


def wait_events(s, timeout: float = 300.0) -> float:
    """Wait until the events query has processed every position written; the seconds it
    took. A real-time app writes a position's events with its matches, before the summary that
    counts it: once it has drained, they are written."""
    from kafkaio.offsets import EndOffsets

    if s.app_opts.mode == "real-time":
        return 0.0
    t0 = time.monotonic()
    probe = EndOffsets(s.cfg.kafka_client())
    try:
        ends = probe(s.cfg.topic("positions"))
    finally:
        probe.close()
    while not events_checkpoint_done(s.dir / "checkpoint" / "events", ends):
        s.check_alive()
        if time.monotonic() - t0 > timeout:
            raise BenchFailed(f"the events query did not catch up within {timeout:.0f} s")
        time.sleep(0.25)
    return time.monotonic() - t0


def read_events(s, id_lo: int, id_hi: int) -> tuple[np.ndarray, np.ndarray]:
    """(event time, Kafka timestamp) of the events of publications with ids in [lo, hi)."""
    from kafkaio.offsets import read_to_end
    from schemas import codec

    c = codec()
    ev, ts = [], []
    for msg in read_to_end(s.cfg.kafka_client(), s.cfg.topic("events")):
        rec = c.decode_as("GeofenceEvent", msg.value())
        if rec["publication_id"] is not None and id_lo <= rec["publication_id"] < id_hi:
            ev.append(rec["event_time"])
            ts.append(msg.timestamp()[1])
    return np.array(ev, np.int64), np.array(ts, np.int64)


def one_run(bench: Bench, spec: EventsSpec, workload, repeat: int, mode: str,
            rate: float | None, log: Log) -> dict:
    s = bench.session(f"{mode}-{repeat}", workload)
    s.start_app()
    pub = Publisher(s.cfg.kafka_client(), s.cfg.topic("publications"),
                    workload.publications.geoms,
                    objects=workload.object_ids if mode == "positions" else None)
    s.warm_up(pub, spec.start_rate)
    if mode == "positions":
        wait_events(s)
    log(f"{mode} #{repeat}: backlog, offering {spec.backlog_rate:,.0f} pub/s for "
        f"{spec.backlog_s:.0f} s")
    t0 = now_ms()
    base = pub.new_base()
    offer = pub.offer(spec.backlog_rate, spec.backlog_s, base)
    s.drain()
    batches = [b for b in s.batches_between(t0, now_ms() + 1000) if b["records"]]
    records = sum(b["records"] for b in batches)
    first = min(b["start_time"] for b in batches)
    span_ms = max(b["end_time"] for b in batches) - first
    row = {"repeat": repeat, "mode": mode, "backlog_records": records,
           "matching_throughput": round(records / max(span_ms / 1000, 1e-9), 1)}
    if mode == "positions":
        wait_events(s)
        ev, ts = read_events(s, base, base + offer.sent)
        row["backlog_events"] = len(ev)
        row["events_throughput"] = round(
            records / max((int(ts.max()) - first) / 1000, 1e-9), 1) if len(ts) else None
    log(f"  backlog: {records:,} records; matching {row['matching_throughput']:,.0f} pub/s"
        + (f", events {number(row.get('events_throughput'))} pub/s "
           f"({row['backlog_events']:,} events)" if mode == "positions" else ""))
    live_rate = rate if rate is not None else nice(0.7 * row["matching_throughput"])
    result = phase(s, pub, f"{mode} #{repeat} live", live_rate, spec.duration_s, log, 0.7)
    lat = latency_summary(result.latency)
    row.update({"live_rate": live_rate, "match_p50_ms": lat["p50"], "match_p99_ms": lat["p99"]})
    if mode == "positions":
        wait_events(s)
        ev, ts = read_events(s, result.offer.id_base,
                             result.offer.id_base + result.offer.sent)
        ev_lat = latency_summary((ts - ev).astype(np.float64))
        row.update({"live_events": len(ev), "event_p50_ms": ev_lat["p50"],
                    "event_p99_ms": ev_lat["p99"]})
        log(f"  events live: {len(ev):,}, p50 {number(ev_lat['p50'])} ms, p99 "
            f"{number(ev_lat['p99'])} ms")
    pub.close()
    bench.end(s)
    return row


def state_per_object(workload) -> dict:
    """The serialized state per object that the workload's positions leave (``Held`` of each
    bucket pickled, as the state store keeps it), computed by the offline engine."""
    from app.events.positions import bucket_of
    from app.events.query import Held
    from geops.events import EventEngine

    engine = EventEngine(ttl_ms=None)
    subs = workload.subscriptions
    engine.set_fences(subs.ids, subs.geoms, workload.detect, workload.distance_m)
    pubs = workload.publications
    engine.process(workload.object_ids, pubs.ids, np.arange(len(pubs.ids)), pubs.geoms)
    names = sorted(engine.states)
    buckets = bucket_of(names)
    fences = dict(zip(engine.fences.ids.tolist(), engine.fences.detect.tolist(), strict=True))
    total = sum(len(pickle.dumps(Held(fences, {n: engine.states[n] for n, k
                                               in zip(names, buckets, strict=True) if k == b}),
                                 protocol=pickle.HIGHEST_PROTOCOL))
                for b in np.unique(buckets).tolist())
    table = len(pickle.dumps(Held(fences), protocol=pickle.HIGHEST_PROTOCOL))  # no objects
    in_fences = sum(len(st.fence_ids) for st in engine.states.values())
    return {"objects": len(names), "fences": len(fences), "state_bytes": total,
            "fence_table_bytes_per_bucket": table,
            "bytes_per_object": round((total - len(np.unique(buckets)) * table)
                                      / max(len(names), 1), 1),
            "fences_per_object": round(in_fences / max(len(names), 1), 2)}


def main(spec: EventsSpec, log: Log) -> None:
    workload = generate_workload(seed=spec.seed, subscriptions=spec.subscriptions,
                                 publications=spec.pool, objects=spec.objects)
    state = state_per_object(workload)
    log(f"state: {state['bytes_per_object']} bytes per object ({state['objects']:,} objects, "
        f"{state['fences_per_object']} fences each on average)")
    rows: list[dict] = []
    rate = spec.rate
    with Bench(spec, log) as bench:
        for repeat in range(1, spec.repeats + 1):
            for mode in (MODES if repeat % 2 else MODES[::-1]):
                row = one_run(bench, spec, workload, repeat, mode, rate, log)
                rate = row["live_rate"]
                rows.append(row)
    write(spec, rows, state, log)


def ratios(rows: list[dict]) -> dict[str, list[float]]:
    """Per repeat, positions over anonymous: matching throughput and events throughput."""
    by = {(r["repeat"], r["mode"]): r for r in rows}
    out: dict[str, list[float]] = {"matching": [], "events": []}
    for repeat in sorted({r["repeat"] for r in rows}):
        a, p = by.get((repeat, "anonymous")), by.get((repeat, "positions"))
        if a and p:
            out["matching"].append(p["matching_throughput"] / a["matching_throughput"])
            if p.get("events_throughput"):
                out["events"].append(p["events_throughput"] / a["matching_throughput"])
    return out


def write(spec: EventsSpec, rows: list[dict], state: dict, log: Log) -> None:
    out = Path(spec.out)
    out.mkdir(parents=True, exist_ok=True)
    write_csv(out / "runs.csv", rows, COLUMNS)
    (out / "state.json").write_text(json.dumps(state, indent=2) + "\n")
    r = ratios(rows)

    def spread(xs: list[float]) -> str:
        if not xs:
            return "-"
        return (f"**{statistics.mean(xs):.2f}** ({', '.join(f'{x:.2f}' for x in xs)})")

    header = ["repeat", "mode", "backlog: matching pub/s", "events pub/s", "events",
              "live pub/s", "match p50 / p99 ms", "event p50 / p99 ms"]
    body = ([x["repeat"], x["mode"], f"{x['matching_throughput']:,.0f}",
             number(x.get("events_throughput")), number(x.get("backlog_events")),
             f"{x['live_rate']:,.0f}",
             f"{number(x['match_p50_ms'])} / {number(x['match_p99_ms'])}",
             (f"{number(x.get('event_p50_ms'))} / {number(x.get('event_p99_ms'))}"
              if x["mode"] == "positions" else "-")] for x in rows)
    lines = ["# geops bench events: detection against the same stream without objects", "",
             f"Machine: {describe()}. {spec.objects:,} objects, {spec.subscriptions:,} "
             f"subscriptions ({state['fences']:,} fences), a pool of {spec.pool:,} positions.",
             "", "```", command_line(spec.command), "```", "",
             *markdown(header, body, "rl" + "r" * 6), "",
             f"- Positions over anonymous, per repeat: matching throughput "
             f"{spread(r['matching'])}; events written end to end {spread(r['events'])} (the "
             f"goal: detection costs at "
             f"most 25 % of throughput, a ratio of 0.75 or more).",
             f"- State: {state['bytes_per_object']} bytes per object serialized in the state "
             f"store ({state['fences_per_object']} fences per object on average), besides each "
             f"bucket's fence table ({state['fence_table_bytes_per_bucket']:,} bytes); RocksDB's "
             f"own overhead not counted.", ""]
    (out / "README.md").write_text("\n".join(lines))
    log(f"wrote {out}/README.md, runs.csv and state.json")
