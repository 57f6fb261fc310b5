"""What Spark's real-time mode (``trigger(realTime=...)``, Spark 4.1+) runs of the app's pipeline.

Real-time mode keeps one long-running task per source partition and passes records on as they
arrive, instead of a job per micro-batch: it would remove the per-batch fixed cost of
``docs/results/live/costs`` altogether. It checks the query's operators and sink against an
allowlist when the query starts. This study starts, on a local broker and Spark's Kafka
connector, one small query per shape the app is made of (a JVM-only projection, a Python UDF,
an Arrow UDF, ``mapInArrow``, a stream-static join, ``foreach`` and ``foreachBatch``), each with
``trigger(realTime="5 seconds")`` and output mode ``update``, and records for each whether it
started and delivered records, or the first line of the error that refused it. A last query
tries what would take Spark's two checkpoint writes off each batch's path in micro-batch mode:
``foreachBatch`` with ``asyncProgressTrackingEnabled``.

Usage: ``python -m bench.studies.real_time_mode [--out FILE.md]``. Takes about a minute.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.harness.tables import markdown
from kafkaio import broker

RECORDS = 200
WAIT_S = 60.0


def shapes(spark: Any, source: Callable[[], Any], out_topic: str, address: str
           ) -> dict[str, Callable[[str], Any]]:
    """Name -> a function starting that shape's query with a checkpoint directory."""
    import pyarrow as pa
    from pyspark.sql import functions as F
    from pyspark.sql.functions import arrow_udf, udf
    from pyspark.util import PythonEvalType

    def to_kafka(df: Any, ckpt: str) -> Any:
        return (df.writeStream.format("kafka").option("kafka.bootstrap.servers", address)
                .option("topic", out_topic).option("checkpointLocation", ckpt)
                .outputMode("update").trigger(realTime="5 seconds").start())

    @udf("binary")
    def py_copy(v: bytes) -> bytes:
        return v

    # the eval type given: with postponed annotations the hints are strings arrow_udf cannot read
    arrow_copy = arrow_udf(lambda v: v, "binary", PythonEvalType.SQL_SCALAR_ARROW_UDF)

    def map_arrow(batches: Any) -> Any:
        for b in batches:
            yield pa.RecordBatch.from_arrays([b.column("value")], names=["value"])

    static = spark.createDataFrame([(str(i).encode(), i) for i in range(16)], "k binary, n int")

    class Writer:
        def open(self, partition_id: int, epoch_id: int) -> bool:
            return True

        def process(self, row: Any) -> None:
            pass

        def close(self, error: Any) -> None:
            pass

    return {
        "JVM only: Kafka -> select -> Kafka sink":
            lambda c: to_kafka(source().select("key", "value"), c),
        "Python UDF (BatchEvalPython) -> Kafka sink":
            lambda c: to_kafka(source().select(py_copy("value").alias("value")), c),
        "Arrow UDF (ArrowEvalPython) -> Kafka sink":
            lambda c: to_kafka(source().select(arrow_copy("value").alias("value")), c),
        "mapInArrow (Python) -> Kafka sink":
            lambda c: to_kafka(source().select("value").mapInArrow(map_arrow, "value binary"),
                               c),
        "stream-static join -> Kafka sink":
            lambda c: to_kafka(source().join(F.broadcast(static), F.col("key") == F.col("k"))
                               .select("key", "value"), c),
        "foreach (Python ForeachWriter)":
            lambda c: (source().writeStream.foreach(Writer()).option("checkpointLocation", c)
                       .outputMode("update").trigger(realTime="5 seconds").start()),
        "foreachBatch (the app's sink)":
            lambda c: (source().writeStream.foreachBatch(lambda df, b: df.count())
                       .option("checkpointLocation", c).outputMode("update")
                       .trigger(realTime="5 seconds").start()),
        # not real-time mode: micro-batches whose offset and commit logs are written
        # asynchronously (the checkpoint writes of every batch off its path)
        "foreachBatch, micro-batch with asyncProgressTrackingEnabled":
            lambda c: (source().writeStream.foreachBatch(lambda df, b: df.count())
                       .option("checkpointLocation", c)
                       .option("asyncProgressTrackingEnabled", "true")
                       .trigger(processingTime="0 seconds").start()),
    }


def outcome(start: Callable[[str], Any], ckpt: str, delivered: Callable[[], int]) -> str:
    """'ran: N records out' or 'refused: <first line of the error>'."""
    try:
        query = start(ckpt)
    except Exception as exc:  # the allowlist check fails the start
        return "refused at start: " + _first_line(exc)
    t_end = time.monotonic() + WAIT_S
    try:
        while time.monotonic() < t_end and query.isActive:
            progress = query.lastProgress
            if progress and progress.get("numInputRows", 0) > 0:
                break
            query.awaitTermination(1.0)
        failure = query.exception()
        if failure is not None:
            return "failed: " + _failure(failure)
        rows = (query.lastProgress or {}).get("numInputRows", 0)
        return f"ran: {rows} input rows in its first batch, {delivered()} records out"
    except Exception as exc:  # the query failed while it was waited for
        return "failed: " + _failure(exc)
    finally:
        with contextlib.suppress(Exception):
            query.stop()


def _first_line(exc: BaseException | Any) -> str:
    text = str(getattr(exc, "desc", None) or exc)
    return next((line.strip() for line in text.splitlines() if line.strip()), text)[:300]


def _failure(exc: BaseException | Any) -> str:
    """The error class and message Spark gave a failed query, without the query's plan."""
    text = str(getattr(exc, "desc", None) or exc)
    found = re.search(r"terminated with exception: (.*?)(?: SQLSTATE|\n|$)", text)
    return (found.group(1) if found else _first_line(exc))[:400]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.studies.real_time_mode",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, help="also write the table to this Markdown file")
    args = parser.parse_args(argv)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from confluent_kafka.admin import AdminClient, NewTopic
    from pyspark.sql import SparkSession

    from app.read.source import connector_jars
    from kafkaio.offsets import EndOffsets
    from kafkaio.sender import Sender

    work = Path(tempfile.mkdtemp(prefix="geops-rtm-"))
    info, _ = broker.start(work / "broker", port=0)
    rows: list[tuple[str, str]] = []
    try:
        admin = AdminClient({"bootstrap.servers": info.address})
        for fut in admin.create_topics([NewTopic(t, 1, 1) for t in ("rtm-in", "rtm-out")]
                                       ).values():
            fut.result()
        sender = Sender({"bootstrap.servers": info.address})
        for i in range(RECORDS):
            sender.send("rtm-in", b"x" * 64, key=str(i % 16).encode())
        sender.flush()
        spark = (SparkSession.builder.master("local[2]").appName("geops-real-time-mode")
                 .config("spark.jars", ",".join(connector_jars()))
                 .config("spark.ui.enabled", "false").getOrCreate())
        spark.sparkContext.setLogLevel("ERROR")

        def source() -> Any:
            return (spark.readStream.format("kafka")
                    .option("kafka.bootstrap.servers", info.address)
                    .option("subscribe", "rtm-in").option("startingOffsets", "earliest").load())

        ends = EndOffsets({"bootstrap.servers": info.address}, timeout=10.0)
        seen = [0]

        def delivered() -> int:
            total = sum(high for _, high in ends.listed("rtm-out", [0]).values())
            new, seen[0] = total - seen[0], total
            return new

        for i, (name, start) in enumerate(shapes(spark, source, "rtm-out",
                                                 info.address).items()):
            result = outcome(start, str(work / f"ckpt-{i}"), delivered)
            print(f"{name}: {result}", flush=True)
            rows.append((name, result))
        ends.close()
        spark.stop()
    finally:
        broker.stop(work / "broker")
    if args.out:
        lines = markdown(["query shape", "what Spark did"],
                         [[n, r.replace("|", "/")] for n, r in rows])
        args.out.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
