"""Equal grid partitioning: nx × ny = P equal cells over the subscription boundary.

Of the factor pairs of P the one whose cells are closest to square is used (a prime P gives
strips). Ids run row by row from the south, alternating direction (boustrophedon), so
consecutive ids are adjacent cells and contiguous id blocks are compact bands.
"""

from __future__ import annotations

import math

import numpy as np

from geops.partitioning.tree import SpatialPartitioner, TreeBuilder


def grid_shape(num_partitions: int, width: float, height: float) -> tuple[int, int]:
    """(nx, ny) with nx·ny = P and cells as close to square as possible."""
    scale = max(width, height)
    if scale <= 0:
        w = h = 1.0
    else:
        w, h = max(width, scale * 1e-9), max(height, scale * 1e-9)
    pairs = [(nx, num_partitions // nx) for nx in range(1, num_partitions + 1)
             if num_partitions % nx == 0]
    return min(pairs, key=lambda p: (abs(math.log((w / p[0]) / (h / p[1]))), p[1]))


def build_grid(frame: np.ndarray, num_partitions: int) -> SpatialPartitioner:
    """The equal grid of exactly ``num_partitions`` cells over ``frame``."""
    x0, y0, x1, y1 = (float(v) for v in frame)
    nx, ny = grid_shape(num_partitions, x1 - x0, y1 - y0)
    xs = x0 + (x1 - x0) * np.arange(nx + 1) / nx
    ys = y0 + (y1 - y0) * np.arange(ny + 1) / ny
    tree = TreeBuilder()

    def pid(i: int, j: int) -> int:
        return j * nx + (i if j % 2 == 0 else nx - 1 - i)

    def rows(i: int, lo: int, hi: int) -> int:
        node = tree.node()
        if hi - lo == 1:
            tree.leaf(node, pid(i, lo))
            return node
        mid = (lo + hi) // 2
        tree.split(node, 1, ys[mid], rows(i, lo, mid), rows(i, mid, hi))
        return node

    def columns(lo: int, hi: int) -> int:
        if hi - lo == 1:
            return rows(lo, 0, ny)
        node = tree.node()
        mid = (lo + hi) // 2
        tree.split(node, 0, xs[mid], columns(lo, mid), columns(mid, hi))
        return node

    columns(0, nx)
    return tree.finish("grid")
