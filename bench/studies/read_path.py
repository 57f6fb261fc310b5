"""Where a read task's time goes between Spark's Kafka connector and the app's Python code.

One Spark session (``local[2]``, the connector's pinned jars) reads the same publications topic
as a batch, the way each micro-batch reads its range, and each repeat times, interleaved:

- ``jvm``: the connector alone (``count()`` of the DataFrame; no Python);
- ``rows``: the rows handed to Python as the app handed them before (``df.select(...).rdd``:
  every record pickled by the JVM and unpickled as a ``Row``), their values' bytes summed;
- ``rows+decode``: the same, and the values decoded in one pass (``decode_publications``);
- ``arrow``: the columns handed to Python in Arrow batches (``mapInArrow``; needs pandas
  installed), summed;
- ``arrow+decode``: the same, decoded.

Usage: ``python -m bench.studies.read_path [--publications N] [--repeats R]``; it starts a
local broker of its own in a temporary state directory and stops it at the end. Prints
seconds per repeat and per million records, and the median of each way.
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import config
from geops.workload import generate_workload
from kafkaio import broker
from kafkaio.sender import produce_records
from kafkaio.topics import create_topics
from schemas.publication_decoder import decode_publications
from schemas.records import publication_records

COLUMNS = ("topic", "partition", "offset", "key", "value")


def _rows_sum(rows: Iterator[Any]) -> Iterator[int]:
    yield sum(len(r.value) for r in rows)


def _rows_decode(rows: Iterator[Any]) -> Iterator[int]:
    pubs = decode_publications([r.value for r in rows])
    yield int(pubs.ok.sum())


def _arrow_sum(batches: Iterator[Any]) -> Iterator[Any]:
    import pyarrow as pa

    total = sum(sum(len(v) for v in b.column("value").to_pylist()) for b in batches)
    yield pa.RecordBatch.from_pydict({"n": [total]})


def _arrow_decode(batches: Iterator[Any]) -> Iterator[Any]:
    import pyarrow as pa

    values = [v for b in batches for v in b.column("value").to_pylist()]
    pubs = decode_publications(values)
    yield pa.RecordBatch.from_pydict({"n": [int(pubs.ok.sum())]})


def ways(df: Any) -> dict[str, Callable[[], Any]]:
    """Each way of reading ``df``, as a function that runs it once; the Arrow ways only where
    pandas is installed (pyspark's ``mapInArrow`` refuses to run without it; geops does not
    depend on it)."""
    sel = df.select(*COLUMNS)
    found = {
        "jvm": lambda: sel.count(),
        "rows": lambda: sel.rdd.mapPartitions(_rows_sum).sum(),
        "rows+decode": lambda: sel.rdd.mapPartitions(_rows_decode).sum(),
    }
    if importlib.util.find_spec("pandas") is None:
        print("pandas is not installed: the Arrow ways are left out (pip install pandas)")
        return found
    return {**found,
            "arrow": lambda: sel.mapInArrow(_arrow_sum, "n long").groupBy().sum().collect(),
            "arrow+decode": lambda: sel.mapInArrow(_arrow_decode, "n long").groupBy().sum()
            .collect()}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.studies.read_path", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--publications", type=int, default=200_000)
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="geops-read-path-") as tmp:
        state = Path(tmp)
        info, _ = broker.start(state, port=0)
        try:
            cfg = config.load(environ={"GEOPS_BOOTSTRAP_SERVERS": info.address,
                                       "GEOPS_STATE_DIR": str(state)})
            create_topics(cfg.with_overrides({"topics.publications.partitions": "2"}))
            w = generate_workload(seed=5, subscriptions=10, publications=args.publications)
            produce_records(cfg.kafka_client(), cfg.topic("publications"), "Publication",
                            publication_records(w.publications))
            return _measure(cfg, args.repeats, args.publications)
        finally:
            broker.stop(state)


def _measure(cfg: config.Config, repeats: int, n: int) -> int:
    import os
    import sys

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from app.read.source import connector_jars, source_options

    spark = (SparkSession.builder.master("local[2]").appName("read-path")
             .config("spark.jars", ",".join(connector_jars()))
             .config("spark.ui.enabled", "false").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    opts = source_options(cfg, cfg.topic("publications"), "earliest")
    opts.pop("maxOffsetsPerTrigger", None)
    opts["endingOffsets"] = "latest"
    df = spark.read.format("kafka").options(**opts).load()
    run = ways(df)
    for f in run.values():  # warm-up: the connector's consumers, the Python workers
        f()
    times: dict[str, list[float]] = {name: [] for name in run}
    for r in range(repeats):
        order = list(run) if r % 2 == 0 else list(reversed(run))
        for name in order:
            t0 = time.perf_counter()
            run[name]()
            times[name].append(time.perf_counter() - t0)
    print(f"{n:,} publications in 2 partitions, local[2], {repeats} repeats (order alternating)")
    print(f"{'way':<14}{'median s':>10}{'s per 1M':>10}   each repeat (s)")
    for name, ts in times.items():
        med = statistics.median(ts)
        print(f"{name:<14}{med:>10.2f}{med / n * 1e6:>10.2f}   "
              + ", ".join(f"{t:.2f}" for t in ts))
    spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
