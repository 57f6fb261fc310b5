"""The refinement kernel agrees with plain shapely predicates, shortcuts included."""

from __future__ import annotations

import numpy as np
import pytest
import shapely

from geops.model import Relation
from geops.relations import PREDICATES, Shapes, evaluate

SHAPES = [
    shapely.Point(1, 2),
    shapely.MultiPoint([(0, 0), (1, 1), (1, 1)]),
    shapely.LineString([(0, 0), (2, 1), (3, 0)]),
    shapely.LineString([(0, 0), (2, 0), (2, 2), (0, 0)]),  # closed: empty boundary
    shapely.MultiLineString([[(0, 0), (2, 0)], [(1, 0), (3, 0)]]),  # overlapping parts
    shapely.box(0, 0, 2, 1),
    shapely.Polygon([(0, 0), (4, 0), (4, 4), (0, 4)], [[(1, 1), (2, 1), (2, 2), (1, 2)]]),
    shapely.MultiPolygon([shapely.box(0, 0, 1, 1), shapely.box(1, 1, 2, 2)]),
    shapely.GeometryCollection([shapely.Point(5, 5), shapely.box(0, 0, 1, 1)]),
]


def test_relation_names_map_to_shapely_predicates():
    assert [PREDICATES[r].__name__ for r in Relation] == [r.name.lower() for r in Relation]


@pytest.mark.parametrize("relation", list(Relation))
def test_identical_and_equal_copies(relation):
    """Identical copies take the shortcut; reversed (equal, not identical) copies do not."""
    subs = shapely.from_wkb(shapely.to_wkb(np.array(SHAPES, dtype=object)))
    shapely.prepare(subs)
    pubs = np.concatenate([shapely.from_wkb(shapely.to_wkb(subs)), shapely.reverse(subs)])
    n = len(SHAPES)
    si = np.r_[np.arange(n), np.arange(n)]
    pi = np.arange(2 * n)
    got = evaluate(np.full(2 * n, relation, np.int8), Shapes.of(subs), si, Shapes.of(pubs), pi)
    want = PREDICATES[relation](np.array(SHAPES * 2, dtype=object), pubs)
    assert got.tolist() == want.tolist()


def test_envelope_conditions_and_mixed_relations(cases):
    rng = np.random.default_rng(0)
    subs = cases.subscriptions(1, n=150)
    _, pubs = cases.publications(1, subs, None, n=150)
    si = rng.integers(0, len(subs), 20000)
    pi = rng.integers(0, len(pubs), 20000)
    rel = subs.relations[si]
    prepared = shapely.from_wkb(shapely.to_wkb(subs.geoms))
    shapely.prepare(prepared)
    got = evaluate(rel, Shapes.of(prepared), si, Shapes.of(pubs), pi)
    want = np.array([PREDICATES[Relation(int(r))](subs.geoms[s], pubs[p])
                     for r, s, p in zip(rel, si, pi, strict=True)])
    assert got.tolist() == want.tolist()
    assert want.sum() > 500
