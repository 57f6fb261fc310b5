"""The offline matcher behind `geops match`: GeoJSON files in, JSON lines of matches out.

It runs the app's path without Kafka or Spark: build the strategy, load every partition from
its payload, then per batch of publications route → group items by partition → match → merge.
Publications are identified by their position in the file (ids may repeat); the output has
one line per matched publication, in input order:
``{"publication_id": 12, "subscription_ids": [3, 40, 41]}`` (ids ascending).

Subscriptions follow the subscriptions topic's rule: a later feature with the same id replaces
an earlier one, which is reported as rejected.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from geops.geojson import Rejected, read_publications, read_subscriptions
from geops.model import Subscriptions
from geops.strategies import LocalRunner, build_strategy

BATCH = 20_000  # publications per batch (a micro-batch of the app)


@dataclass
class OfflineReport:
    """What `geops match` did, for its summary line and exit code."""

    subscriptions: int = 0
    publications: int = 0
    matched: int = 0
    pairs: int = 0
    items: int = 0
    candidates: int = 0
    num_partitions: int = 0
    build_seconds: float = 0.0
    match_seconds: float = 0.0
    rejected_subscriptions: list[Rejected] = field(default_factory=list)
    rejected_publications: list[Rejected] = field(default_factory=list)


def last_of_each_id(subs: Subscriptions, features: list[int]
                    ) -> tuple[Subscriptions, list[Rejected]]:
    """Keep the last subscription of each id; the earlier ones are rejected as replaced."""
    rev_ids = subs.ids[::-1]
    _, first_in_rev = np.unique(rev_ids, return_index=True)
    keep = np.sort(len(subs) - 1 - first_in_rev)
    dropped = np.setdiff1d(np.arange(len(subs)), keep)
    winner = dict(zip(subs.ids[keep].tolist(), keep.tolist(), strict=True))
    rejected = [Rejected(features[i], f"subscription id {subs.ids[i]} is replaced by feature "
                                      f"{features[winner[int(subs.ids[i])]]}")
                for i in dropped.tolist()]
    return subs.take(keep), rejected


def match_files(subscriptions: str | os.PathLike[str], publications: str | os.PathLike[str],
                out: str | os.PathLike[str], *, strategy: str = "sPIS", partitions: int = 16,
                partitioner: str = "kdbtree", batch: int = BATCH,
                log: Callable[[str], None] | None = None) -> OfflineReport:
    """Match the publications file against the subscriptions file, write ``out`` (JSON lines).

    Raises ``geops.geojson.GeoJSONError`` for an unusable input file, ``ValueError`` for bad
    settings and ``OSError`` when ``out`` cannot be written.
    """
    report = OfflineReport()
    subs, sub_features, report.rejected_subscriptions = read_subscriptions(subscriptions)
    subs, replaced = last_of_each_id(subs, sub_features)
    report.rejected_subscriptions = sorted(report.rejected_subscriptions + replaced,
                                           key=lambda r: r.index)
    pubs, _, report.rejected_publications = read_publications(publications)
    report.subscriptions, report.publications = len(subs), len(pubs)

    t0 = time.perf_counter()
    runner = LocalRunner(build_strategy(strategy, subs, partitions, partitioner))
    report.num_partitions = runner.strategy.num_partitions
    report.build_seconds = time.perf_counter() - t0
    if log:
        log(f"built {strategy} over {len(subs):,} subscriptions in "
            f"{report.num_partitions} {partitioner if strategy != 'RIhPS' else 'hash'} "
            f"partitions ({report.build_seconds:.2f} s)")

    with open(out, "w", encoding="utf-8") as fh:
        t0 = time.perf_counter()
        for lo in range(0, len(pubs), batch):
            keys = np.arange(lo, min(lo + batch, len(pubs)), dtype=np.int64)
            found = runner.match(keys, pubs.geoms[keys])
            report.matched += len(found.keys)
            report.pairs += len(found.sub_ids)
            report.items += found.items
            report.candidates += found.candidates
            fh.write(_lines(pubs.ids[found.keys], found.offsets, found.sub_ids))
            if log:
                log(f"matched {keys[-1] + 1:,}/{len(pubs):,} publications")
        report.match_seconds = time.perf_counter() - t0
    return report


def _lines(pub_ids: np.ndarray, offsets: np.ndarray, sub_ids: np.ndarray) -> str:
    ids = sub_ids.tolist()
    bounds = offsets.tolist()
    return "".join(
        f'{{"publication_id": {pid}, "subscription_ids": [{", ".join(map(str, ids[a:b]))}]}}\n'
        for pid, a, b in zip(pub_ids.tolist(), bounds[:-1], bounds[1:], strict=True))
