"""Range reads of large records: 16,000 records of 20 KB on the embedded broker, ranges of
4,000 (80 MB, more than the consumer queue's 64 MB), with librdkafka's default
``fetch.queue.backoff.ms`` and with 10 ms: does a full queue stall the read?

Usage: ``python -m bench.analysis.large_records`` (the re-check's
``read-whole-ab/large_records.txt``).
"""

from __future__ import annotations

import json
import time

import app.source as src
from bench.analysis.filled_topic import filled_topic
from kafkaio.clients import consumer

N, R = 16_000, 4_000


def main(argv: list[str] | None = None) -> None:
    with filled_topic(N, 20_000, **{"message.max.bytes": 1_000_000}) as conf:
        for backoff in (None, 10):
            extra = {} if backoff is None else {"fetch.queue.backoff.ms": backoff}
            src._CONSUMERS.clear()
            src._CONSUMERS[json.dumps(conf, sort_keys=True)] = consumer(
                conf, **src.READ_CONSUMER, **extra)
            walls = []
            for k in range(N // R):
                t0 = time.perf_counter()
                n = sum(1 for _ in src.iter_range(conf, src.KafkaRange("pubs", 0, R * k,
                                                                         R * (k + 1))))
                walls.append(time.perf_counter() - t0)
                assert n == R
            print(f"fetch.queue.backoff.ms {backoff or 'default':>7}: {R} x 20 KB per range, "
                  f"wall per range {[round(w * 1e3) for w in walls]} ms")


if __name__ == "__main__":
    main()
