"""Model columns to schema records: what producers send, read back through the codec."""

import numpy as np
import shapely

from geops.model import Publications, Relation, Subscriptions
from schemas import codec
from schemas.records import publication_records, relation_symbols, subscription_records


def test_records_round_trip_through_the_codec() -> None:
    geoms = [shapely.Point(1, 2), shapely.box(0, 0, 1, 1)]
    pubs = Publications(np.array([7, 8]), np.array(geoms, object), np.array([10, 20]))
    subs = Subscriptions(np.array([1, 2]), np.array(geoms, object),
                         np.array([Relation.DISJOINT, Relation.COVERED_BY]))
    c = codec()
    got = [c.decode_as("Publication", c.encode("Publication", r))
           for r in publication_records(pubs)]
    assert [(r["id"], r["event_time"]) for r in got] == [(7, 10), (8, 20)]
    assert [shapely.from_wkb(r["geometry"]) for r in got] == geoms
    got = [c.decode_as("Subscription", c.encode("Subscription", r))
           for r in subscription_records(subs)]
    assert [(r["id"], r["relation"]) for r in got] == [(1, "DISJOINT"), (2, "COVERED_BY")]
    assert relation_symbols() == tuple(r.name for r in Relation)


def test_no_columns_no_records() -> None:
    empty = np.empty(0, np.int64)
    assert list(publication_records(Publications(empty, np.empty(0, object), empty))) == []
    assert list(subscription_records(Subscriptions(empty, np.empty(0, object), empty))) == []


def test_object_ids_detect_kinds_and_distances_round_trip() -> None:
    geoms = [shapely.Point(1, 2), shapely.box(0, 0, 1, 1)]
    pubs = Publications(np.array([7, 8]), np.array(geoms, object), np.array([10, 20]))
    c = codec()
    got = [c.decode_as("Publication", c.encode("Publication", r))
           for r in publication_records(pubs, ["car", None])]
    assert [r["object_id"] for r in got] == ["car", None]
    assert [r["object_id"] for r in publication_records(pubs)] == [None, None]
    subs = Subscriptions(np.array([1, 2]), np.array(geoms, object), np.array([5, 5]))
    records = list(subscription_records(subs, np.array([0b1001, 0]), np.array([25.0, np.nan])))
    got = [c.decode_as("Subscription", c.encode("Subscription", r)) for r in records]
    assert [(r["detect"], r["distance_m"]) for r in got] == [(["ENTER", "OUTSIDE"], 25.0),
                                                              ([], None)]
