"""`geops bench kernel`: each strategy against the vectorised single-core matching limit.

On one generated GeoPS workload, in one process on one core, it times

- the **reference**: an ``shapely.STRtree`` over the subscriptions, one bulk envelope query for
  all publications, the exact kernel ``geops.relations.evaluate`` on the candidate pairs, and
  DISJOINT as the complement of the intersecting pairs — no partitions, no routing;
- each **strategy** through the app's interface (route → match every partition → merge), with
  the one-time build (partitioning, payloads, loading every partition) reported apart;
- for scale, plain shapely: per relation an STRtree of the publications queried with the
  subscriptions and the relation as the tree predicate (no kernel shortcuts).

Every result must equal the reference's. The ratio is reference time / strategy time, so it
measures what routing, partitioning, replication and merging cost over the bare kernel.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import shapely

from bench.harness.errors import MismatchError
from bench.harness.tables import text_table
from geops.model import Relation, Subscriptions
from geops.relations import Shapes, evaluate
from geops.strategies import STRATEGIES, BatchMatches, LocalRunner, PartialMatches, build_strategy
from geops.strategies.merge import merge, pairs_to_csr
from geops.workload import generate_workload
from geops.workload.generate import DEFAULT_POINT_SHARE

REFERENCE = "reference"
PLAIN = "shapely predicates"


class ReferenceMatcher:
    """STRtree over the subscriptions + the exact kernel, in one piece (no partitions)."""

    def __init__(self, subs: Subscriptions):
        geoms = shapely.from_wkb(shapely.to_wkb(subs.geoms))  # own copies, prepared
        shapely.prepare(geoms)
        self.ids, self.relations = subs.ids, subs.relations
        self.shapes = Shapes.of(geoms)
        self.tree = shapely.STRtree(geoms)
        self.disjoint = np.sort(subs.ids[subs.relations == Relation.DISJOINT])

    def match(self, keys: np.ndarray, geoms: np.ndarray) -> BatchMatches:
        pubs = Shapes.of(geoms)
        pub, sub = self.tree.query(pubs.geoms)
        relation = self.relations[sub]
        holds = evaluate(relation, self.shapes, sub, pubs, pub)
        disjoint = relation == Relation.DISJOINT
        pos, exc = holds & ~disjoint, disjoint & ~holds
        part = PartialMatches(keys[pub[pos]], self.ids[sub[pos]], keys[pub[exc]],
                              self.ids[sub[exc]], len(pub))
        out = merge(keys, [part], self.disjoint)
        return BatchMatches(*out, items=len(keys), candidates=len(pub))


def plain_match(subs: Subscriptions, keys: np.ndarray, geoms: np.ndarray) -> BatchMatches:
    """Shapely alone: per relation, publications' STRtree queried with the tree predicate."""
    tree = shapely.STRtree(geoms)
    found_keys, found_ids = [], []
    for code in np.unique(subs.relations):
        rel = Relation(int(code))
        rows = np.flatnonzero(subs.relations == code)
        if rel is Relation.EQUALS:
            sub, pub = tree.query(subs.geoms[rows])
            keep = shapely.equals(subs.geoms[rows][sub], geoms[pub])
            sub, pub = sub[keep], pub[keep]
        elif rel is Relation.DISJOINT:
            hit = np.zeros((len(rows), len(geoms)), bool)
            hit[tuple(tree.query(subs.geoms[rows], predicate="intersects"))] = True
            sub, pub = np.nonzero(~hit)
        else:
            sub, pub = tree.query(subs.geoms[rows], predicate=rel.name.lower())
        found_keys.append(keys[pub])
        found_ids.append(subs.ids[rows][sub])
    out = pairs_to_csr(np.concatenate([np.empty(0, np.int64), *found_keys]),
                       np.concatenate([np.empty(0, np.int64), *found_ids]))
    return BatchMatches(*out, items=len(keys), candidates=-1)  # inside GEOS: not counted


@dataclass
class Row:
    """One timed matcher: one-time build, matching the whole batch, and what it did
    (``candidates`` -1: not observable, the tree predicate refines inside GEOS)."""

    name: str
    build_seconds: float
    match_seconds: float
    items: int
    candidates: int
    pairs: int
    ratio: float = 0.0


@dataclass
class KernelReport:
    subscriptions: int
    publications: int
    partitions: int
    partitioner: str
    seed: int
    rows: list[Row]


def _same(a: BatchMatches, b: BatchMatches) -> bool:
    return (np.array_equal(a.keys, b.keys) and np.array_equal(a.offsets, b.offsets)
            and np.array_equal(a.sub_ids, b.sub_ids))


def run_kernel_bench(*, subscriptions: int = 10_000, publications: int = 20_000, seed: int = 0,
                     partitions: int = 16, partitioner: str = "kdbtree",
                     strategies: Sequence[str] = STRATEGIES, repeat: int = 1, plain: bool = True,
                     point_share: float = DEFAULT_POINT_SHARE, relation: Relation | None = None,
                     log: Callable[[str], None] | None = None) -> KernelReport:
    """Time the reference, each strategy (and plain shapely); raise MismatchError on a
    result that differs from the reference's."""
    say = log or (lambda _message: None)
    say(f"generating {subscriptions:,} subscriptions and {publications:,} publications")
    workload = generate_workload(seed=seed, subscriptions=subscriptions,
                                 publications=publications, point_share=point_share,
                                 relation=relation)
    subs = workload.subscriptions
    geoms = workload.publications.geoms
    keys = np.arange(len(geoms), dtype=np.int64)

    matchers: list[tuple[str, Callable[[], object], Callable[[object], BatchMatches]]] = [
        (REFERENCE, lambda: ReferenceMatcher(subs), lambda m: m.match(keys, geoms))]
    matchers += [(name, lambda name=name: LocalRunner(build_strategy(name, subs, partitions,
                                                                     partitioner)),
                  lambda runner: runner.match(keys, geoms)) for name in strategies]
    if plain:
        matchers.append((PLAIN, lambda: None, lambda _none: plain_match(subs, keys, geoms)))
    rows, built = [], []
    for name, build, _ in matchers:
        t0 = time.perf_counter()
        built.append(build())
        rows.append(Row(name, time.perf_counter() - t0, float("inf"), 0, 0, 0))
    # Round-robin repeats, best time each, so a drift in machine load hits every matcher alike.
    for rep in range(repeat):
        ref = None
        for row, (name, _, run), state in zip(rows, matchers, built, strict=True):
            say(f"{name} (run {rep + 1} of {repeat})")
            t0 = time.perf_counter()
            got = run(state)
            row.match_seconds = min(row.match_seconds, time.perf_counter() - t0)
            ref = ref or got
            if not _same(got, ref):
                raise MismatchError(f"{name}: result differs from the reference")
            row.items, row.candidates, row.pairs = got.items, got.candidates, len(got.sub_ids)
    for row in rows:
        row.ratio = rows[0].match_seconds / row.match_seconds
    return KernelReport(subscriptions, publications, partitions, partitioner, seed, rows)


def format_table(report: KernelReport) -> str:
    """The benchmark as a plain-text table (times in seconds)."""
    head = (f"kernel benchmark: {report.subscriptions:,} subscriptions, "
            f"{report.publications:,} publications (seed {report.seed}), "
            f"{report.partitions} partitions ({report.partitioner}; RIhPS hashes), one core")
    table = text_table(
        [("matcher", "<20"), ("build s", ">9.3f"), ("match s", ">9.3f"), ("items", ">10,"),
         ("candidates", ">12"), ("pairs", ">10,"), ("ratio", ">8.2f")],
        ([r.name, r.build_seconds, r.match_seconds, r.items,
          f"{r.candidates:,}" if r.candidates >= 0 else "-", r.pairs, r.ratio]
         for r in report.rows), sep="")
    return "\n".join([head, *table, "ratio = reference match time / matcher match time; every "
                      "result equals the reference's"])
