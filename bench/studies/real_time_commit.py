"""What a real-time task's commit costs under at-least-once, part by part, on Apache Kafka.

Every period (200 ms while records arrive) an at-least-once task waits for its answers'
delivery (the first flush), encodes the states of the objects that changed (JSON,
``app.realtime.changelog``), sends them and waits for their delivery too (the second flush),
then commits its offsets (``app.realtime.delivery.Delivery.end``). This study starts a local
Apache Kafka, and for ``--periods`` periods produces what a task at 500 positions/s produces
in one (``--records`` Match records and four events each, spread over the period), then
times each part on its own:
the first flush, the states' encoding, the second flush. The task answers nothing while it
waits, so each part is time a publication that arrives meanwhile waits too.

Usage: ``python -m bench.studies.real_time_commit [--periods 200] [--records 100]``.
Prints each part's p50, p99 and mean, and the parts' share of a 200 ms period.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

import config
from app.realtime.changelog import Changelog
from geops.events import ObjectState
from kafkaio import broker
from kafkaio.sender import Sender
from kafkaio.topics import create_topics

PERIOD_MS = 200.0


def main() -> None:
    """Run the periods and print the parts."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--periods", type=int, default=200)
    ap.add_argument("--records", type=int, default=100)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as state:
        info, _ = broker.start(Path(state), port=0)
        try:
            parts = _periods(info.address, args.periods, args.records)
        finally:
            broker.stop(Path(state))
    print(f"{args.periods} periods of {args.records} Match records, {4 * args.records} events "
          f"and {args.records} objects' states each (loopback broker)")
    total = 0.0
    for name, took in parts.items():
        ms = np.array(took[10:]) * 1e3   # the first periods warm the producer up
        total += ms.mean()
        print(f"{name}: p50 {np.median(ms):.3f} ms, p99 {np.percentile(ms, 99):.3f} ms, "
              f"mean {ms.mean():.3f} ms ({ms.mean() / PERIOD_MS:.2%} of a period)")
    print(f"together: {total:.3f} ms a period ({total / PERIOD_MS:.2%})")


def _periods(address: str, periods: int, records: int) -> dict[str, list[float]]:
    cfg = config.load(environ={"GEOPS_BOOTSTRAP_SERVERS": address})
    create_topics(cfg)
    conf = cfg.kafka_client()
    out = Sender(conf, **{"linger.ms": 1})
    changelog = Changelog(conf, cfg.topic("object_state"), "app", 60.0)
    rng = np.random.default_rng(1)
    match = bytes(rng.integers(0, 256, 40, np.uint8))
    event = bytes(rng.integers(0, 256, 50, np.uint8))
    names = [f"obj-{k}" for k in range(100_000)]
    parts: dict[str, list[float]] = {"first flush": [], "states' JSON": [],
                                     "second flush": []}
    clock = 1_796_000_000_000
    for period in range(periods):
        for k in range(records):
            out.send(cfg.topic("matches"), match, key=str(k).encode())
            for _ in range(4):
                out.send(cfg.topic("events"), event, key=names[k].encode())
            out.poll()
            time.sleep(PERIOD_MS / 1000 / records)   # spread over the period, as they come
        began = time.perf_counter()
        out.flush()
        parts["first flush"].append(time.perf_counter() - began)
        changed = names[period * records % 90_000:][:records]
        states = {n: ObjectState(clock, (101, 2_002, 30_003), (0, 0, 1), 12.5, 45.25)
                  for n in changed}
        began = time.perf_counter()
        found = changelog.records(states, changed, dict.fromkeys(changed, 1), clock)
        parts["states' JSON"].append(time.perf_counter() - began)
        for part, key, value in found:
            out.send(cfg.topic("object_state"), value, key=key, partition=part)
        began = time.perf_counter()
        out.flush()
        parts["second flush"].append(time.perf_counter() - began)
        clock += int(PERIOD_MS)
    out.close()
    return parts


if __name__ == "__main__":
    main()
