"""The bulk encoder writes exactly the codec's bytes for Subscription and Publication."""

from __future__ import annotations

import numpy as np
import shapely

from geops.model import Subscriptions
from schemas import codec
from schemas.bulk_encoder import encode, encode_subscriptions, object_tails
from schemas.records import relation_symbols, subscription_records


def test_random_records_equal_the_codecs():
    rng = np.random.default_rng(7)
    n = 3000
    ids = rng.integers(-2**63, 2**63 - 1, n, dtype=np.int64)
    ids[:6] = [0, -1, 1, 63, -64, 2**63 - 1]
    blobs = [bytes(rng.integers(0, 256, int(k), dtype=np.uint8)) for k in rng.integers(0, 300, n)]
    relations = rng.integers(0, 10, n)
    times = rng.integers(-2**40, 2**45, n)
    c, names = codec(), relation_symbols()
    assert encode("Subscription", ids, blobs, relations) == [
        c.encode("Subscription", {"id": int(i), "geometry": b, "relation": names[r]})
        for i, b, r in zip(ids, blobs, relations, strict=True)]
    assert encode("Publication", ids, blobs, times) == [
        c.encode("Publication", {"id": int(i), "geometry": b, "event_time": int(t)})
        for i, b, t in zip(ids, blobs, times, strict=True)]
    assert encode("Subscription", ids[:0], [], relations[:0]) == []


def test_subscriptions_encode_as_their_records():
    subs = Subscriptions([1, 2], [shapely.box(0, 0, 1, 1), shapely.Point(3, 4)], [0, 9])
    c = codec()
    assert encode_subscriptions(subs) == [c.encode("Subscription", r)
                                          for r in subscription_records(subs)]


def test_optional_fields_equal_the_codecs():
    """Object ids of publications; detect kinds and distances of subscriptions."""
    c, kinds = codec(), ["ENTER", "EXIT", "INSIDE", "OUTSIDE"]
    objects = [None, "", "car-17", "ü" * 70, None]
    ids = np.arange(5, dtype=np.int64) - 2
    blobs = [bytes(k) for k in range(5)]
    assert encode("Publication", ids, blobs, ids * 1000, object_tails(objects)) == [
        c.encode("Publication", {"id": int(i), "geometry": b, "event_time": int(i) * 1000,
                                 "object_id": o})
        for i, b, o in zip(ids, blobs, objects, strict=True)]
    masks = np.array([0, 1, 15, 6, 8], np.uint8)
    distances = np.array([np.nan, 0.5, 1e6, np.nan, 250.0])
    subs = Subscriptions(ids, [shapely.Point(k, k) for k in range(5)], [0, 1, 2, 3, 4])
    assert encode_subscriptions(subs, masks, distances) == [
        c.encode("Subscription", {**r, "detect": [k for b, k in enumerate(kinds) if m >> b & 1],
                                  "distance_m": None if d != d else d})
        for r, m, d in zip(subscription_records(subs), masks.tolist(), distances.tolist(),
                           strict=True)]


def test_roaming_fences_equal_the_codecs():
    c = codec()
    ids = np.arange(4, dtype=np.int64)
    subs = Subscriptions(ids, [shapely.Point(k, k) for k in range(4)], [5, 5, 5, 5])
    masks = np.array([96, 0, 97, 32], np.uint8)
    roams = [(500.0, "courier-*"), None, (1.5, "ü[0-9]"), (100_000.0, "")]
    records = list(subscription_records(subs, masks, None, roams))
    assert [r["roam"] for r in records] == [
        {"distance_m": 500.0, "match": "courier-*"}, None,
        {"distance_m": 1.5, "match": "ü[0-9]"}, {"distance_m": 100_000.0, "match": ""}]
    assert records[2]["detect"] == ["ENTER", "NEARBY", "FARAWAY"]
    assert encode_subscriptions(subs, masks, None, roams) == [
        c.encode("Subscription", r) for r in records]
