"""Reading a batch's offsets from a Spark checkpoint's offset log (no Spark needed)."""

from __future__ import annotations

import json

import pytest

from app.offsetlog import OffsetLogError, batch_end_offsets, batch_ranges, initial_offsets_path


def write_entry(checkpoint, batch_id, offsets):
    log = checkpoint / "offsets"
    log.mkdir(parents=True, exist_ok=True)
    meta = {"batchWatermarkMs": 0, "batchTimestampMs": 0, "conf": {}}
    (log / str(batch_id)).write_text(f"v1\n{json.dumps(meta)}\n{json.dumps(offsets)}")


def test_end_offsets_are_the_entry_of_the_batch(tmp_path):
    write_entry(tmp_path, 0, {"0": 5, "1": 7})
    write_entry(tmp_path, 1, {"0": 9, "1": 7, "2": 3})
    assert batch_end_offsets(str(tmp_path), 0) == {"0": 5, "1": 7}
    assert batch_end_offsets(str(tmp_path), 1) == {"0": 9, "1": 7, "2": 3}
    # and the ranges of batch 1 start where batch 0 ended
    got = [(r.partition, r.start, r.end) for r in batch_ranges(str(tmp_path), "t", 1)]
    assert got == [(0, 5, 9), (2, 0, 3)]


def test_first_batch_starts_at_the_pinned_initial_offsets(tmp_path):
    write_entry(tmp_path, 0, {"0": 5, "1": 7})
    with open(initial_offsets_path(str(tmp_path)), "w") as fh:
        json.dump({"0": 2, "1": 7}, fh)
    assert [(r.partition, r.start, r.end) for r in batch_ranges(str(tmp_path), "t", 0)] == [
        (0, 2, 5)]


def test_missing_or_malformed_entries_say_so(tmp_path):
    with pytest.raises(OffsetLogError, match="no offset log entry"):
        batch_end_offsets(str(tmp_path), 3)
    (tmp_path / "offsets").mkdir()
    (tmp_path / "offsets" / "4").write_text("v1\n{}\n[1, 2]")
    with pytest.raises(OffsetLogError, match="not a partition map"):
        batch_end_offsets(str(tmp_path), 4)
