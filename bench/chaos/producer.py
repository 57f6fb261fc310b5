"""The chaos run's publisher, a process of its own so that a fault can ``kill -9`` it:
publication ``i`` is base publication ``i mod N`` with id ``i``, sent in id order at a steady
rate, each stamped with the time it is sent, keyed by its id. Started again, it first reads
which ids the publications topic holds and sends only the others: those lost in flight when it
was killed, then on from the highest; no publication is lost or sent twice.

    python -m bench.chaos.producer BASE.pickle --rate R     (the topic and Kafka: GEOPS_*)

SIGTERM ends it after a flush; it prints a line every 10 s.
"""

from __future__ import annotations

import argparse
import pickle
import signal
import sys
import threading
import time
from pathlib import Path

import config
from kafkaio.offsets import EndOffsets, read_to_end
from kafkaio.sender import Sender
from schemas import codec

PROGRESS_S = 10.0


def ids_present(cfg: config.Config, topic: str) -> set[int]:
    """The ids (record keys) the topic holds now."""
    probe = EndOffsets(cfg.kafka_client())
    try:
        probe(topic)  # waits for the topic's partitions to have leaders
    finally:
        probe.close()
    return {int(m.key()) for m in read_to_end(cfg.kafka_client(), topic)
            if m.key() is not None}


def to_send(present: set[int]) -> tuple[list[int], int]:
    """The ids below the highest present that are missing, and the id to go on from."""
    top = max(present, default=-1)
    return [i for i in range(top) if i not in present], top + 1


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.chaos.producer", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("base", type=Path, help="pickled list of base Publication records")
    p.add_argument("--rate", type=float, required=True, help="publications per second")
    args = p.parse_args(argv)
    cfg = config.load()
    topic = cfg.topic("publications")
    base = pickle.loads(args.base.read_bytes())
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    present = ids_present(cfg, topic)
    missing, nxt = to_send(present)
    print(f"producer: {len(present):,} publications on '{topic}', {len(missing):,} missing "
          f"below id {nxt}; going on from there at {args.rate:,.0f}/s", flush=True)
    c = codec()
    sender = Sender(cfg.kafka_client(), rate=args.rate)
    last = time.monotonic()

    def send(i: int) -> None:
        rec = {**base[i % len(base)], "id": i, "event_time": int(time.time() * 1000)}
        sender.send(topic, c.encode("Publication", rec), key=str(i).encode())

    for i in missing:
        send(i)
    while not stop.is_set():
        send(nxt)
        nxt += 1
        if time.monotonic() - last >= PROGRESS_S:
            last = time.monotonic()
            print(f"producer: sent up to id {nxt - 1:,}", flush=True)
    sender.close()
    print(f"producer: stopped after id {nxt - 1:,}, every record delivered", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
