"""`geops tail` lines of the app's ObjectPositions records, of version 4 (fences packed, places
and shapes) and of version 2 (fences as an array), in text and JSON."""

from __future__ import annotations

import base64

import numpy as np

from cli.render import to_json, to_text
from schemas import codec
from schemas.int_pack import IntFrame
from tests.old_records import written_by

RECORD = {"app_id": "a", "batch_id": 3, "match_time": 0, "bucket": 5, "clock": 0,
          "fences_complete": False, "fence_ids": [], "fence_detect": [],
          "object_ids": ["o1", "o2"], "publication_ids": [1, 2], "event_times": [0, 0],
          "hit_counts": [2, 1]}
FENCES = np.array([40, 70_000, 41])


def test_a_record_with_packed_fences() -> None:
    frame = IntFrame.of(FENCES)
    rec = codec().decode_as("ObjectPositions", codec().encode("ObjectPositions", {
        **RECORD, "hit_ids": [], "hit_fences": frame.pack(FENCES), "hit_base": frame.base,
        "hit_width": frame.width, "places": np.array([[1.5, 2.5], [3.0, 4.0]]).tobytes(),
        "fence_shapes": [b"\x01"]}))
    assert to_text("ObjectPositions", rec) == (
        "positions of app a batch 3 bucket 5: 2 positions, 3 in fences; fences 0")
    out = to_json("ObjectPositions", rec)
    assert out["hit_width"] == 4 and out["hit_base"] == 40
    assert IntFrame(40, 4).unpack(base64.b64decode(out["hit_fences"])).tolist() == [40, 70_000,
                                                                                   41]
    assert np.frombuffer(base64.b64decode(out["places"])).tolist() == [1.5, 2.5, 3.0, 4.0]
    assert [base64.b64decode(s) for s in out["fence_shapes"]] == [b"\x01"]


def test_a_record_of_version_2() -> None:
    rec = codec().decode_as("ObjectPositions", written_by("ObjectPositions", 2, {
        **RECORD, "hit_ids": FENCES.tolist()}))
    assert rec["hit_width"] == 0 and rec["hit_ids"] == FENCES.tolist()
    assert to_text("ObjectPositions", rec).endswith("2 positions, 3 in fences; fences 0")
    out = to_json("ObjectPositions", rec)
    assert out["hit_fences"] == "" and out["hit_ids"] == [40, 70_000, 41]
