"""The paper's skew coefficient, and picking publications so a stream hits a requested value.

The skew coefficient of a stream is the fraction of its **items** that fall in the partitions the
initial assignment gives to workers 0..H-1 (``schemas.assignment.hot_partitions``); H/W is the
balanced value. A stream item is one (publication, partition) pair under spatial routing
(``partitioner.place``): a point is one item, a polygon one item per cell its envelope touches.

To hit a target S the generator knows, for every candidate publication of every kind (point,
area, district, sector), how many items it makes (n) and how many of them are hot (h). Each
publication has a pre-drawn candidate that raises the running hot share (h/n ≥ S) and one that
lowers it (h/n ≤ S), both drawn by population among such candidates; ``steer`` keeps whichever
leaves the running share closer to S. The error after N items is about one publication's items
over N. Where a kind has no candidate on one side (say every area spans hot and cold cells and
S is near 1) the candidate with the smallest shortfall h - S·n stands in. ``reachable`` gives the
exact range of hot shares the candidates allow for the publication mix (Dinkelbach's method on
the ratio of sums), so an impossible S is refused with that range instead of being missed.
How the generator combines these per kind is described in ``geops.workload.generate``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from geops.partitioning import SpatialPartitioner
from schemas.assignment import hot_partitions


@dataclass(frozen=True)
class SkewSpec:
    """The partitioning that defines the hot side, and the hot share to aim for.

    ``target`` None means: do not steer, only measure the stream's natural hot share.
    ``hot_partitions`` K concentrates the hot share in K partitions (the K lowest ids among the
    hot workers' partitions: spatially adjacent, as ids follow the partitioner's spatial
    order) instead of all the hot workers' partitions. ``moving`` moves the hot region half-way
    through the stream to the same partitions of workers W/2..W/2+H-1 (``hot_side``).
    """

    workers: int
    hot_workers: int = 1
    partitions: int = 16
    partitioner: str = "kdbtree"
    target: float | None = None
    hot_partitions: int | None = None
    moving: bool = False


def hot_mask(assignment: Sequence[int], hot_workers: int) -> np.ndarray:
    """Boolean per partition: owned by one of workers 0..hot_workers-1."""
    mask = np.zeros(len(assignment), dtype=bool)
    mask[hot_partitions(assignment, hot_workers)] = True
    return mask


def hot_side(assignment: Sequence[int], spec: SkewSpec, moved: bool = False) -> list[int]:
    """The partitions the skewed share falls into: those of workers 0..H-1 under
    ``assignment`` (``moved``: of workers W/2..W/2+H-1, where a moving hot spot goes), or the
    K lowest of them with ``spec.hot_partitions`` K."""
    first = spec.workers // 2 if moved else 0
    side = [p for p, w in enumerate(assignment) if first <= w < first + spec.hot_workers]
    return side if spec.hot_partitions is None else side[:spec.hot_partitions]


def side_mask(partitions: int, side: Sequence[int]) -> np.ndarray:
    """Boolean per partition: in ``side``."""
    mask = np.zeros(partitions, dtype=bool)
    mask[list(side)] = True
    return mask


def measured_skew(partitioner: SpatialPartitioner, geoms: np.ndarray, assignment: Sequence[int],
                  hot_workers: int) -> float:
    """Fraction of the stream items of ``geoms`` that fall in the hot workers' partitions."""
    _, pid = partitioner.place(np.asarray(geoms, dtype=object))
    if len(pid) == 0:
        raise ValueError("no stream items: the skew of an empty stream is undefined")
    return float(hot_mask(assignment, hot_workers)[pid].mean())


def measured_share(partitioner: SpatialPartitioner, geoms: np.ndarray, mask: np.ndarray
                   ) -> tuple[int, int]:
    """(items in the partitions of ``mask``, items) of the stream ``geoms``."""
    _, pid = partitioner.place(np.asarray(geoms, dtype=object))
    return int(mask[pid].sum()), len(pid)


def item_counts(partitioner: SpatialPartitioner, geoms: np.ndarray,
                hot: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(hot items, items) per geometry under ``partitioner.place``."""
    gi, pid = partitioner.place(np.asarray(geoms, dtype=object))
    items = np.bincount(gi, minlength=len(geoms))
    hot_items = np.bincount(gi, weights=hot[pid], minlength=len(geoms)).astype(np.int64)
    return hot_items, items


def reachable(hot_items: Sequence[np.ndarray], items: Sequence[np.ndarray],
              counts: Sequence[int]) -> tuple[float, float]:
    """Lowest and highest hot share of a stream of ``counts[k]`` publications of kind k.

    Kind k may use any candidate j with ``items[k][j] > 0``; the extreme ratio of sums is found
    with Dinkelbach's iteration (each kind repeats its best candidate for the current ratio).
    """
    kinds = [(h, n, c) for h, n, c in zip(hot_items, items, counts, strict=True) if c]

    def extreme(sign: int) -> float:
        ratio = 0.0 if sign > 0 else 1.0
        for _ in range(100):
            total_h = total_n = 0
            for h, n, c in kinds:
                ok = n > 0
                j = np.argmax(sign * (h[ok] - ratio * n[ok]))
                total_h += c * int(h[ok][j])
                total_n += c * int(n[ok][j])
            new = total_h / total_n
            if new == ratio:
                break
            ratio = new
        return ratio

    return extreme(-1), extreme(+1)


def sides(hot_items: np.ndarray, items: np.ndarray, target: float,
          extreme: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Candidates that raise and that lower the hot share towards ``target``.

    Raising: h/n ≥ target, or (none such, or ``extreme``) the ones with the largest h - target·n;
    lowering likewise mirrored. Candidates with no items are never used.
    """
    usable = np.flatnonzero(items > 0)
    surplus = hot_items[usable] - target * items[usable]
    up = usable[surplus >= 0]
    down = usable[surplus <= 0]
    if extreme or len(up) == 0:
        up = usable[surplus == surplus.max()]
    if extreme or len(down) == 0:
        down = usable[surplus == surplus.min()]
    return up, down


def steer(target: float, up_hot: np.ndarray, up_items: np.ndarray, down_hot: np.ndarray,
          down_items: np.ndarray) -> np.ndarray:
    """Per publication, True to take its raising candidate; keeps the running share near target.

    Greedy: each publication takes whichever of its two candidates leaves the running hot
    share closer to the target.
    """
    take_up = np.zeros(len(up_hot), dtype=bool)
    hot = total = 0
    for i, (hu, nu, hd, nd) in enumerate(zip(up_hot.tolist(), up_items.tolist(),
                                             down_hot.tolist(), down_items.tolist(),
                                             strict=True)):
        if abs(hot + hu - target * (total + nu)) * (total + nd) <= \
                abs(hot + hd - target * (total + nd)) * (total + nu):
            take_up[i] = True
            hot, total = hot + hu, total + nu
        else:
            hot, total = hot + hd, total + nd
    return take_up
