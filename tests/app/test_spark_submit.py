"""`spark-submit --packages` runs the app the way docs/usage.md tells a Spark user to.

The command is taken from the page itself, so the page cannot drift from what works: Spark
resolves the pinned Kafka connector with Ivy (the local Maven repository first, where the
project's JVM artifacts are, then Maven Central), the driver is not started by `geops app`
(the app says so), and the app reads a live stream to its end with the oracle's matches, in
either mode (real-time mode reads Kafka with its own consumers: the connector is resolved but
not used).
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pyspark
import pytest

from tests.app.conftest import SPARK_BIN
from tests.app.delivery_checks import assert_exactly_once
from tests.app.live import LiveProducer, Phase, load_subscriptions_only

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
RATE = 500.0  # publications per second: the stream is still arriving after the app is ready


def documented_command() -> list[str]:
    """The `spark-submit --packages ...` line of docs/usage.md, split into words."""
    lines = [line for line in (ROOT / "docs" / "usage.md").read_text().splitlines()
             if line.startswith("spark-submit --packages ")]
    assert len(lines) == 1, f"docs/usage.md shows {len(lines)} spark-submit --packages lines"
    return shlex.split(lines[0])


def test_the_documented_connector_is_the_pinned_one():
    words = documented_command()
    coordinate = words[words.index("--packages") + 1]
    pom = (ROOT / "jvm" / "spark-kafka" / "pom.xml").read_text()
    pinned = re.search(r"<spark.version>([^<]+)</spark.version>", pom).group(1)
    assert coordinate == f"org.apache.spark:spark-sql-kafka-0-10_2.13:{pinned}"
    assert pinned == pyspark.__version__


@pytest.mark.parametrize("mode", ["micro-batch", "real-time"])
def test_spark_submit_with_packages_reads_a_live_stream(workload, kafka_cfg, geops_env,
                                                        tmp_path, mode):
    load_subscriptions_only(kafka_cfg, workload.subs)
    producer = LiveProducer(kafka_cfg, workload.pubs, [Phase(len(workload.pubs), RATE)]).start()
    words = documented_command()
    words[0] = str(SPARK_BIN / "spark-submit")
    words[words.index("app/main.py")] = str(ROOT / "app" / "main.py")
    cmd = [*words, "--workers", "2", "--partitions", "8", "--stop-after-idle", "4s",
           "--delivery", "exactly-once", "--mode", mode]
    env = {**os.environ, **geops_env, "PYSPARK_PYTHON": sys.executable,
           "PYSPARK_DRIVER_PYTHON": sys.executable}
    log = tmp_path / "spark-submit.log"
    with open(log, "w") as out:
        code = subprocess.run(cmd, env=env, cwd=tmp_path, stdout=out,
                              stderr=subprocess.STDOUT, timeout=600).returncode
    text = log.read_text()
    assert code == 0, text[-4000:]
    producer.join()
    assert "spark-sql-kafka-0-10_2.13" in text and "resolving dependencies" in text, \
        "Spark did not resolve the connector from --packages"
    assert "the driver JVM was not started by `geops app`" in text
    assert_exactly_once(kafka_cfg, workload.oracle, batches=mode == "micro-batch")
