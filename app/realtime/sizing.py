"""Whether the whole static side fits a real-time task, told before the tasks start.

Every real-time task holds every subscription. The app estimates what one task needs from the
subscriptions topic (its records, times their mean size in a sample of the first ones) and the
bytes a task held per byte on the topic while it read and built its index: measured about 2.5
plus ~20 MB (100,000 generated subscriptions, 43 MB on the topic: a peak of 122 MB above the
process's start), taken as ``BYTES_PER_TOPIC_BYTE`` with a margin. What a task may use is
``app.realtime_task_memory`` if given, else Spark's ``spark.executor.pyspark.memory``, else in
local mode the machine's available memory shared by the workers; on a cluster without either,
the app cannot know and does not refuse.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from kafkaio.offsets import EndOffsets, read_between

BYTES_PER_TOPIC_BYTE = 3
SAMPLE = 1_000  # records read to size the mean record


def static_side_bytes(conf: Mapping[str, str], topic: str, outage_limit: float
                      ) -> tuple[int, int]:
    """(records on the subscriptions topic, the bytes a task needs to hold them)."""
    probe = EndOffsets(conf)
    try:
        listed = probe.listed(topic, probe.partitions(topic))
    finally:
        probe.close()
    records = sum(high - low for low, high in listed.values())
    sizes: list[int] = []
    for p, (low, high) in sorted(listed.items()):
        if len(sizes) >= SAMPLE:
            break
        end = min(high, low + SAMPLE - len(sizes))
        sizes += [len(m.value() or b"") for m in read_between(conf, topic, {p: low}, {p: end},
                                                                outage_limit)]
    mean = sum(sizes) / len(sizes) if sizes else 0.0
    return records, int(BYTES_PER_TOPIC_BYTE * records * mean)


def available_bytes() -> int | None:
    """The machine's available memory (``MemAvailable``), or None where it cannot be read."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def task_bytes(given: int, pyspark_memory: int, local: bool, workers: int) -> int | None:
    """What one task may hold: ``given``, else ``pyspark_memory`` (0: not set), else in local
    mode the available memory shared by ``workers``; None: unknown."""
    if given:
        return given
    if pyspark_memory:
        return pyspark_memory
    available = available_bytes() if local else None
    return None if available is None else available // max(workers, 1)
