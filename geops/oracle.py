"""The brute-force matcher every correctness test compares against.

Every subscription against every publication with the plain shapely predicate of its relation
(broadcast per relation, no envelope filter, no index, no shortcut of the kernel), so it shares
no matching logic with the strategies. Quadratic: meant for test-sized inputs.
"""

from __future__ import annotations

import numpy as np

from geops.model import Relation, Subscriptions
from geops.relations import PREDICATES

_CELLS = 1 << 22  # booleans per broadcast slice


def oracle_match(subs: Subscriptions, keys: np.ndarray, geoms: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(matched keys ascending, CSR offsets, subscription ids ascending per key).

    ``keys`` identify the publications (unique int64), ``geoms`` are their geometries;
    publications that match nothing are left out, as in ``geops.strategies.merge``.
    """
    keys = np.asarray(keys, np.int64)
    geoms = np.asarray(geoms, dtype=object)
    by_id = np.argsort(subs.ids, kind="stable")
    sub_geoms, sub_ids, relations = subs.geoms[by_id], subs.ids[by_id], subs.relations[by_id]
    hits = np.zeros((len(keys), len(sub_ids)), bool)  # publication × subscription (id order)
    step = max(1, _CELLS // max(len(sub_ids), 1))
    for code in np.unique(relations):
        cols = np.flatnonzero(relations == code)
        predicate = PREDICATES[Relation(int(code))]
        for lo in range(0, len(keys), step):
            rows = slice(lo, lo + step)
            hits[rows, cols] = predicate(sub_geoms[cols][None, :], geoms[rows][:, None])
    order = np.argsort(keys, kind="stable")
    hits = hits[order]
    rows, cols = np.nonzero(hits)
    matched = hits.any(axis=1)
    offsets = np.concatenate([[0], np.cumsum(hits.sum(axis=1)[matched])]).astype(np.int64)
    return keys[order][matched], offsets, sub_ids[cols]


def oracle_answers(subs: Subscriptions, keys: np.ndarray, geoms: np.ndarray
                   ) -> dict[int, tuple[int, ...]]:
    """Publication id -> the subscription ids it matches (ascending); unmatched ones left out.

    The shape the end-to-end checks compare the ``matches`` topic with.
    """
    matched, offsets, ids = oracle_match(subs, keys, geoms)
    return {int(k): tuple(ids[offsets[i]:offsets[i + 1]].tolist())
            for i, k in enumerate(matched)}
