"""`python -m bench.studies.static_memory`: what a worker's Python process holds per subscription.

In one plain Python process (no Spark) it builds what a join task builds for the static
partitions of one strategy, from the payloads the executors cache, and measures each piece
after a garbage collection and ``malloc_trim``:

- *payload bytes*: every partition's payload (a join task receives them each batch);
- *decoded*: ``payload.decode`` of every payload (ids, relations, GEOS geometries);
- *prepared*: ``shapely.prepare`` of those geometries (GEOS builds a prepared geometry's
  indexes lazily, on its first predicate, so this is the bare object);
- *R-tree* (sPIS): ``EnvelopeIndex`` over the partitions' envelopes;
- *resident matchers*: ``load_partition`` of every payload, what ``app.batch.tasks`` keeps per
  residency (each of the pieces above but the payloads, as the code builds them);
- *after matching*: what the resident matchers grew by while matching a batch of
  publications (the prepared geometries' indexes, built on use);
- *router index* (RIhPS / RIsPS): the replicated R-tree each stream-side process builds.

Each piece is reported as bytes per subscription three ways: traced by ``tracemalloc``
(Python objects and NumPy arrays), the C heap in use (``mallinfo2``: GEOS, libspatialindex,
NumPy; not Python's small-object arenas) and the resident set (RSS); tracemalloc's own
bookkeeping is taken out of the last two. GEOS memory is invisible to tracemalloc.
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import time
import tracemalloc
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import shapely

from config.choices import STRATEGIES
from geops.index import EnvelopeIndex
from geops.relations import Shapes
from geops.strategies import LocalRunner, build_strategy, payload
from geops.workload import generate_workload

_LIBC = ctypes.CDLL("libc.so.6")


class _Mallinfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]


_LIBC.mallinfo2.restype = _Mallinfo2


def heap_in_use() -> int:
    """Bytes of the C heap in use (glibc's ``mallinfo2``: arena chunks in use plus mmaps)."""
    info = _LIBC.mallinfo2()
    return int(info.uordblks + info.hblkhd)


def rss() -> int:
    """This process's resident set in bytes."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * _PAGE


_PAGE = int(_LIBC.getpagesize())


@dataclass(frozen=True)
class Piece:
    """One measured piece: bytes traced by tracemalloc, C heap in use and RSS it added."""

    name: str
    traced: int
    heap: int
    rss: int
    seconds: float


def _settle() -> tuple[int, int, int, int]:
    gc.collect()
    _LIBC.malloc_trim(0)
    return (tracemalloc.get_traced_memory()[0], heap_in_use(), rss(),
            tracemalloc.get_tracemalloc_memory())


def measure(name: str, build: Callable[[], Any]) -> tuple[Any, Piece]:
    """Run ``build`` and return what it built (kept alive) with what it added."""
    t0, h0, r0, m0 = _settle()
    start = time.perf_counter()
    built = build()
    seconds = time.perf_counter() - start
    t1, h1, r1, m1 = _settle()
    own = m1 - m0  # tracemalloc's bookkeeping of the new traces, in the heap and the RSS
    return built, Piece(name, t1 - t0, h1 - h0 - own, r1 - r0 - own, seconds)


@dataclass(frozen=True)
class Report:
    """The pieces of one strategy's static side at one size."""

    strategy: str
    subscriptions: int
    publications: int
    placed: int          # subscriptions in the partitions (sPS / sPIS replicate)
    payload_bytes: int
    candidates: int      # candidate pairs of the matched batch
    coverage: float      # share of placed subscriptions that were a candidate
    pieces: list[Piece]


def measure_strategy(name: str, workload: Any, partitions: int) -> Report:
    """Build strategy ``name``'s static side from ``workload`` piece by piece (see the
    module's docstring) and measure each piece."""
    subs = workload.subscriptions
    strategy = build_strategy(name, subs, partitions)
    pieces: list[Piece] = []
    payloads, piece = measure("payload bytes", lambda: [
        strategy.partition_payload(p) for p in range(strategy.num_partitions)])
    pieces.append(piece)
    decoded, piece = measure("decoded (ids, relations, geometries)",
                             lambda: [payload.decode(p)[0] for p in payloads])
    pieces.append(piece)
    placed = sum(len(d) for d in decoded)
    _, piece = measure("shapely.prepare (bare)",
                       lambda: [shapely.prepare(d.geoms) for d in decoded])
    pieces.append(piece)
    if name in ("sPS", "sPIS"):
        bounds = [shapely.bounds(d.geoms) for d in decoded]
        _, piece = measure("R-tree (EnvelopeIndex)", lambda: [EnvelopeIndex(b) for b in bounds])
        pieces.append(piece)
    decoded.clear()
    payload_bytes = sum(len(p) for p in payloads)
    runner, piece = measure("resident matchers (load_partition)", lambda: LocalRunner(strategy))
    pieces.append(piece)
    if hasattr(runner.router, "index"):
        _, piece = measure("router index (per process)", lambda: runner.router.index())
        pieces.append(piece)
    pubs = workload.publications.geoms
    keys = np.arange(len(pubs), dtype=np.int64)
    seen = [np.zeros(len(m.index.ids), bool) for m in runner.matchers]
    matched, piece = measure("after matching (grown)",
                             lambda: _match(runner, keys, pubs, seen))
    pieces.append(piece)
    coverage = sum(int(s.sum()) for s in seen) / max(1, placed)
    return Report(name, len(subs), len(pubs), placed, payload_bytes, matched.candidates,
                  coverage, pieces)


def _match(runner: LocalRunner, keys: np.ndarray, geoms: np.ndarray,
           seen: list[np.ndarray]) -> Any:
    """Match the batch, noting which subscription slots were candidates."""
    routed = runner.router.route(geoms)
    for pid, items in routed.by_partition():
        matcher = runner.matchers[pid]
        pairs = matcher._pairs(Shapes.of(geoms[items.pub_index]),
                               items.cand_offsets, items.cand_ids)
        for _, slot in pairs:
            seen[pid][slot] = True
    return runner.match(keys, geoms)


def format_report(report: Report) -> str:
    """One table of the pieces in bytes per subscription."""
    n = report.subscriptions
    lines = [f"{report.strategy}: {n:,} subscriptions ({report.placed:,} placed), payload "
             f"{report.payload_bytes / n:,.0f} B/sub; batch of {report.publications:,} "
             f"publications: {report.candidates:,} candidates, "
             f"{report.coverage:.0%} of placed subscriptions were one",
             f"  {'piece':<40}{'traced':>10}{'C heap':>10}{'RSS':>10}{'s':>8}   (B/sub)"]
    for p in report.pieces:
        lines.append(f"  {p.name:<40}{p.traced / n:>10,.0f}{p.heap / n:>10,.0f}"
                     f"{p.rss / n:>10,.0f}{p.seconds:>8.2f}")
    return "\n".join(lines)


def _positive(text: str) -> int:
    value = int(text.replace("_", "").replace(",", ""))
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _strategies(text: str) -> list[str]:
    names = [s.strip() for s in text.split(",") if s.strip()]
    bad = [s for s in names if s not in STRATEGIES]
    if bad or not names:
        raise argparse.ArgumentTypeError(
            f"unknown strategy {', '.join(bad) or '(none)'}; choose from {', '.join(STRATEGIES)}")
    return names


def parser() -> argparse.ArgumentParser:
    """The command line of ``python -m bench.studies.static_memory``."""
    p = argparse.ArgumentParser(prog="python -m bench.studies.static_memory",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--subscriptions", type=_positive, default=50_000,
                   help="subscriptions to generate (default 50,000)")
    p.add_argument("--publications", type=_positive, default=2_000,
                   help="publications of the matched batch (default 2,000)")
    p.add_argument("--strategies", type=_strategies, default=["sPIS", "RIsPS"],
                   help="comma-separated strategies (default sPIS,RIsPS)")
    p.add_argument("--partitions", type=_positive, default=16, help="static partitions (16)")
    p.add_argument("--seed", type=int, default=9, help="workload seed (9, as bench scale)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Measure and print one table per strategy."""
    args = parser().parse_args(argv)
    workload = generate_workload(seed=args.seed, subscriptions=args.subscriptions,
                                 publications=args.publications)
    tracemalloc.start()
    try:
        for name in args.strategies:
            print(format_report(measure_strategy(name, workload, args.partitions)), flush=True)
    finally:
        tracemalloc.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
