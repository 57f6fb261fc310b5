"""The batch GeofenceEvent encoder writes exactly the codec's bytes."""

from __future__ import annotations

import numpy as np

from schemas import codec
from schemas.event_encoder import FEW, KINDS, Packed, encode_events, pack_strings


def _codec_bytes(o, s, k, r, p, e, m, b, other=None, d=None) -> bytes:
    return codec().encode("GeofenceEvent", {
        "object_id": o, "subscription_id": s, "kind": KINDS[k], "reason": r,
        "publication_id": p, "event_time": e, "match_time": m, "batch_id": b,
        "other_object_id": other, "distance_m": d})


def test_same_bytes_as_the_codec_on_random_batches():
    rng = np.random.default_rng(3)
    for n in (1, 7, FEW, FEW + 1, 300):  # one by one up to FEW, vectorised above
        objects = [f"obj-{'é' * int(rng.integers(0, 3))}{rng.integers(0, 10 ** 12)}"
                   for _ in range(n)]
        subs = rng.integers(-2 ** 62, 2 ** 62, n)
        kinds = rng.integers(0, 4, n)
        expired = rng.random(n) < 0.3
        reasons = ["expired" if x else None for x in expired]
        pub_ids = rng.integers(0, 2 ** 40, n)
        pubs = [None if x else int(v) for x, v in zip(expired, pub_ids, strict=True)]
        times = rng.integers(0, 2 ** 45, n)
        match = times + rng.integers(0, 10 ** 6, n)
        batches = rng.integers(0, 10 ** 6, n)
        got = encode_events(pack_strings(objects), subs, kinds, reasons, ~expired, pub_ids,
                            times, match, batches)
        assert got.split() == [_codec_bytes(*row) for row in zip(
            objects, subs.tolist(), kinds.tolist(), reasons, pubs, times.tolist(),
            match.tolist(), batches.tolist(), strict=True)]


def test_extremes_and_an_empty_batch():
    assert encode_events(pack_strings([]), np.empty(0), np.empty(0), [], np.empty(0, bool),
                         np.empty(0), np.empty(0), np.empty(0), np.empty(0)).split() == []
    row = ("", -(2 ** 63), 3, "", 2 ** 63 - 1, 0, -1, 2 ** 63 - 1)
    for n in (1, FEW + 1):   # one by one, and vectorised
        packed = encode_events(pack_strings([row[0]] * n), np.array([row[1]] * n),
                               np.array([row[2]] * n), [row[3]] * n, np.array([True] * n),
                               np.array([row[4]] * n), np.array([row[5]] * n),
                               np.array([row[6]] * n), np.array([row[7]] * n))
        assert Packed.of(packed.data, packed.ends_bytes()).split() == [_codec_bytes(*row)] * n


def test_keys_packed_and_split_back():
    names = ["a", "", "obj-é7", "z" * 300]
    assert pack_strings(names).split() == [n.encode() for n in names]
    assert pack_strings([]).split() == []


def test_roaming_events_name_the_other_object_and_the_distance():
    rng = np.random.default_rng(5)
    for n in (3, FEW, 50):  # one by one up to FEW, vectorised above
        objects = [f"c-{k}" for k in range(n)]
        kinds = rng.integers(5, 7, n)
        expired = rng.random(n) < 0.3
        others = [f"ü-{k}" if k % 7 else "" for k in range(n)]
        distances = [None if x else float(rng.uniform(0, 1e5)) for x in expired]
        pub_ids = rng.integers(0, 2 ** 40, n)
        got = encode_events(pack_strings(objects), np.arange(n), kinds,
                            ["expired" if x else None for x in expired], ~expired, pub_ids,
                            np.arange(n) * 10, np.arange(n) * 11, np.zeros(n, np.int64),
                            others, distances)
        assert got.split() == [_codec_bytes(
            objects[k], k, int(kinds[k]), "expired" if expired[k] else None,
            None if expired[k] else int(pub_ids[k]), 10 * k, 11 * k, 0, others[k],
            distances[k]) for k in range(n)]
