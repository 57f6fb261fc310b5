"""The batch GeofenceEvent encoder writes exactly the codec's bytes."""

from __future__ import annotations

import numpy as np

from schemas import codec
from schemas.event_encoder import KINDS, encode_events


def _codec_bytes(o, s, k, r, p, e, m, b) -> bytes:
    return codec().encode("GeofenceEvent", {
        "object_id": o, "subscription_id": s, "kind": KINDS[k], "reason": r,
        "publication_id": p, "event_time": e, "match_time": m, "batch_id": b})


def test_same_bytes_as_the_codec_on_random_batches():
    rng = np.random.default_rng(3)
    for n in (1, 7, 300):
        objects = [f"obj-{'é' * int(rng.integers(0, 3))}{rng.integers(0, 10 ** 12)}"
                   for _ in range(n)]
        subs = rng.integers(-2 ** 62, 2 ** 62, n)
        kinds = rng.integers(0, 4, n)
        expired = rng.random(n) < 0.3
        reasons = ["expired" if x else None for x in expired]
        pubs = [None if x else int(v) for x, v in zip(expired, rng.integers(0, 2 ** 40, n),
                                                      strict=True)]
        times = rng.integers(0, 2 ** 45, n)
        match = times + rng.integers(0, 10 ** 6, n)
        batches = rng.integers(0, 10 ** 6, n)
        got = encode_events(objects, subs, kinds, reasons, pubs, times, match, batches)
        assert got == [_codec_bytes(*row) for row in zip(
            objects, subs.tolist(), kinds.tolist(), reasons, pubs, times.tolist(),
            match.tolist(), batches.tolist(), strict=True)]


def test_extremes_and_an_empty_batch():
    assert encode_events([], np.empty(0), np.empty(0), [], [], np.empty(0), np.empty(0),
                         np.empty(0)) == []
    row = ("", -(2 ** 63), 3, "", 2 ** 63 - 1, 0, -1, 2 ** 63 - 1)
    assert encode_events([row[0]], np.array([row[1]]), np.array([row[2]]), [row[3]],
                         [row[4]], np.array([row[5]]), np.array([row[6]]),
                         np.array([row[7]])) == [_codec_bytes(*row)]
