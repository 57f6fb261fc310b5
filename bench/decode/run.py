"""`geops bench decode`: decoding a read task's publications, per record vs in one pass.

On the publications of a generated GeoPS workload, encoded as ``geops publish`` encodes them,
it times in one process the codec's per-record ``decode_as`` (how read tasks decoded before
``schemas.publication_decoder``) and ``decode_publications``, keeps the best of ``repeat``
rounds of each, checks that both give the same records, and reports the ratio of the two,
measured in the same run.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from bench.harness.errors import MismatchError
from bench.harness.tables import text_table
from geops.workload import generate_workload
from schemas import codec
from schemas.publication_decoder import decode_publications
from schemas.records import publication_records

PER_RECORD = "codec, one record at a time"
BULK = "decode_publications, one pass"


@dataclass(frozen=True)
class DecodeTiming:
    method: str
    seconds: float
    records: int

    @property
    def us_per_record(self) -> float:
        return self.seconds / self.records * 1e6


def _best(run: Callable[[], object], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - t0)
    return best


def run_decode_bench(publications: int = 20_000, seed: int = 0, repeat: int = 5,
                     log: Callable[[str], None] = print) -> list[DecodeTiming]:
    """Time both decoders on ``publications`` encoded records; raise if they disagree."""
    log(f"generating {publications:,} publications (seed {seed})")
    wl = generate_workload(seed=seed, subscriptions=100, publications=publications)
    c = codec()
    values = [c.encode("Publication", r) for r in publication_records(wl.publications)]
    log(f"timing each decoder, best of {repeat} round{'s' * (repeat != 1)}")

    def per_record() -> list[dict]:
        return [c.decode_as("Publication", v) for v in values]

    expected = per_record()
    got = decode_publications(values)
    same = (not got.errors and got.ok.all()
            and got.ids.tolist() == [r["id"] for r in expected]
            and got.event_times.tolist() == [r["event_time"] for r in expected]
            and got.geometries.tolist() == [r["geometry"] for r in expected])
    if not same:
        raise MismatchError("decode_publications disagrees with the codec on this workload")
    return [DecodeTiming(PER_RECORD, _best(per_record, repeat), len(values)),
            DecodeTiming(BULK, _best(lambda: decode_publications(values), repeat), len(values))]


def format_table(timings: Sequence[DecodeTiming]) -> str:
    """One line per decoder; ratio = the per-record codec's time / this decoder's time."""
    base = timings[0].seconds
    return "\n".join(text_table(
        [("decoder", "32s"), ("ms", "9.1f"), ("us/record", "10.2f"), ("ratio", "7.2f")],
        ([t.method, t.seconds * 1e3, t.us_per_record, base / t.seconds] for t in timings)))
