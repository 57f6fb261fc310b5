"""Merging the partial matches of one batch into one sorted, duplicate-free set per publication.

A publication's matches are ``positives ∪ (D \\ excluded)``: the pairs partitions found, plus
every DISJOINT subscription (D) except those some partition found intersecting it. A
publication that reached no partition at all still matches all of D. Everything is done on
combined arrays (sort and compare), never per publication.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from geops.strategies.types import PartialMatches


def merge(all_keys: np.ndarray, partials: Sequence[PartialMatches], disjoint_ids: np.ndarray
          ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(matched keys ascending, CSR offsets, subscription ids ascending per key).

    ``all_keys`` are the keys of every publication of the batch (the DISJOINT subscriptions
    match publications that no partition saw); keys with no match are left out.
    """
    keys = [p.keys for p in partials]
    subs = [p.sub_ids for p in partials]
    disjoint_ids = np.asarray(disjoint_ids, np.int64)
    if len(disjoint_ids) and len(all_keys):
        batch = np.unique(np.asarray(all_keys, np.int64))
        keep = np.ones((len(batch), len(disjoint_ids)), bool)
        ex_keys = np.concatenate([np.empty(0, np.int64), *(p.excluded_keys for p in partials)])
        ex_subs = np.concatenate([np.empty(0, np.int64),
                                  *(p.excluded_sub_ids for p in partials)])
        row = np.minimum(np.searchsorted(batch, ex_keys), len(batch) - 1)
        col = np.minimum(np.searchsorted(disjoint_ids, ex_subs), len(disjoint_ids) - 1)
        known = (batch[row] == ex_keys) & (disjoint_ids[col] == ex_subs)
        keep[row[known], col[known]] = False
        rows, cols = np.nonzero(keep)
        keys.append(batch[rows])
        subs.append(disjoint_ids[cols])
    return pairs_to_csr(np.concatenate([np.empty(0, np.int64), *keys]),
                        np.concatenate([np.empty(0, np.int64), *subs]))


def pairs_to_csr(keys: np.ndarray, sub_ids: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sort (key, id) pairs, drop duplicates, and group by key as CSR."""
    keys = np.asarray(keys, np.int64)
    sub_ids = np.asarray(sub_ids, np.int64)
    order = np.lexsort((sub_ids, keys))
    keys, sub_ids = keys[order], sub_ids[order]
    fresh = np.ones(len(keys), bool)
    fresh[1:] = (keys[1:] != keys[:-1]) | (sub_ids[1:] != sub_ids[:-1])
    keys, sub_ids = keys[fresh], sub_ids[fresh]
    starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])[: len(keys)]
    return keys[starts], np.append(starts, len(keys)).astype(np.int64), sub_ids
