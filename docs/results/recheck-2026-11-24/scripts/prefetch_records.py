"""Records the pooled consumer receives from the broker per 18,000-record range, and the wall
time of reading it, for a reader that keeps up (fast) and one that spends 8 us per record
between reads (slow, like decoding while the consumer is still assigned), for several
``queued.min.messages``. A one-partition topic of 300,000 300-byte records on the embedded
broker; four consecutive ranges per setting, medians printed. An optional argument sets
``fetch.queue.backoff.ms`` (librdkafka's default is 1000) on the consumer as well.

Run from the repository root:
.venv/bin/python docs/results/recheck-2026-11-24/scripts/prefetch_records.py [backoff ms]
"""
import json
import statistics
import sys
import time

from filled_topic import filled_topic

import app.source as src
from kafkaio.clients import consumer

rx: dict[str, int] = {}
backoff = {"fetch.queue.backoff.ms": int(sys.argv[1])} if len(sys.argv) > 1 else {}


def stats(text: str) -> None:
    rx["rxmsgs"] = json.loads(text).get("rxmsgs", 0)


def spin(us: float) -> None:
    end = time.perf_counter() + us / 1e6
    while time.perf_counter() < end:
        pass


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
                  f"{statistics.median(walls) * 1e3:6.1f} ms, records received per 18,000-record "
                  f"range {statistics.median(received):8.0f}")
