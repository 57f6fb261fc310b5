"""Where moving objects' state can live in Spark: what a stateful operator costs per batch.

Geofence events need each object's last position and the fences it is in from one micro-batch
to the next, in Spark's own state store (RocksDB), checkpointed with the query. PySpark has two
Python stateful operators, both keyed by a grouping column: ``applyInPandasWithState`` and
``transformWithStateInPandas``. This study reads one Kafka topic of positions (key = object id;
value = publication id, event time, x, y) with Spark's connector and runs, per layout, the same
step (order an object's positions by event time; ``enter``/``exit`` of one circle against the
object's last state) into a ``foreachBatch`` sink:

- ``none``: no state, the positions only (the read and the sink: the floor);
- ``object-apply``: ``applyInPandasWithState`` keyed by object id;
- ``object-tws``: ``transformWithStateInPandas`` keyed by object id (a ``ValueState``);
- ``bucket``: ``applyInPandasWithState`` keyed by a hash bucket of the object id (64 buckets),
  one state value per bucket holding its objects' states, the step vectorised over the bucket.

Every layout with state must write the same events (the table's ``events`` column). Throughput
counts the batches after the first two (their time has the query's start).

Needs pandas (< 3: PySpark 4.2 warns on 3.x) and, for ``transformWithStateInPandas``, protobuf
at the version of PySpark's generated code, neither of which geops installs:
``pip install pandas==2.3.3 protobuf==6.33.5``.

Usage: ``python -m bench.studies.event_state [--objects 10000,100000] [--positions 200000]
[--per-batch 20000] [--layouts none,object-apply,object-tws,bucket] [--out DIR]``; writes
``runs.csv`` and ``table.md`` to ``--out``.
"""

from __future__ import annotations

import argparse
import os
import pickle
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from bench.harness.csv_tables import write_csv
from bench.harness.machine import command_line, describe
from bench.harness.tables import markdown, number
from kafkaio import broker

LAYOUTS = ("none", "object-apply", "object-tws", "bucket")
BUCKETS = 64
PARTITIONS = 4
WARM_BATCHES = 2
TIMEOUT_S = 1800.0
STATE_DDL = "last_ms long, inside boolean"
EVENTS_DDL = "object_id string, pub long, kind string"


def inside(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Whether each position is in the one fence: a circle of radius ~0.32 at (0.5, 0.5)."""
    return (x - 0.5) ** 2 + (y - 0.5) ** 2 < 0.1


def events_of(oid: np.ndarray, t: np.ndarray, now: np.ndarray,
              was: Callable[[np.ndarray], np.ndarray]) -> tuple[np.ndarray, np.ndarray, dict]:
    """The step over positions of any number of objects: sorted by (object, time), each
    position's previous in/out (the object's state, ``was``, for its first one here); returns
    the indexes (into the sorted order) of the events, that order, and each object's new
    state {object: (last time, in)}."""
    order = np.lexsort((t, oid))
    oid, t, now = oid[order], t[order], now[order]
    first = np.ones(len(oid), bool)
    first[1:] = oid[1:] != oid[:-1]
    prev = np.empty(len(oid), bool)
    prev[1:] = now[:-1]
    starts = np.flatnonzero(first)
    prev[starts] = was(oid[starts])
    last = np.ones(len(oid), bool)
    last[:-1] = first[1:]
    ends = np.flatnonzero(last)
    state = dict(zip(oid[ends].tolist(), zip(t[ends].tolist(), now[ends].tolist(),
                                             strict=True), strict=True))
    return np.flatnonzero(now != prev), order, state


def _step(frames: Iterator[Any], was: Callable[[np.ndarray], np.ndarray]
          ) -> tuple[Any | None, dict]:
    """One group's positions (pandas frames) through ``events_of``: the events as a frame
    (None when there are none) and the objects' new states."""
    import pandas as pd

    pdf = pd.concat(list(frames))
    oid = pdf["object_id"].to_numpy(dtype=object)
    now = inside(pdf["x"].to_numpy(), pdf["y"].to_numpy())
    ev, order, state = events_of(oid, pdf["t"].to_numpy(), now, was)
    if not len(ev):
        return None, state
    pub, now = pdf["pub"].to_numpy()[order], now[order]
    return pd.DataFrame({"object_id": oid[order][ev], "pub": pub[ev],
                         "kind": np.where(now[ev], "enter", "exit")}), state


def _one_object(key: tuple, frames: Iterator[Any], known: tuple | None
                ) -> tuple[Any | None, tuple]:
    out, state = _step(frames, lambda _: np.array([bool(known and known[1])]))
    return out, state[key[0]]


def by_object_apply(key: tuple, frames: Iterator[Any], state: Any) -> Iterator[Any]:
    """``applyInPandasWithState``'s function, keyed by object id."""
    out, new = _one_object(key, frames, state.get if state.exists else None)
    state.update(new)
    if out is not None:
        yield out


def by_bucket(key: tuple, frames: Iterator[Any], state: Any) -> Iterator[Any]:
    """``applyInPandasWithState``'s function keyed by bucket: the bucket's objects' states in
    one pickled dict."""
    known = pickle.loads(state.get[0]) if state.exists else {}
    out, new = _step(frames, lambda objs: np.array([known.get(o, (0, False))[1]
                                                    for o in objs], bool))
    known.update(new)
    state.update((pickle.dumps(known, protocol=pickle.HIGHEST_PROTOCOL),))
    if out is not None:
        yield out


def object_processor() -> Any:
    """A ``transformWithStateInPandas`` processor keyed by object id (one ``ValueState``)."""
    from pyspark.sql.streaming import StatefulProcessor

    class ByObject(StatefulProcessor):
        def init(self, handle: Any) -> None:
            self.state = handle.getValueState("object", STATE_DDL)

        def handleInputRows(self, key: tuple, rows: Iterator[Any], timerValues: Any
                            ) -> Iterator[Any]:
            known = self.state.get() if self.state.exists() else None
            out, new = _one_object(key, rows, known)
            self.state.update(new)
            if out is not None:  # an empty frame of strings fails PySpark's Arrow conversion
                yield out

        def close(self) -> None:
            pass

    return ByObject()


def query(spark: Any, address: str, topic: str, layout: str, per_batch: int) -> Any:
    """The positions of ``topic`` through ``layout``: a streaming DataFrame of events (of
    positions for ``none``)."""
    from pyspark.sql import functions as F

    raw = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", address)
           .option("subscribe", topic).option("startingOffsets", "earliest")
           .option("maxOffsetsPerTrigger", str(per_batch)).load())
    parts = F.split(F.col("value").cast("string"), ",")
    pos = raw.select(F.col("key").cast("string").alias("object_id"),
                     parts[0].cast("long").alias("pub"), parts[1].cast("long").alias("t"),
                     parts[2].cast("double").alias("x"), parts[3].cast("double").alias("y"))
    if layout == "none":
        return pos
    if layout == "object-apply":
        return pos.groupBy("object_id").applyInPandasWithState(
            by_object_apply, EVENTS_DDL, STATE_DDL, "Append", "NoTimeout")
    if layout == "object-tws":
        return pos.groupBy("object_id").transformWithStateInPandas(
            object_processor(), EVENTS_DDL, "Append", "None")
    return (pos.withColumn("bucket", F.abs(F.hash("object_id")) % BUCKETS).groupBy("bucket")
            .applyInPandasWithState(by_bucket, EVENTS_DDL, "blob binary", "Append",
                                    "NoTimeout"))


def produce(address: str, topic: str, objects: int, positions: int, seed: int) -> None:
    """``positions`` positions of ``objects`` objects (uniform), keyed by object id."""
    from confluent_kafka.admin import AdminClient, NewTopic

    from kafkaio.sender import Sender

    admin = AdminClient({"bootstrap.servers": address})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result()
    rng = np.random.default_rng(seed)
    objs, xs, ys = rng.integers(0, objects, positions), rng.random(positions), rng.random(positions)
    sender = Sender({"bootstrap.servers": address, "linger.ms": "20"})
    for i in range(positions):
        sender.send(topic, f"{i},{1000 * i},{xs[i]:.5f},{ys[i]:.5f}".encode(),
                    key=f"o{objs[i]}".encode())
    sender.flush()
    sender.close()


def run_one(spark: Any, address: str, work: Path, layout: str, objects: int, positions: int,
            per_batch: int) -> dict[str, Any]:
    """One layout on a fresh topic of the workload; its row of ``runs.csv``."""
    topic = f"positions-{layout}-{objects}"
    produce(address, topic, objects, positions, seed=objects)
    counted = [0]

    def sink(df: Any, _batch: int) -> None:
        counted[0] += df.count()

    q = (query(spark, address, topic, layout, per_batch).writeStream.foreachBatch(sink)
         .option("checkpointLocation", str(work / f"ckpt-{topic}"))
         .trigger(processingTime="500 milliseconds").start())
    started = time.monotonic()
    while True:
        if not q.isActive:
            raise RuntimeError(f"{layout}: the query failed: {str(q.exception())[:2000]}")
        progress = [p for p in q.recentProgress if p["numInputRows"]]
        if sum(p["numInputRows"] for p in progress) >= positions:
            break
        if time.monotonic() - started > TIMEOUT_S:
            raise RuntimeError(f"{layout}: not done after {TIMEOUT_S:.0f} s")
        time.sleep(0.5)
    q.stop()
    steady = progress[WARM_BATCHES:]
    took = [p["durationMs"]["triggerExecution"] for p in steady]
    state = (progress[-1].get("stateOperators") or [{}])[0]
    return {"layout": layout, "objects": objects, "positions": positions,
            "batches": len(progress), "steady_batch_ms_median": float(np.median(took)),
            "steady_positions_per_s": 1000 * sum(p["numInputRows"] for p in steady) / sum(took),
            "events": counted[0] if layout != "none" else "",
            "state_rows": state.get("numRowsTotal", ""),
            "state_memory_bytes": state.get("memoryUsedBytes", "")}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.studies.event_state",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--objects", default="10000,100000")
    parser.add_argument("--positions", type=int, default=200_000)
    parser.add_argument("--per-batch", type=int, default=20_000)
    parser.add_argument("--layouts", default=",".join(LAYOUTS))
    parser.add_argument("--out", type=Path, default=Path("event-state"))
    args = parser.parse_args(argv)
    layouts = args.layouts.split(",")
    if unknown := sorted(set(layouts) - set(LAYOUTS)):
        parser.error(f"--layouts: unknown {unknown}; choose from {', '.join(LAYOUTS)}")
    try:
        import google.protobuf  # noqa: F401
        import pandas  # noqa: F401
    except ImportError as exc:
        sys.exit(f"event_state: {exc.name} is missing: pip install pandas==2.3.3 "
                 f"protobuf==6.33.5")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from app.read.source import connector_jars

    work = Path(tempfile.mkdtemp(prefix="geops-event-state-"))
    info, _ = broker.start(work / "broker", port=0)
    rows: list[dict[str, Any]] = []
    try:
        spark = (SparkSession.builder.master("local[2]").appName("geops-event-state")
                 .config("spark.jars", ",".join(connector_jars()))
                 .config("spark.sql.shuffle.partitions", str(PARTITIONS))
                 .config("spark.sql.streaming.stateStore.providerClass",
                         "org.apache.spark.sql.execution.streaming.state."
                         "RocksDBStateStoreProvider")
                 .config("spark.ui.showConsoleProgress", "false")
                 .config("spark.ui.enabled", "false").getOrCreate())
        spark.sparkContext.setLogLevel("ERROR")
        for objects in (int(n) for n in args.objects.split(",")):
            for layout in layouts:
                rows.append(run_one(spark, info.address, work, layout, objects,
                                    args.positions, args.per_batch))
                print(rows[-1], flush=True)
        spark.stop()
    finally:
        broker.stop(work / "broker")
    args.out.mkdir(parents=True, exist_ok=True)
    write_csv(args.out / "runs.csv", rows)
    floor = {r["objects"]: r["steady_positions_per_s"] for r in rows if r["layout"] == "none"}
    table = markdown(
        ["objects", "layout", "positions/s", "/ none", "batch ms (median)", "events",
         "state rows", "state MB"],
        [[number(r["objects"]), r["layout"], number(r["steady_positions_per_s"]),
          f"{r['steady_positions_per_s'] / floor[r['objects']]:.2f}"
          if r["objects"] in floor else "",
          number(r["steady_batch_ms_median"]), number(r["events"] or None),
          number(r["state_rows"] or None),
          f"{r['state_memory_bytes'] / 1e6:.1f}" if r["state_memory_bytes"] != "" else ""]
         for r in rows])
    command = command_line(["python", "-m", "bench.studies.event_state", *sys.argv[1:]])
    text = "\n".join([f"`{command}`", "", describe(), "", *table, ""])
    (args.out / "table.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
