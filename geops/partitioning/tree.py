"""A spatial partitioner as a binary guillotine tree of axis-parallel splits.

KDB-tree, quadtree and equal grid all cut the plane with axis-parallel lines, so one structure
serves them: internal nodes split on x or y at a value, leaves carry a partition id. The root
covers the whole plane, so the outermost cells extend to ±inf and every geometry lands in at
least one cell. Placement walks the tree level by level with NumPy, all geometries at once.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import shapely

LEAF = -1


@dataclass
class TreeBuilder:
    """Collects nodes while a builder recurses; ``finish`` freezes them into arrays."""

    axis: list[int] = field(default_factory=list)
    value: list[float] = field(default_factory=list)
    left: list[int] = field(default_factory=list)
    right: list[int] = field(default_factory=list)
    leaf_pid: list[int] = field(default_factory=list)

    def node(self) -> int:
        """Reserve a node (children are filled in once they exist); returns its number."""
        self.axis.append(LEAF)
        self.value.append(0.0)
        self.left.append(-1)
        self.right.append(-1)
        self.leaf_pid.append(-1)
        return len(self.axis) - 1

    def split(self, node: int, axis: int, value: float, left: int, right: int) -> None:
        self.axis[node], self.value[node] = axis, float(value)
        self.left[node], self.right[node] = left, right

    def leaf(self, node: int, pid: int) -> None:
        self.leaf_pid[node] = pid

    def finish(self, kind: str) -> SpatialPartitioner:
        return SpatialPartitioner(kind, np.array(self.axis, np.int8),
                                  np.array(self.value, np.float64),
                                  np.array(self.left, np.int32), np.array(self.right, np.int32),
                                  np.array(self.leaf_pid, np.int32))


class SpatialPartitioner:
    """Cells of the plane numbered in spatial order, and placement of geometries into them.

    ``num_partitions`` is the actual P: KDB-tree and grid make exactly the P asked for, a
    quadtree the smallest 1 + 3k ≥ P (``quadtree_leaves``). ``cells`` is (P, 4) float64
    ``xmin, ymin, xmax, ymax`` per partition id; cells on the outside extend to ±inf. Ids are in
    spatial order (KDB-tree: in-order leaves; quadtree: Z-order; grid: boustrophedon rows), so
    contiguous id blocks are compact regions. The tree (root = node 0) is held as plain arrays,
    so a partitioner pickles small and cheaply.
    """

    def __init__(self, kind: str, axis: np.ndarray, value: np.ndarray, left: np.ndarray,
                 right: np.ndarray, leaf_pid: np.ndarray):
        self.kind = kind
        self.axis, self.value, self.left, self.right = axis, value, left, right
        self.leaf_pid = leaf_pid
        self.num_partitions = int((axis == LEAF).sum())
        self.cells = self._cells()

    def _cells(self) -> np.ndarray:
        cells = np.empty((self.num_partitions, 4), np.float64)
        stack = [(0, (-np.inf, -np.inf, np.inf, np.inf))]
        while stack:
            node, box = stack.pop()
            ax = int(self.axis[node])
            if ax == LEAF:
                cells[self.leaf_pid[node]] = box
                continue
            v = float(self.value[node])
            lo_box, hi_box = list(box), list(box)
            lo_box[ax + 2] = v
            hi_box[ax] = v
            stack.append((int(self.left[node]), tuple(lo_box)))
            stack.append((int(self.right[node]), tuple(hi_box)))
        return cells

    def place(self, geoms: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(geometry index int64, partition int32) for every cell each geometry belongs to.

        A geometry's envelope goes to every cell it touches (closed test); a Point goes to
        exactly one cell, the one whose half-open ``[xmin, xmax) × [ymin, ymax)`` holds it.
        Pairs come sorted by geometry index, then partition.
        """
        geoms = np.asarray(geoms, dtype=object)
        return self.place_bounds(shapely.bounds(geoms), shapely.get_type_id(geoms) == 0)

    def place_bounds(self, bounds: np.ndarray,
                     is_point: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``place`` on precomputed envelopes; ``is_point`` selects the half-open rule."""
        n = len(bounds)
        item = np.arange(n, dtype=np.int64)
        node = np.zeros(n, dtype=np.int32)
        out_item, out_pid = [], []
        while len(item):
            ax = self.axis[node]
            leaf = ax == LEAF
            if leaf.any():
                out_item.append(item[leaf])
                out_pid.append(self.leaf_pid[node[leaf]])
                item, node, ax = item[~leaf], node[~leaf], ax[~leaf]
            v = self.value[node]
            lo = bounds[item, ax]
            hi = bounds[item, ax + 2]
            point = is_point[item]
            go_left = np.where(point, lo < v, lo <= v)
            go_right = hi >= v
            item = np.concatenate([item[go_left], item[go_right]])
            node = np.concatenate([self.left[node[go_left]], self.right[node[go_right]]])
        if not out_item:
            return np.empty(0, np.int64), np.empty(0, np.int32)
        items = np.concatenate(out_item)
        pids = np.concatenate(out_pid).astype(np.int32)
        order = np.argsort(items * self.num_partitions + pids, kind="stable")
        return items[order], pids[order]

    def __repr__(self) -> str:
        return f"SpatialPartitioner({self.kind!r}, num_partitions={self.num_partitions})"
