"""The 10 relations as shapely predicates, and the exact vectorised refinement kernel.

``evaluate`` decides ``relation(sub, pub)`` for many (subscription, publication) pairs at once,
one shapely call per relation present. It is exact for every relation; before calling GEOS it
settles pairs by conditions that are necessary or sufficient for the relation and cheap to check
on NumPy arrays:

- COVERS / CONTAINS need the publication's envelope inside the subscription's, COVERED_BY /
  WITHIN the reverse, EQUALS equal envelopes (a relation on point sets implies it on their
  bounding boxes, which are the extreme vertex coordinates);
- identical geometries (same type, vertices in the same order, ``shapely.equals_identical``) have
  a fixed answer for every relation, which spares GEOS its costliest case (every edge
  overlapping). This is common: GeoPS publishes postcode polygons that are also subscriptions.

Subscription geometries should be prepared (``shapely.prepare``); shapely then uses GEOS's
prepared predicates, which index the first operand's edges once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import shapely

from geops.model import Relation

PREDICATES: dict[Relation, Callable[..., np.ndarray]] = {
    Relation.COVERED_BY: shapely.covered_by,
    Relation.COVERS: shapely.covers,
    Relation.CONTAINS: shapely.contains,
    Relation.CROSSES: shapely.crosses,
    Relation.EQUALS: shapely.equals,
    Relation.INTERSECTS: shapely.intersects,
    Relation.OVERLAPS: shapely.overlaps,
    Relation.TOUCHES: shapely.touches,
    Relation.WITHIN: shapely.within,
    Relation.DISJOINT: shapely.disjoint,
}

# relation(g, g) for a non-empty geometry g that is not a GeometryCollection, by Relation code.
_IDENTICAL = np.zeros(len(Relation), bool)
_IDENTICAL[[Relation.COVERED_BY, Relation.COVERS, Relation.CONTAINS, Relation.EQUALS,
            Relation.INTERSECTS, Relation.WITHIN]] = True
_COLLECTION = 7  # shapely type id of GeometryCollection
_CHUNK = 1 << 18  # pairs per pass, bounds the temporaries


@dataclass(frozen=True)
class Shapes:
    """Geometries with their envelopes (n, 4) and shapely type ids, computed once per batch."""

    geoms: np.ndarray
    bounds: np.ndarray
    types: np.ndarray

    @classmethod
    def of(cls, geoms: np.ndarray) -> Shapes:
        geoms = np.asarray(geoms, dtype=object)
        return cls(geoms, shapely.bounds(geoms), shapely.get_type_id(geoms).astype(np.int8))

    def __len__(self) -> int:
        return len(self.geoms)


def evaluate(relations: np.ndarray, subs: Shapes, sub_index: np.ndarray, pubs: Shapes,
             pub_index: np.ndarray) -> np.ndarray:
    """``relations[k](subs[sub_index[k]], pubs[pub_index[k]])`` for every pair k (bool array)."""
    out = np.empty(len(relations), bool)
    for lo in range(0, len(relations), _CHUNK):
        hi = lo + _CHUNK
        out[lo:hi] = _evaluate(relations[lo:hi], subs, sub_index[lo:hi], pubs, pub_index[lo:hi])
    return out


def _evaluate(rel: np.ndarray, subs: Shapes, si: np.ndarray, pubs: Shapes,
              pi: np.ndarray) -> np.ndarray:
    sb, pb = subs.bounds[si], pubs.bounds[pi]
    sub_in_pub = ((pb[:, 0] <= sb[:, 0]) & (pb[:, 1] <= sb[:, 1])
                  & (sb[:, 2] <= pb[:, 2]) & (sb[:, 3] <= pb[:, 3]))
    pub_in_sub = ((sb[:, 0] <= pb[:, 0]) & (sb[:, 1] <= pb[:, 1])
                  & (pb[:, 2] <= sb[:, 2]) & (pb[:, 3] <= sb[:, 3]))
    out = np.zeros(len(rel), bool)
    todo = np.ones(len(rel), bool)
    same = np.flatnonzero(sub_in_pub & pub_in_sub & (subs.types[si] != _COLLECTION))
    if len(same):
        ident = same[shapely.equals_identical(subs.geoms[si[same]], pubs.geoms[pi[same]])]
        out[ident] = _IDENTICAL[rel[ident]]
        todo[ident] = False
    contains_like = (rel == Relation.COVERS) | (rel == Relation.CONTAINS)
    within_like = (rel == Relation.COVERED_BY) | (rel == Relation.WITHIN)
    todo &= ~contains_like | pub_in_sub
    todo &= ~within_like | sub_in_pub
    todo &= (rel != Relation.EQUALS) | (sub_in_pub & pub_in_sub)
    for code in np.unique(rel[todo]):
        k = np.flatnonzero(todo & (rel == code))
        out[k] = PREDICATES[Relation(int(code))](subs.geoms[si[k]], pubs.geoms[pi[k]])
    return out
