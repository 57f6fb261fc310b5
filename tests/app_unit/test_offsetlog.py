"""Reading a batch's offsets from a Spark checkpoint (the Kafka connector's form; no Spark)."""

from __future__ import annotations

import json

import pytest

from app.errors import OffsetLogError
from app.read.offsetlog import batch_end_offsets, batch_start_offsets, lost_ranges


def write_entry(checkpoint, batch_id, offsets, topic="t"):
    log = checkpoint / "offsets"
    log.mkdir(parents=True, exist_ok=True)
    meta = {"batchWatermarkMs": 0, "batchTimestampMs": 0, "conf": {}}
    (log / str(batch_id)).write_text(f"v1\n{json.dumps(meta)}\n{json.dumps({topic: offsets})}")


def test_end_offsets_are_the_entry_of_the_batch_and_the_next_starts_there(tmp_path):
    write_entry(tmp_path, 0, {"0": 5, "1": 7})
    write_entry(tmp_path, 1, {"0": 9, "1": 7, "2": 3})
    assert batch_end_offsets(str(tmp_path), 0) == {"0": 5, "1": 7}
    assert batch_end_offsets(str(tmp_path), 1) == {"0": 9, "1": 7, "2": 3}
    assert batch_start_offsets(str(tmp_path), 1) == {"0": 5, "1": 7}


def test_first_batch_starts_at_the_connectors_initial_offsets(tmp_path):
    write_entry(tmp_path, 0, {"0": 5, "1": 7})
    assert batch_start_offsets(str(tmp_path), 0) == {}
    sources = tmp_path / "sources" / "0"
    sources.mkdir(parents=True)
    # what KafkaMicroBatchStream writes: a zero byte, a version line, the offsets' JSON
    (sources / "0").write_bytes(b"\x00v1\n" + json.dumps({"t": {"0": 2, "1": 7}}).encode())
    assert batch_start_offsets(str(tmp_path), 0) == {"0": 2, "1": 7}


def test_a_log_that_came_back_shorter_is_a_lost_range():
    assert lost_ranges({"0": 50, "1": 60}, {"0": 10, "1": 70, "2": 5}) == [(0, 10, 50)]
    assert lost_ranges({}, {"0": 3}) == []


def test_missing_or_malformed_entries_say_so(tmp_path):
    with pytest.raises(OffsetLogError, match="no offset log entry"):
        batch_end_offsets(str(tmp_path), 3)
    (tmp_path / "offsets").mkdir()
    (tmp_path / "offsets" / "4").write_text("v1\n{}\n[1, 2]")
    with pytest.raises(OffsetLogError, match="not a topic -> partition map"):
        batch_end_offsets(str(tmp_path), 4)
    (tmp_path / "offsets" / "5").write_text('v1\n{}\n{"a": {"0": 1}, "b": {"0": 1}}')
    with pytest.raises(OffsetLogError, match="2 topics"):
        batch_end_offsets(str(tmp_path), 5)
