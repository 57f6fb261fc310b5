"""Records the pooled consumer receives from the broker per 18,000-record range, and the wall
time of reading it, for a reader that keeps up (fast) and one that spends 8 us per record
between reads (slow, like decoding while the consumer is still assigned), for several
``queued.min.messages``. A one-partition topic of 300,000 300-byte records on the embedded
broker; four consecutive ranges per setting, medians printed. An optional argument sets
``fetch.queue.backoff.ms`` (librdkafka's default is 1000) on the consumer as well.

Usage: ``python -m bench.analysis.prefetch_records [BACKOFF_MS]`` (the re-check's
``read-whole-ab/prefetch_records.txt``, and ``prefetch_records_backoff10.txt`` with 10).
"""

from __future__ import annotations

import json
import statistics
import sys
import time

import app.source as src
from bench.analysis.filled_topic import filled_topic
from kafkaio.clients import consumer


def spin(us: float) -> None:
    """Busy-wait ``us`` microseconds (work between reads, without releasing the GIL)."""
    end = time.perf_counter() + us / 1e6
    while time.perf_counter() < end:
        pass


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    backoff = {"fetch.queue.backoff.ms": int(args[0])} if args else {}
    rx: dict[str, int] = {}

    def stats(text: str) -> None:
        rx["rxmsgs"] = json.loads(text).get("rxmsgs", 0)

    with filled_topic(300_000, 300) as conf:
        for qmin in (100_000, 20_000, 5_000, 1_000):
            for label, us in (("fast", 0), ("slow 8us/rec", 8)):
                src._CONSUMERS.clear()  # the pool the app's read tasks use, with this setting
                src._CONSUMERS[json.dumps(conf, sort_keys=True)] = consumer(conf, **{
                    **src.READ_CONSUMER, "statistics.interval.ms": 50, "stats_cb": stats,
                    "queued.min.messages": qmin, **backoff})
                rx.clear()
                prev, walls, received = 0, [], []
                for k in range(4):
                    part = src.KafkaRange("pubs", 0, 18_000 * k, 18_000 * (k + 1))
                    t0 = time.perf_counter()
                    for n, _ in enumerate(src.iter_range(conf, part), 1):
                        if us and n % 100 == 0:
                            spin(us * 100)
                    walls.append(time.perf_counter() - t0)
                    time.sleep(0.1)
                    src._pooled_consumer(conf).consume(1, 0.1)  # serves the stats callback
                    received.append(rx.get("rxmsgs", 0) - prev)
                    prev = rx.get("rxmsgs", 0)
                print(f"queued.min.messages {qmin:6d} {label:13s} wall per range "
                      f"{statistics.median(walls) * 1e3:6.1f} ms, records received per "
                      f"18,000-record range {statistics.median(received):8.0f}")


if __name__ == "__main__":
    main()
