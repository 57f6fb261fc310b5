"""The offline matcher behind `geops match`: GeoJSON files in, JSON lines of matches out
(or, with ``--events``, of geofence events: ``events_files``).

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
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TextIO

import numpy as np

from geops.events import Event, EventEngine, PairEvent
from geops.geojson import (
    Rejected,
    read_fence_subscriptions,
    read_fences,
    read_positions,
    read_publications,
)
from geops.model import DetectKind, Relation, Subscriptions
from geops.roam import RoamEngine, RoamFences
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


def _last_of_each_id(ids: np.ndarray, features: list[int]) -> tuple[np.ndarray, list[Rejected]]:
    """The rows of the last subscription of each id, and the earlier ones rejected."""
    _, first_in_rev = np.unique(ids[::-1], return_index=True)
    keep = np.sort(len(ids) - 1 - first_in_rev)
    dropped = np.setdiff1d(np.arange(len(ids)), keep)
    winner = dict(zip(ids[keep].tolist(), keep.tolist(), strict=True))
    rejected = [Rejected(features[i], f"subscription id {ids[i]} is replaced by feature "
                                      f"{features[winner[int(ids[i])]]}")
                for i in dropped.tolist()]
    return keep, rejected


def match_files(subscriptions: str | os.PathLike[str], publications: str | os.PathLike[str],
                out: str | os.PathLike[str], *, strategy: str = "sPIS", partitions: int = 16,
                partitioner: str = "kdbtree", batch: int = BATCH,
                log: Callable[[str], None] | None = None) -> OfflineReport:
    """Match the publications file against the subscriptions file, write ``out`` (JSON lines).

    Raises ``geops.geojson.GeoJSONError`` for an unusable input file, ``ValueError`` for bad
    settings and ``OSError`` when ``out`` cannot be written.
    """
    report = OfflineReport()
    subs, detect, distance, sub_features, report.rejected_subscriptions = \
        read_fence_subscriptions(subscriptions)
    keep, replaced = _last_of_each_id(subs.ids, sub_features)
    subs, refused = matched_as(subs.take(keep), detect[keep], distance[keep],
                               [sub_features[k] for k in keep.tolist()])
    report.rejected_subscriptions = sorted(report.rejected_subscriptions + replaced + refused,
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


def matched_as(subs: Subscriptions, detect: np.ndarray, distance: np.ndarray,
               features: list[int]) -> tuple[Subscriptions, list[Rejected]]:
    """The subscriptions as the app matches them: a fence (detect kinds) by its shape (its
    distance fence, or its geometry) and the relation intersects, whatever its own
    (``geops.events``); a subscription whose distance makes no fence is rejected by its
    feature index, as the app dead-letters it."""
    detect = DetectKind.fixed(detect)  # roaming fences match as plain subscriptions
    fenced = np.flatnonzero((detect != 0) | ~np.isnan(distance))
    if not len(fenced):
        return subs, []
    geoms, relations = subs.geoms.copy(), subs.relations.copy()
    if (~np.isnan(distance)).any():
        from geops.fences import fence_shapes  # pyproj, only for distance fences

        geoms, problems = fence_shapes(subs.ids, geoms, detect, distance)
    else:
        problems = [None] * len(subs)
    relations[detect != 0] = Relation.INTERSECTS
    refused = [Rejected(features[k], p) for k, p in enumerate(problems) if p]
    ok = np.array([p is None for p in problems], bool)
    out = Subscriptions(subs.ids, geoms, relations)
    return out.take(np.flatnonzero(ok)), refused


def _lines(pub_ids: np.ndarray, offsets: np.ndarray, sub_ids: np.ndarray) -> str:
    ids = sub_ids.tolist()
    bounds = offsets.tolist()
    return "".join(
        f'{{"publication_id": {pid}, "subscription_ids": [{", ".join(map(str, ids[a:b]))}]}}\n'
        for pid, a, b in zip(pub_ids.tolist(), bounds[:-1], bounds[1:], strict=True))


@dataclass
class EventsReport:
    """What `geops match --events` did, for its summary line and exit code."""

    subscriptions: int = 0
    fences: int = 0
    publications: int = 0
    positions: int = 0
    events: int = 0
    expired: int = 0
    dropped: int = 0
    roaming_fences: int = 0
    roaming_events: int = 0
    late: int = 0
    seconds: float = 0.0
    rejected_subscriptions: list[Rejected] = field(default_factory=list)
    rejected_publications: list[Rejected] = field(default_factory=list)


ROAM_LATENESS_MS = 10_000  # positions held back for roaming (``geops.roam``), by default


def events_files(subscriptions: str | os.PathLike[str], publications: str | os.PathLike[str],
                 out: str | os.PathLike[str], *, object_id_field: str = "object_id",
                 ttl_ms: int | None = 600_000, roam_lateness_ms: int = ROAM_LATENESS_MS,
                 log: Callable[[str], None] | None = None) -> EventsReport:
    """The geofence events of the publications file against the detecting subscriptions of
    the subscriptions file, one publication after another in file order (``geops.events``),
    written to ``out`` as JSON lines (``Event.to_json``). Publications without an object id
    are no positions and give nothing. At the end, every object unseen for more than the TTL
    before the latest event time of the file expires (``EventEngine.expire``).

    Roaming fences (``geops.roam``) see the same positions in file order as a stream would
    bring them: a position is held until the file's clock is ``roam_lateness_ms`` past it,
    and one that comes later than that is left out (counted in ``late``); their events are
    written as they come, between the others, and the rest at the end.

    Raises ``geops.geojson.GeoJSONError`` for an unusable input file and ``OSError`` when
    ``out`` cannot be written.
    """
    report = EventsReport()
    subs, detect, distance, features, report.rejected_subscriptions, roams = \
        read_fences(subscriptions)
    keep, replaced = _last_of_each_id(subs.ids, features)
    subs, detect, distance = subs.take(keep), detect[keep], distance[keep]
    roams = [roams[k] for k in keep.tolist()]
    features = [features[k] for k in keep.tolist()]
    engine = EventEngine(ttl_ms)
    problems = engine.set_fences(subs.ids, subs.geoms, detect, distance)
    roaming = RoamEngine(RoamFences.of(subs.ids, [r if p is None else None for r, p in
                                                  zip(roams, problems, strict=True)], detect),
                         ttl_ms, roam_lateness_ms)
    refused = [Rejected(features[k], problem) for k, problem in enumerate(problems) if problem]
    report.rejected_subscriptions = sorted(report.rejected_subscriptions + replaced + refused,
                                           key=lambda r: r.index)
    report.subscriptions, report.fences = len(subs) - len(refused), len(engine.fences)
    report.roaming_fences = len(roaming.fences)
    pubs, objects, _, report.rejected_publications = read_positions(publications,
                                                                    object_id_field)
    report.publications = len(pubs)
    positions = np.flatnonzero(np.array([o is not None for o in objects], bool))
    report.positions = len(positions)
    if log:
        log(f"{report.fences:,} detecting fences and {report.roaming_fences:,} roaming ones of "
            f"{report.subscriptions:,} subscriptions; {report.positions:,} positions of "
            f"{len(set(objects[positions].tolist())):,} objects among "
            f"{report.publications:,} publications")
    t0 = time.perf_counter()
    with open(out, "w", encoding="utf-8") as fh:
        for n, k in enumerate(positions.tolist(), 1):
            at = slice(k, k + 1)
            events: list[Event | PairEvent] = list(engine.process(
                objects[at], pubs.ids[at], pubs.event_time[at], pubs.geoms[at]))
            events += roaming.process(objects[at], pubs.ids[at], pubs.event_time[at],
                                      pubs.geoms[at])
            _write_events(fh, events, report)
            if log and n % 20_000 == 0:
                log(f"{n:,}/{report.positions:,} positions")
        if len(positions):
            _write_events(fh, engine.expire(int(pubs.event_time[positions].max())), report)
        _write_events(fh, roaming.finish(), report)
    report.dropped, report.late = engine.dropped, roaming.late
    report.seconds = time.perf_counter() - t0
    return report


def _write_events(fh: TextIO, events: Sequence[Event | PairEvent], report: EventsReport
                  ) -> None:
    """Write events as JSON lines and count them (expiries, roaming ones) in ``report``."""
    report.events += len(events)
    report.expired += sum(e.reason is not None for e in events)
    report.roaming_events += sum(isinstance(e, PairEvent) for e in events)
    fh.write("".join(e.to_json() + "\n" for e in events))
