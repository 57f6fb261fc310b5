"""Subscriptions and publications of the GeoPS workload, optionally skewed, in memory.

Subscriptions: postcode polygons drawn uniformly with replacement, 20% areas, 30% districts, 50%
sectors (exact shares, shuffled); relation uniform over the nine non-DISJOINT relations or one
fixed relation; ids 0..N-1.

Publications: a share ``point_share`` of accident locations (points) and the rest, in ratio
1:2:3, the area, district or sector polygon that covers an accident location (exact shares,
shuffled); ids 0..M-1, event time ``start_time_ms + i * interval_ms``. Accident locations come
from a pool of ``max(2·M, 20,000)`` draws from the world's population (with replacement), so an
unskewed stream follows the population density.

Skew (``SkewSpec``): the partitioner is the app's, built from these subscriptions, and the hot
partitions are those ``initial_assignment`` gives to workers 0..H-1. A skewed stream draws each
publication's location from the hot or the cold part of the same pool (see
``geops.workload.skew``), steering **each kind separately** to S, so points, areas, districts and
sectors are all skewed alike and the processing-time skew follows the item skew. A kind that
cannot reach S (e.g. areas that all span hot and cold cells) stops at its limit and the other
kinds share the shortfall; near the overall limits a single greedy over all publications takes
over. An S outside the reachable range is refused with that range.

Moving objects (``objects`` N > 0, ``geops.workload.objects``): every publication is a point,
a position of object i mod N; the objects start at N of the stream's (steered) locations and
move along tracks from there, so the skew is the starting one, measured again on the
positions. A share of the subscriptions become fences that detect, some with a distance.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import shapely

from geops.errors import DataError, ParameterError
from geops.model import MIXED_RELATIONS, DetectKind, Publications, Relation, Subscriptions
from geops.partitioning import PARTITIONERS, SpatialPartitioner, build_partitioner
from geops.workload import objects as moving
from geops.workload.skew import (
    SkewSpec,
    hot_mask,
    hot_side,
    item_counts,
    measured_share,
    measured_skew,
    reachable,
    side_mask,
    sides,
    steer,
)
from geops.workload.world import LAYERS, Log, World, synthetic_world
from schemas.assignment import hot_partitions, initial_assignment

SUBSCRIPTION_SHARES: dict[str, float] = {"area": 0.2, "district": 0.3, "sector": 0.5}
PUBLICATION_KINDS: tuple[str, ...] = ("point", *LAYERS)
POLYGON_RATIO: dict[str, int] = {"area": 1, "district": 2, "sector": 3}
DEFAULT_SUBSCRIPTIONS = 10_000
DEFAULT_PUBLICATIONS = 100_000   # as in the load-balancing paper (10k subs, 100k pubs)
DEFAULT_POINT_SHARE = 0.4
DEFAULT_START_TIME_MS = 1_704_067_200_000  # 2024-01-01T00:00:00Z
DEFAULT_INTERVAL_MS = 1
SKEW_TOLERANCE = 0.005
_ROUNDS = 6  # rounds of per-kind target adjustment before steering all kinds together
_MIN_POOL = 20_000


@dataclass
class SkewReport:
    """How the stream's items spread over the hot workers' partitions."""

    spec: SkewSpec
    num_partitions: int
    assignment: list[int]
    hot_partitions: list[int]
    measured: float | None = None
    reachable: tuple[float, float] | None = None
    # the partitions the skewed share falls into (--hot-partitions K: K of them), and with
    # --moving-hotspot where it moves and from which publication on
    hot_side: list[int] | None = None
    moved_side: list[int] | None = None
    moved_at: int | None = None

    def to_json(self) -> dict[str, Any]:
        lo_hi = None if self.reachable is None else [round(v, 6) for v in self.reachable]
        measured = None if self.measured is None else round(self.measured, 6)
        out = {"requested": self.spec.target, "measured": measured,
               "hot_workers": self.spec.hot_workers, "workers": self.spec.workers,
               "balanced": round(self.spec.hot_workers / self.spec.workers, 6),
               "partitioner": self.spec.partitioner, "partitions": self.spec.partitions,
               "num_partitions": self.num_partitions, "hot_partitions": self.hot_partitions,
               "reachable": lo_hi}
        if self.spec.hot_partitions is not None or self.spec.moving:
            out.update({"hot_side": self.hot_side, "moved_side": self.moved_side,
                        "moved_at_publication": self.moved_at})
        return out


@dataclass
class Workload:
    """Generated subscriptions and publications with the layer each was drawn from."""

    subscriptions: Subscriptions
    publications: Publications
    subscription_layers: np.ndarray
    publication_layers: np.ndarray
    world: World
    skew: SkewReport | None = None
    partitioner: SpatialPartitioner | None = field(default=None, repr=False)
    # moving objects (None without): each publication's object id; each subscription's
    # detect kinds (DetectKind bit masks) and distance in metres (NaN: none)
    object_ids: np.ndarray | None = None
    detect: np.ndarray | None = None
    distance_m: np.ndarray | None = None
    roams: list[tuple[float, str] | None] | None = None  # roaming fences (None: none)

    def summary(self) -> dict[str, Any]:
        """Counts per layer and relation, and the skew, for ``workload.json``."""
        rel_counts = np.bincount(self.subscriptions.relations.astype(np.int64),
                                 minlength=len(Relation))
        return {
            "subscriptions": {
                "count": len(self.subscriptions),
                "layers": _label_counts(self.subscription_layers, LAYERS),
                "relations": {r.name: int(rel_counts[r]) for r in Relation if rel_counts[r]},
            },
            "publications": {
                "count": len(self.publications),
                "layers": _label_counts(self.publication_layers, PUBLICATION_KINDS),
            },
            "world": {layer: len(self.world.layers[layer]) for layer in LAYERS},
            "sources": dict(self.world.sources),
            "skew": None if self.skew is None else self.skew.to_json(),
            "objects": None if self.object_ids is None else {
                "count": len(set(self.object_ids.tolist())),
                "fences": int(np.count_nonzero(DetectKind.fixed(self.detect))),
                "roaming_fences": sum(r is not None for r in self.roams or ()),
                "distance_fences": int(np.count_nonzero(~np.isnan(self.distance_m))),
                "point_fences": int(np.count_nonzero(
                    (DetectKind.fixed(self.detect) != 0)
                    & (shapely.get_type_id(self.subscriptions.geoms) == 0))),
            },
        }


def _label_counts(labels: np.ndarray, names: tuple[str, ...]) -> dict[str, int]:
    return {name: int(np.count_nonzero(labels == name)) for name in names}


def split_counts(total: int, shares: list[float]) -> np.ndarray:
    """``total`` split by ``shares`` into integers summing to ``total`` (largest remainder)."""
    raw = np.asarray(shares, dtype=float) / sum(shares) * total
    counts = np.floor(raw).astype(np.int64)
    counts[np.argsort(counts - raw, kind="stable")[: total - counts.sum()]] += 1
    return counts


def _shuffled_labels(rng: np.random.Generator, names: tuple[str, ...],
                     counts: np.ndarray) -> np.ndarray:
    return rng.permutation(np.repeat(np.array(names), counts))


def generate_subscriptions(world: World, n: int, rng: np.random.Generator,
                           relation: Relation | None = None) -> tuple[Subscriptions, np.ndarray]:
    """``n`` subscriptions (20/30/50% areas/districts/sectors) and the layer of each."""
    labels = _shuffled_labels(rng, LAYERS,
                              split_counts(n, [SUBSCRIPTION_SHARES[layer] for layer in LAYERS]))
    geoms = np.empty(n, dtype=object)
    for layer in LAYERS:
        rows = np.flatnonzero(labels == layer)
        cells = world.layers[layer]
        geoms[rows] = cells[rng.integers(0, len(cells), size=len(rows))]
    if relation is None:
        relations = np.asarray(MIXED_RELATIONS, dtype=np.int8)[
            rng.integers(0, len(MIXED_RELATIONS), size=n)]
    else:
        relations = np.full(n, int(relation), dtype=np.int8)
    return Subscriptions(np.arange(n), geoms, relations), labels


def locate(world: World, points: np.ndarray) -> dict[str, np.ndarray]:
    """Per layer, the index of the cell covering each point (lowest index on shared borders),
    or -1 where no cell does. Nested layers are looked up through their finer layer."""
    geoms = shapely.points(points)
    found: dict[str, np.ndarray] = {}
    for layer in reversed(LAYERS):  # finest first, so coarser nested layers reuse it
        child = next((c for c, p in _children(world) if p == layer and c in found), None)
        if child is not None:
            cell = np.where(found[child] >= 0, world.parent[child][found[child]], -1)
        else:
            pairs = shapely.STRtree(world.layers[layer]).query(geoms, predicate="intersects")
            order = np.lexsort((pairs[1], pairs[0]))
            where, first = np.unique(pairs[0][order], return_index=True)
            cell = np.full(len(points), -1, dtype=np.int64)
            cell[where] = pairs[1][order][first]
        found[layer] = cell
    return found


def _children(world: World) -> list[tuple[str, str]]:
    """(finer layer, coarser layer) pairs whose nesting is known."""
    return [(c, LAYERS[LAYERS.index(c) - 1]) for c in world.parent]


def _validate(subscriptions: int, publications: int, point_share: float, interval_ms: int,
              skew: SkewSpec | None, objects: int = 0, roam_share: float = 0.0) -> None:
    if subscriptions < 0:
        raise ParameterError("subscriptions", f"must be >= 0, got {subscriptions}")
    if publications < 0:
        raise ParameterError("publications", f"must be >= 0, got {publications}")
    if objects < 0:
        raise ParameterError("objects", f"must be >= 0, got {objects}")
    if objects > publications:
        raise ParameterError("objects", f"must be at most {{publications}} ({publications}): "
                                        f"every object has a position, got {objects}")
    if objects and skew is not None and skew.moving:
        raise ParameterError("objects", "does not go with {moving_hotspot}: the objects move "
                                        "along their own tracks")
    if not 0.0 <= point_share <= 1.0:
        raise ParameterError("point_share", f"must be within [0, 1], got {point_share}")
    if not 0.0 <= roam_share <= 1.0 - moving.FENCE_SHARE:
        raise ParameterError("roam_share", f"must be within [0, {1.0 - moving.FENCE_SHARE:g}] "
                                           f"(the plain subscriptions), got {roam_share}")
    if roam_share and not objects:
        raise ParameterError("roam_share", "needs {objects}: roaming fences watch moving "
                                           "objects")
    if interval_ms < 0:
        raise ParameterError("interval_ms", f"must be >= 0, got {interval_ms}")
    if skew is None:
        return
    if skew.target is not None and not 0.0 <= skew.target <= 1.0:
        raise ParameterError("skew", f"must be within [0, 1], got {skew.target}")
    if skew.workers < 2:
        raise ParameterError("workers", f"must be >= 2 to have hot and cold workers, got "
                                        f"{skew.workers}")
    if not 1 <= skew.hot_workers < skew.workers:
        raise ParameterError("hot_workers", f"must be >= 1 and < {{workers}} ({skew.workers}), "
                                            f"got {skew.hot_workers}")
    if skew.partitions < skew.workers:
        raise ParameterError("partitions", f"must be >= {{workers}} ({skew.workers}) so every "
                                           f"worker owns a partition, got {skew.partitions}")
    if skew.hot_partitions is not None and skew.hot_partitions < 1:
        raise ParameterError("hot_partitions", f"must be >= 1, got {skew.hot_partitions}")
    if skew.hot_partitions is not None and skew.hot_partitions > skew.partitions:
        raise ParameterError("hot_partitions", f"must be at most {{partitions}} "
                                               f"({skew.partitions}), got {skew.hot_partitions}")
    if (skew.hot_partitions is not None or skew.moving) and skew.target is None:
        raise ParameterError("hot_partitions" if skew.hot_partitions is not None else
                             "moving_hotspot", "needs {skew}: the share of the stream items "
                             "that falls into the hot partitions")
    if skew.moving and skew.workers < 2 * skew.hot_workers:
        raise ParameterError("moving_hotspot", f"needs {{workers}} >= 2 x {{hot_workers}}: "
                                               f"the hot spot moves from workers 0..H-1 to "
                                               f"W/2..W/2+H-1, got W={skew.workers}, "
                                               f"H={skew.hot_workers}")
    if skew.partitioner not in PARTITIONERS:
        raise ParameterError("partitioner", f"must be one of {', '.join(PARTITIONERS)}, got "
                                            f"{skew.partitioner!r}")
    if subscriptions == 0:
        raise ParameterError("subscriptions", "must be > 0 to steer or measure skew: the "
                                              "partitioner is built from them")


def generate_workload(*, seed: int = 0, subscriptions: int = DEFAULT_SUBSCRIPTIONS,
                      publications: int = DEFAULT_PUBLICATIONS,
                      point_share: float = DEFAULT_POINT_SHARE, relation: Relation | None = None,
                      skew: SkewSpec | None = None, world: World | None = None,
                      start_time_ms: int = DEFAULT_START_TIME_MS,
                      interval_ms: int = DEFAULT_INTERVAL_MS,
                      skew_tolerance: float = SKEW_TOLERANCE,
                      objects: int = 0, first_id: int = 0, roam_share: float = 0.0,
                      log: Log | None = None) -> Workload:
    """Generate a workload deterministically from ``seed`` (the default world when none given).

    With ``skew`` the partitioner is built as the app builds it
    (``build_partitioner(kind, subscriptions, P, sample_seed=0)``), partitions go to workers by
    ``initial_assignment``, and with ``skew.target`` set the publications are chosen so that
    that fraction of stream items falls in the partitions of workers 0..H-1 (±``skew_tolerance``,
    else ParameterError naming the reachable range). With ``objects`` N > 0 the publications
    are positions of N moving objects (every one a point: ``point_share`` does not apply) and
    some subscriptions detect (see the module docstring); ``roam_share`` of them are roaming
    fences besides (``objects.roams``). Subscription and publication ids
    count from ``first_id`` (a second workload on topics that hold a first one).
    """
    _validate(subscriptions, publications, point_share, interval_ms, skew, objects, roam_share)
    world = world if world is not None else synthetic_world(seed, log=log)
    subs, sub_layers = generate_subscriptions(world, subscriptions,
                                              np.random.default_rng([seed, 1]), relation)
    detect = distance = roams = None
    if objects:
        geoms, detect, distance = moving.fences(np.random.default_rng([seed, 3]), subs.geoms)
        subs = Subscriptions(subs.ids, geoms, subs.relations)
        point_share = 1.0
        if roam_share:
            detect, roams = moving.roams(np.random.default_rng([seed, 5]), detect, roam_share)
    partitioner = None
    if skew is not None:
        if log:
            log(f"building the {skew.partitioner} partitioner ({skew.partitions} partitions)")
        partitioner = build_partitioner(skew.partitioner, subs, skew.partitions, sample_seed=0)
    rng = np.random.default_rng([seed, 2])
    kinds = _shuffled_labels(rng, PUBLICATION_KINDS, split_counts(
        publications, [point_share] + [(1 - point_share) * POLYGON_RATIO[layer] / 6
                                       for layer in LAYERS]))
    if log:
        log(f"drawing {publications:,} publications")
    pool = world.population.sample(rng, max(2 * publications, _MIN_POOL))
    cells = locate(world, pool)
    for layer in LAYERS:
        if np.any(kinds == layer) and not np.any(cells[layer] >= 0):
            raise DataError(f"no {layer} polygon ({world.sources.get(layer, 'given')}) covers "
                            f"any accident location ({world.sources.get('points', 'given')}); "
                            f"the layers and the points must cover the same region")

    report = None if partitioner is None else _skew_report(partitioner, skew)
    chosen = _choose(report, skew, partitioner, world, pool, cells, kinds, rng, skew_tolerance,
                     log, publications)

    geoms = np.empty(publications, dtype=object)
    is_point = kinds == "point"
    geoms[is_point] = shapely.points(pool[chosen[is_point]])
    for layer in LAYERS:
        rows = np.flatnonzero(kinds == layer)
        geoms[rows] = world.layers[layer][cells[layer][chosen[rows]]]
    object_ids = None
    if objects:
        track_rng = np.random.default_rng([seed, 4])
        starts = pool[chosen[track_rng.permutation(publications)[:objects]]]
        extent = tuple(shapely.total_bounds(world.layers[LAYERS[0]]).tolist())
        geoms = shapely.points(moving.tracks(track_rng, starts, publications, interval_ms,
                                             extent))
        object_ids = moving.object_names(objects, publications)
    if first_id:
        subs = Subscriptions(subs.ids + first_id, subs.geoms, subs.relations)
    pubs = Publications(first_id + np.arange(publications), geoms,
                        start_time_ms + interval_ms * np.arange(publications, dtype=np.int64))
    if report is not None and publications:
        _measure(report, skew, partitioner, pubs, publications)
    return Workload(subs, pubs, sub_layers, kinds, world, report, partitioner, object_ids,
                    detect, distance, roams)


def _skew_report(partitioner: SpatialPartitioner, skew: SkewSpec) -> SkewReport:
    """The report of a skewed workload before its publications are chosen: the initial
    assignment of the partitioner's partitions and the hot side, checked against
    ``skew.hot_partitions``."""
    assignment = initial_assignment(partitioner.num_partitions, skew.workers)
    report = SkewReport(skew, partitioner.num_partitions, assignment,
                        hot_partitions(assignment, skew.hot_workers))
    report.hot_side = hot_side(assignment, skew)
    if skew.hot_partitions is not None and len(report.hot_side) < skew.hot_partitions:
        raise ParameterError("hot_partitions", f"must be at most the {len(report.hot_side)} "
                                               f"partitions of the {{hot_workers}} "
                                               f"({skew.hot_workers}) hot worker(s), got "
                                               f"{skew.hot_partitions}")
    return report


def _choose(report: SkewReport | None, skew: SkewSpec | None,
            partitioner: SpatialPartitioner | None, world: World, pool: np.ndarray,
            cells: dict[str, np.ndarray], kinds: np.ndarray, rng: np.random.Generator,
            skew_tolerance: float, log: Log | None, publications: int) -> np.ndarray:
    """Which location of ``pool`` each publication takes: as the population falls, or steered
    so that ``skew.target`` of the items fall on the hot side (each half of the stream on its
    own side when the hot region moves)."""
    if report is None or skew.target is None or publications == 0:
        return _follow_population(kinds, cells, len(pool), rng)
    if skew.moving:
        # the hot region moves half-way: each half is steered to its own hot side
        half = publications // 2
        report.moved_side = hot_side(report.assignment, skew, moved=True)
        report.moved_at = half
        parts = []
        for rows, side in ((slice(0, half), report.hot_side),
                           (slice(half, publications), report.moved_side)):
            mask = side_mask(partitioner.num_partitions, side)
            parts.append(_steer(report, partitioner, world, pool, cells, kinds[rows], rng,
                                skew_tolerance, log, mask) if len(kinds[rows]) else
                         np.empty(0, np.int64))
        return np.concatenate(parts)
    mask = side_mask(partitioner.num_partitions, report.hot_side)
    return _steer(report, partitioner, world, pool, cells, kinds, rng, skew_tolerance, log,
                  mask)


def _measure(report: SkewReport, skew: SkewSpec, partitioner: SpatialPartitioner,
             pubs: Publications, publications: int) -> None:
    """Set ``report.measured``: the share of the items on the hot side of their part of the
    stream (with ``hot_partitions`` or a moving hot region), else on the hot workers."""
    if skew.hot_partitions is not None or skew.moving:
        # the share of the items in the hot side of their part of the stream
        half = report.moved_at if skew.moving else publications
        got = [measured_share(partitioner, pubs.geoms[rows],
                              side_mask(partitioner.num_partitions, side))
               for rows, side in ((slice(0, half), report.hot_side),
                                  (slice(half, publications), report.moved_side or []))
               if len(pubs.geoms[rows])]
        report.measured = sum(g[0] for g in got) / max(1, sum(g[1] for g in got))
    else:
        report.measured = measured_skew(partitioner, pubs.geoms, report.assignment,
                                        skew.hot_workers)


def _follow_population(kinds: np.ndarray, cells: dict[str, np.ndarray], pool_size: int,
                       rng: np.random.Generator) -> np.ndarray:
    """Pool index per publication, uniform over the locations usable for its kind."""
    chosen = np.empty(len(kinds), dtype=np.int64)
    for kind in PUBLICATION_KINDS:
        rows = np.flatnonzero(kinds == kind)
        usable = np.arange(pool_size) if kind == "point" else np.flatnonzero(cells[kind] >= 0)
        chosen[rows] = usable[rng.integers(0, len(usable), size=len(rows))]
    return chosen


def _steer(report: SkewReport, partitioner: SpatialPartitioner, world: World, pool: np.ndarray,
           cells: dict[str, np.ndarray], kinds: np.ndarray, rng: np.random.Generator,
           tolerance: float, log: Log | None, hot: np.ndarray | None = None) -> np.ndarray:
    """Pool index per publication such that the share of items in the ``hot`` partitions
    (default: the hot workers') is ``report.spec.target``; records the reachable range in
    ``report``."""
    spec = report.spec
    if hot is None:
        hot = hot_mask(report.assignment, spec.hot_workers)
    # Hot items and items of every pool location, per publication kind.
    h: dict[str, np.ndarray] = {}
    n: dict[str, np.ndarray] = {}
    h["point"], n["point"] = item_counts(partitioner, shapely.points(pool), hot)
    for layer in LAYERS:
        ch, cn = item_counts(partitioner, world.layers[layer], hot)
        located = cells[layer] >= 0
        h[layer] = np.where(located, ch[cells[layer]], 0)
        n[layer] = np.where(located, cn[cells[layer]], 0)
    counts = [int(np.count_nonzero(kinds == k)) for k in PUBLICATION_KINDS]
    target = spec.target
    lo, hi = reachable([h[k] for k in PUBLICATION_KINDS], [n[k] for k in PUBLICATION_KINDS],
                       counts)
    report.reachable = (lo, hi)
    if not lo - 1e-12 <= target <= hi + 1e-12:
        where = (f"{spec.hot_workers} hot of {spec.workers} workers" if spec.hot_partitions
                 is None else f"{spec.hot_partitions} hot partition(s)")
        raise ParameterError("skew", f"{target} is unreachable: with these subscriptions, "
                                     f"{partitioner.num_partitions} {spec.partitioner} "
                                     f"partitions, {where} and this publication mix the hot "
                                     f"share of stream items can only range over "
                                     f"[{lo:.4f}, {hi:.4f}]")
    if log:
        log(f"steering the hot share of stream items to {target} (reachable "
            f"[{lo:.3f}, {hi:.3f}])")
    # First every kind aims at the target itself (so points, areas, districts and sectors are
    # all skewed alike); kinds that cannot get there stop at their limit and the others share
    # the difference. Near the overall limits only the global greedy over all kinds gets there.
    present = [k for k, c in zip(PUBLICATION_KINDS, counts, strict=True) if c]
    span = {k: _ratio_range(h[k], n[k]) for k in present}
    targets = {k: float(np.clip(target, *span[k])) for k in present}
    for _ in range(_ROUNDS):
        chosen, hot_items, items = _steer_kinds(kinds, h, n, targets, rng)
        got = sum(hot_items.values()) / sum(items.values())
        if abs(got - target) <= tolerance:
            return chosen
        targets = _shared_targets(target, span, items)
    for extreme in (False, True):
        chosen, hot_items, items = _steer_kinds(kinds, h, n, dict.fromkeys(present, target),
                                                rng, extreme, together=True)
        got = sum(hot_items.values()) / sum(items.values())
        if abs(got - target) <= tolerance:
            return chosen
    raise ParameterError("skew", f"{target} could not be met within ±{tolerance} with "
                                 f"{len(kinds)} publications (got {got:.4f}); generate more "
                                 f"publications")


def _ratio_range(hot_items: np.ndarray, items: np.ndarray) -> tuple[float, float]:
    """Lowest and highest hot share of one candidate with items."""
    usable = items > 0
    ratio = hot_items[usable] / items[usable]
    return float(ratio.min()), float(ratio.max())


def _shared_targets(target: float, span: dict[str, tuple[float, float]],
                    items: dict[str, int]) -> dict[str, float]:
    """Per-kind targets ``clip(target + d, lo_k, hi_k)`` whose item-weighted mean is ``target``
    (items per kind as last seen); ``d`` by bisection, the mean being monotone in it."""
    def mean(d: float) -> float:
        return sum(float(np.clip(target + d, *span[k])) * items[k] for k in span) / \
            sum(items.values())

    low, high = -1.0, 1.0
    for _ in range(60):
        mid = (low + high) / 2
        low, high = (mid, high) if mean(mid) < target else (low, mid)
    return {k: float(np.clip(target + high, *span[k])) for k in span}


def _steer_kinds(kinds: np.ndarray, h: dict[str, np.ndarray], n: dict[str, np.ndarray],
                 targets: dict[str, float], rng: np.random.Generator, extreme: bool = False,
                 together: bool = False) -> tuple[np.ndarray, dict[str, int], dict[str, int]]:
    """Pool index per publication, steering each kind to its own target (or, ``together``,
    all publications as one stream to the one target); hot items and items per kind."""
    up, down = (np.empty(len(kinds), dtype=np.int64) for _ in range(2))
    for kind, kind_target in targets.items():
        rows = np.flatnonzero(kinds == kind)
        raising, lowering = sides(h[kind], n[kind], kind_target, extreme)
        up[rows] = raising[rng.integers(0, len(raising), size=len(rows))]
        down[rows] = lowering[rng.integers(0, len(lowering), size=len(rows))]
    hu, nu, hd, nd = (np.empty(len(kinds), dtype=np.int64) for _ in range(4))
    for kind in targets:
        rows = np.flatnonzero(kinds == kind)
        hu[rows], nu[rows] = h[kind][up[rows]], n[kind][up[rows]]
        hd[rows], nd[rows] = h[kind][down[rows]], n[kind][down[rows]]
    take_up = np.empty(len(kinds), dtype=bool)
    if together:
        take_up[:] = steer(next(iter(targets.values())), hu, nu, hd, nd)
    else:
        for kind, kind_target in targets.items():
            rows = np.flatnonzero(kinds == kind)
            take_up[rows] = steer(kind_target, hu[rows], nu[rows], hd[rows], nd[rows])
    chosen = np.where(take_up, up, down)
    hot_items = np.where(take_up, hu, hd)
    items = np.where(take_up, nu, nd)
    return (chosen, {k: int(hot_items[kinds == k].sum()) for k in targets},
            {k: int(items[kinds == k].sum()) for k in targets})
