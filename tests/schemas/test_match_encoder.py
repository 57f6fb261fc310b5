"""The batch Match encoder writes exactly what the codec writes."""

from __future__ import annotations

import numpy as np

from schemas import codec
from schemas.match_encoder import encode_matches


def test_same_bytes_as_the_codec_on_random_batches():
    rng = np.random.default_rng(3)
    c = codec()
    for trial in range(30):
        n = int(rng.integers(1, 60))
        counts = rng.integers(0, 40, n)
        offsets = np.concatenate([[0], np.cumsum(counts)])
        scale = [10, 2**20, 2**62][trial % 3]
        sub_ids = np.sort(rng.integers(-scale, scale, offsets[-1]))
        pub_ids = rng.integers(-scale, scale, n)
        events = rng.integers(0, 2**45, n)
        match_time, batch_id = int(rng.integers(0, 2**45)), int(rng.integers(0, 10**6))
        app_id = ["", "geops", "äpp-ü"][trial % 3]
        got = encode_matches(pub_ids, offsets, sub_ids, events, match_time, batch_id, app_id)
        for i in range(n):
            want = c.encode("Match", {
                "publication_id": int(pub_ids[i]),
                "subscription_ids": sub_ids[offsets[i]:offsets[i + 1]].tolist(),
                "event_time": int(events[i]), "match_time": match_time,
                "batch_id": batch_id, "app_id": app_id})
            assert got[i] == want


def test_extremes_and_empty_batch():
    c = codec()
    big = np.array([np.iinfo(np.int64).max, np.iinfo(np.int64).min, 0, -1, 63, 64, -64, -65])
    for values in (big[:3], np.tile(big, 3)):  # a handful goes through the codec, more not
        offsets = np.arange(len(values) + 1)
        got = encode_matches(values, offsets, values, np.zeros(len(values), np.int64), 0, 0,
                             "a")
        for i, value in enumerate(values.tolist()):
            assert c.decode(got[i])[1]["subscription_ids"] == [value]
            assert c.decode(got[i])[1]["publication_id"] == value
    assert encode_matches(np.empty(0, np.int64), np.zeros(1, np.int64), np.empty(0, np.int64),
                          np.empty(0, np.int64), 0, 0, "a") == []
