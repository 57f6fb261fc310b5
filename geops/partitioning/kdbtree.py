"""KDB-tree partitioning: recursive median-like splits of a sample, hitting P exactly.

A node that must hold k leaves splits its cell across the longer side of its frame (the part
of the subscription boundary it covers) so the left side gets ⌊k/2⌋ leaves and the matching
share of the sample's envelope centres: the split lies halfway between the two sample values
at that quantile. A node with fewer than two sample points splits its frame proportionally.
Leaves are numbered in order (left/below first), so neighbouring ids are neighbouring cells.
"""

from __future__ import annotations

import numpy as np

from geops.partitioning.tree import SpatialPartitioner, TreeBuilder


def build_kdbtree(centers: np.ndarray, frame: np.ndarray, num_partitions: int
                  ) -> SpatialPartitioner:
    """A KDB-tree with exactly ``num_partitions`` leaves over sample ``centers`` (m, 2)."""
    tree = TreeBuilder()
    next_pid = 0

    def grow(points: np.ndarray, box: np.ndarray, k: int) -> int:
        nonlocal next_pid
        node = tree.node()
        if k == 1:
            tree.leaf(node, next_pid)
            next_pid += 1
            return node
        axis = 0 if box[2] - box[0] >= box[3] - box[1] else 1
        k_left = k // 2
        coords = np.sort(points[:, axis])
        if len(coords) >= 2:
            j = min(max(round(len(coords) * k_left / k), 1), len(coords) - 1)
            value = (coords[j - 1] + coords[j]) / 2
        else:
            value = box[axis] + (box[axis + 2] - box[axis]) * k_left / k
        below = points[:, axis] < value
        left_box, right_box = box.copy(), box.copy()
        left_box[axis + 2] = value
        right_box[axis] = value
        left = grow(points[below], left_box, k_left)
        right = grow(points[~below], right_box, k - k_left)
        tree.split(node, axis, value, left, right)
        return node

    grow(np.asarray(centers, np.float64).reshape(-1, 2), np.asarray(frame, np.float64),
         num_partitions)
    return tree.finish("kdbtree")
