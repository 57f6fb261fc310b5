"""Splitting a hot static partition into child partitions vs replicating it.

``python -m bench.studies.hot_split --out docs/results/hot-partitions/split``

Splitting a hot cell into children is worth considering where the static data is large, and
worth measuring before choosing. This measures both on generated hot-spot workloads
(``geops generate --hot-partitions 1``: the skewed share of the stream items in one partition
of the KDB-tree partitioner the app builds): the hottest partition's join work, as candidate
pairs (item envelope x subscription envelope, what the join's R-tree yields and the predicates
then test), is divided k ways

- by **replication** as the app does it (``owner_index``: publication key mod k), every owner
  holding the whole partition;
- by a **split** of the cell into k KDB-tree children, each owner holding one child: at the
  median of the cell's *subscriptions* (what the partitioner itself does; the static side
  alone decides), at the median of its *stream items*, and at the median of the items
  weighted by their candidate pairs (*load*: the best a median split can do for the stream it
  was cut for, which a live split could only estimate from past batches).

Per k it reports the most loaded owner's share against the fair 1/k (``max / mean``, 1.0 is
even), the static bytes (WKB) every owner holds in all against the partition's, and the bytes
that must ship to k - 1 new owners. Pure computation, no Spark or broker; seconds per seed.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import shapely

from bench.harness.csv_tables import write_csv
from bench.harness.tables import markdown
from geops.model import Publications, Subscriptions
from geops.partitioning.kdbtree import build_kdbtree
from geops.partitioning.tree import SpatialPartitioner
from geops.workload import SkewSpec, generate_workload
from schemas.assignment import owner_index

Log = Callable[[str], None]
WAYS = (2, 4, 8)


@dataclass(frozen=True)
class Division:
    """One way of dividing the hot partition among k owners."""

    seed: int
    skew: float
    method: str          # replicate | split-subscriptions | split-items | split-load
    k: int
    max_over_mean: float  # the most loaded owner's candidate pairs / the mean over owners
    held_over_partition: float  # static bytes held by all owners / the partition's bytes
    shipped_bytes: int   # static bytes shipped to the k - 1 new owners
    partition_bytes: int
    items: int           # stream items in the hot partition
    subscriptions: int   # subscriptions in the hot partition


def _centers(bounds: np.ndarray) -> np.ndarray:
    return np.column_stack([(bounds[:, 0] + bounds[:, 2]) / 2, (bounds[:, 1] + bounds[:, 3]) / 2])


def _clipped(bounds: np.ndarray, cell: np.ndarray) -> np.ndarray:
    """Envelopes cut to the cell: only their part inside it decides the children they reach."""
    lo = np.maximum(bounds[:, :2], cell[:2])
    hi = np.minimum(bounds[:, 2:], cell[2:])
    return np.column_stack([lo, hi])


def candidates_per_item(sub_geoms: np.ndarray, item_geoms: np.ndarray) -> np.ndarray:
    """Per item, its envelope-intersecting subscriptions: the join's candidate pairs."""
    if not len(sub_geoms) or not len(item_geoms):
        return np.zeros(len(item_geoms), np.int64)
    pairs = shapely.STRtree(sub_geoms).query(item_geoms)
    return np.bincount(pairs[0], minlength=len(item_geoms))


def candidate_pairs(sub_geoms: np.ndarray, item_geoms: np.ndarray) -> int:
    """Envelope-intersecting (item, subscription) pairs."""
    return int(candidates_per_item(sub_geoms, item_geoms).sum())


def hot_partition(partitioner: SpatialPartitioner, pubs: Publications) -> int:
    """The partition most stream items fall into."""
    _, pids = partitioner.place(pubs.geoms)
    return int(np.bincount(pids, minlength=partitioner.num_partitions).argmax())


def divide(subs: Subscriptions, pubs: Publications, partitioner: SpatialPartitioner,
           ks: Sequence[int], *, seed: int = 0, skew: float = 0.0) -> list[Division]:
    """Replication and both splits of the hottest partition, for every k in ``ks``."""
    pid = hot_partition(partitioner, pubs)
    cell = partitioner.cells[pid]
    s_rows, s_pids = partitioner.place(subs.geoms)
    i_rows, i_pids = partitioner.place(pubs.geoms)
    in_subs = s_rows[s_pids == pid]
    in_items = i_rows[i_pids == pid]
    sub_geoms, item_geoms = subs.geoms[in_subs], pubs.geoms[in_items]
    wkb = np.array([len(b) for b in shapely.to_wkb(sub_geoms)], np.int64)
    total = int(wkb.sum())
    sub_bounds = _clipped(shapely.bounds(sub_geoms), cell)
    item_bounds = _clipped(shapely.bounds(item_geoms), cell)
    item_points = shapely.get_type_id(item_geoms) == 0
    sub_points = shapely.get_type_id(sub_geoms) == 0
    frame = np.concatenate([np.minimum(sub_bounds[:, :2].min(0), item_bounds[:, :2].min(0)),
                            np.maximum(sub_bounds[:, 2:].max(0), item_bounds[:, 2:].max(0))])
    item_centers = _centers(item_bounds)
    weights = candidates_per_item(sub_geoms, item_geoms)
    splits = (("split-subscriptions", _centers(sub_bounds)), ("split-items", item_centers),
              ("split-load", np.repeat(item_centers, weights, axis=0)))
    out = []

    def row(method: str, k: int, loads: np.ndarray, held: int, shipped: int) -> Division:
        return Division(seed, skew, method, k, float(loads.max() / max(loads.mean(), 1e-12)),
                        held / max(total, 1), shipped, total, len(in_items), len(in_subs))

    for k in ks:
        owner = owner_index(pubs.ids[in_items], k)
        loads = np.array([candidate_pairs(sub_geoms, item_geoms[owner == j]) for j in range(k)],
                         np.float64)
        out.append(row("replicate", k, loads, k * total, (k - 1) * total))
        for method, centers in splits:
            children = build_kdbtree(centers, frame, k)
            cs_rows, cs_pids = children.place_bounds(sub_bounds, sub_points)
            ci_rows, ci_pids = children.place_bounds(item_bounds, item_points)
            loads = np.array([candidate_pairs(sub_geoms[cs_rows[cs_pids == c]],
                                              item_geoms[ci_rows[ci_pids == c]])
                              for c in range(k)], np.float64)
            held = np.array([wkb[cs_rows[cs_pids == c]].sum() for c in range(k)], np.int64)
            # the child with the most data stays on the partition's owner; the others ship
            out.append(row(method, k, loads, int(held.sum()), int(held.sum() - held.max())))
    return out


def measure(seeds: Sequence[int], skews: Sequence[float], *, subscriptions: int,
            publications: int, workers: int, partitions: int, ks: Sequence[int],
            log: Log = print) -> list[Division]:
    """``divide`` on a one-partition hot spot per seed and skew."""
    rows: list[Division] = []
    for skew in skews:
        for seed in seeds:
            log(f"seed {seed}, skew {skew}: generating {subscriptions:,} subscriptions, "
                f"{publications:,} publications")
            wl = generate_workload(seed=seed, subscriptions=subscriptions,
                                   publications=publications,
                                   skew=SkewSpec(workers=workers, hot_workers=1,
                                                 partitions=partitions, target=skew,
                                                 hot_partitions=1))
            assert wl.partitioner is not None
            rows += divide(wl.subscriptions, wl.publications, wl.partitioner, ks,
                           seed=seed, skew=skew)
    return rows


def summary(rows: Sequence[Division]) -> list[dict]:
    """Mean and range over seeds per (skew, method, k)."""
    groups: dict[tuple, list[Division]] = {}
    for r in rows:
        groups.setdefault((r.skew, r.method, r.k), []).append(r)
    out = []
    for (skew, method, k), rs in sorted(groups.items()):
        mom = [r.max_over_mean for r in rs]
        out.append({"skew": skew, "method": method, "k": k, "seeds": len(rs),
                    "max_over_mean": float(np.mean(mom)), "max_over_mean_min": min(mom),
                    "max_over_mean_max": max(mom),
                    "held_over_partition": float(np.mean([r.held_over_partition for r in rs])),
                    "shipped_mb": float(np.mean([r.shipped_bytes for r in rs])) / 1e6})
    return out


def table(summary_rows: Sequence[dict]) -> str:
    """The summary as a Markdown table."""
    return "\n".join(markdown(
        ["skew", "k", "method", "most loaded owner / mean (min-max)", "static held / partition",
         "shipped MB"],
        ([s["skew"], s["k"], s["method"], f"{s['max_over_mean']:.2f} "
          f"({s['max_over_mean_min']:.2f}-{s['max_over_mean_max']:.2f})",
          f"{s['held_over_partition']:.2f}", f"{s['shipped_mb']:.3f}"] for s in summary_rows),
        "rrllrr"))


def _shares(text: str) -> list[float]:
    try:
        values = [float(v) for v in text.split(",")]
    except ValueError:
        values = []
    if not values or not all(0.0 < v <= 1.0 for v in values):
        raise argparse.ArgumentTypeError(f"a comma-separated list of shares in (0, 1], got "
                                         f"{text!r}")
    return values


def _ints(text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",")]
    except ValueError:
        values = []
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"a comma-separated list of positive integers, got "
                                         f"{text!r}")
    return values


def main(argv: Sequence[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m bench.studies.hot_split", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, default=Path("docs/results/hot-partitions/split"),
                   help="results directory (default %(default)s)")
    p.add_argument("--seeds", type=_ints, default=[1, 2, 3], help="workload seeds (default 1,2,3)")
    p.add_argument("--skews", type=_shares, default=[0.8],
                   help="shares of the stream in the hot partition (default 0.8)")
    p.add_argument("--ways", type=_ints, default=list(WAYS),
                   help="owners k to divide the hot partition among (default 2,4,8)")
    p.add_argument("--subscriptions", type=int, default=10_000,
                   help="subscriptions (default %(default)s)")
    p.add_argument("--publications", type=int, default=50_000,
                   help="publications (default %(default)s)")
    p.add_argument("--workers", type=int, default=2, help="W >= 2 (default %(default)s)")
    p.add_argument("--partitions", type=int, default=64,
                   help="static partitions P (default %(default)s)")
    args = p.parse_args(argv)
    for flag, value, least in (("--subscriptions", args.subscriptions, 1),
                               ("--publications", args.publications, 1),
                               ("--workers", args.workers, 2),
                               ("--partitions", args.partitions, args.workers)):
        if value < least:
            p.error(f"{flag} must be at least {least}, got {value}")
    rows = measure(args.seeds, args.skews, subscriptions=args.subscriptions,
                   publications=args.publications, workers=args.workers,
                   partitions=args.partitions, ks=args.ways)
    args.out.mkdir(parents=True, exist_ok=True)
    write_csv(args.out / "divisions.csv.gz", [asdict(r) for r in rows])
    summ = summary(rows)
    write_csv(args.out / "summary.csv", summ)
    print(table(summ))


if __name__ == "__main__":
    main()
