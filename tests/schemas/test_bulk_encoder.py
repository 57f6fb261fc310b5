"""The bulk encoder writes exactly the codec's bytes for Subscription and Publication."""

from __future__ import annotations

import numpy as np
import shapely

from geops.model import Subscriptions
from schemas import codec
from schemas.bulk_encoder import encode, encode_subscriptions
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
