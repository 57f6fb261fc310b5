"""Quadtree partitioning: split the fullest quadrant into four until there are at least P.

Each split turns one leaf into four, so a quadtree has 1 + 3k leaves: the partitioner makes the
smallest such count ≥ P (P = 16 gives 16, P = 20 gives 22). The leaf to split next is the one
holding the most sample envelope centres (ties: the larger frame, then the older leaf).
Quadrants split at the centre of their frame (the part of the subscription boundary they
cover) and are numbered in Z-order (SW, SE, NW, NE, recursively).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field

import numpy as np

from geops.partitioning.tree import SpatialPartitioner, TreeBuilder


def quadtree_leaves(num_partitions: int) -> int:
    """The number of leaves a quadtree gets for a request of ``num_partitions``."""
    return 1 + 3 * -(-(num_partitions - 1) // 3)


@dataclass
class _Quad:
    frame: np.ndarray
    points: np.ndarray
    children: list[_Quad] = field(default_factory=list)

    def split(self) -> None:
        x0, y0, x1, y1 = self.frame
        cx, cy = (x0 + x1) / 2, (y0 + y1) / 2
        east = self.points[:, 0] >= cx
        north = self.points[:, 1] >= cy
        frames = [(x0, y0, cx, cy), (cx, y0, x1, cy), (x0, cy, cx, y1), (cx, cy, x1, y1)]
        masks = [~east & ~north, east & ~north, ~east & north, east & north]
        self.children = [_Quad(np.array(f), self.points[m]) for f, m in zip(frames, masks,
                                                                           strict=True)]
        self.points = self.points[:0]


def build_quadtree(centers: np.ndarray, frame: np.ndarray, num_partitions: int
                   ) -> SpatialPartitioner:
    """A quadtree with ``quadtree_leaves(num_partitions)`` leaves over sample ``centers``."""
    root = _Quad(np.asarray(frame, np.float64), np.asarray(centers, np.float64).reshape(-1, 2))
    seq = 0

    def entry(q: _Quad) -> tuple[int, float, int, _Quad]:
        nonlocal seq
        seq += 1
        area = float((q.frame[2] - q.frame[0]) * (q.frame[3] - q.frame[1]))
        return (-len(q.points), -area, seq, q)

    heap = [entry(root)]
    leaves = 1
    while leaves < num_partitions:
        quad = heapq.heappop(heap)[3]
        quad.split()
        for child in quad.children:
            heapq.heappush(heap, entry(child))
        leaves += 3
    return _to_tree(root)


def _to_tree(root: _Quad) -> SpatialPartitioner:
    """A quad node = a y split whose halves are x splits; in-order leaves are Z-order."""
    tree = TreeBuilder()
    next_pid = 0

    def emit(q: _Quad) -> int:
        nonlocal next_pid
        node = tree.node()
        if not q.children:
            tree.leaf(node, next_pid)
            next_pid += 1
            return node
        cx = (q.frame[0] + q.frame[2]) / 2
        cy = (q.frame[1] + q.frame[3]) / 2
        south, north = tree.node(), tree.node()
        sw, se, nw, ne = (emit(c) for c in q.children)
        tree.split(south, 0, cx, sw, se)
        tree.split(north, 0, cx, nw, ne)
        tree.split(node, 1, cy, south, north)
        return node

    emit(root)
    return tree.finish("quadtree")
