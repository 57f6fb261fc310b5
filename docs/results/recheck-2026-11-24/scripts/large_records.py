"""Range reads of large records: 16,000 records of 20 KB on the embedded broker, ranges of
4,000 (80 MB, more than the consumer queue's 64 MB), with librdkafka's default
``fetch.queue.backoff.ms`` and with 10 ms: does a full queue stall the read?

Run from the repository root:
.venv/bin/python docs/results/recheck-2026-11-24/scripts/large_records.py
"""
import json
import os
import tempfile
import time
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic

import app.source as src
from kafkaio import broker
from kafkaio.clients import consumer, producer

state = Path(tempfile.mkdtemp(prefix="bigrec-"))
info, _ = broker.start(state, port=broker.free_port())
conf = {"bootstrap.servers": info.address}
admin = AdminClient(conf)
for f in admin.create_topics([NewTopic("pubs", 1, 1)]).values():
    f.result()
p = producer(conf, **{"message.max.bytes": 1_000_000})
value = os.urandom(20_000)
N, R = 16_000, 4_000
for _ in range(N):
    while True:
        try:
            p.produce("pubs", value)
            break
        except BufferError:
            p.poll(0.05)
p.flush()
try:
    for backoff in (None, 10):
        src._CONSUMERS.clear()
        extra = {"enable.partition.eof": True, "fetch.wait.max.ms": 5}
        if backoff is not None:
            extra["fetch.queue.backoff.ms"] = backoff
        src._CONSUMERS[json.dumps(conf, sort_keys=True)] = consumer(conf, **extra)
        walls = []
        for k in range(N // R):
            t0 = time.perf_counter()
            n = sum(1 for _ in src.iter_range(conf, src.KafkaRange("pubs", 0, R * k, R * (k + 1))))
            walls.append(time.perf_counter() - t0)
            assert n == R
        print(f"fetch.queue.backoff.ms {backoff or 'default':>7}: {R} x 20 KB per range, "
              "wall per range "
              f"{[round(w * 1e3) for w in walls]} ms")
finally:
    broker.stop(state)
