"""A small batch's ranges, as the app reads them in its join tasks (app.read.ranges)."""

from __future__ import annotations

from app.read.ranges import BatchRanges


def test_records_count_the_offsets_a_batch_spans():
    r = BatchRanges("p", {0: 10, 1: 5}, {0: 30, 1: 5, 2: 7}, {}, 60.0)
    # a partition without a start (new to the query) is read from its beginning
    assert r.records == 20 + 0 + 7
    # a partition planned to end below its start counts nothing (the app reads such a batch
    # through the connector, which names the loss)
    assert BatchRanges("p", {0: 10}, {0: 4}, {}, 60.0).records == 0


def test_a_split_covers_every_offset_once_in_slices_of_about_equal_size():
    r = BatchRanges("p", {0: 10, 1: 5, 3: 8}, {0: 31, 1: 5, 2: 7, 3: 9}, {"a": "b"}, 60.0)
    parts = r.split(2)
    assert len(parts) == 2
    assert all((p.topic, p.kafka_conf, p.outage_limit) == ("p", {"a": "b"}, 60.0)
               for p in parts)
    covered: dict[int, list[int]] = {}
    for part in parts:
        for p, end in part.end.items():
            covered.setdefault(p, []).extend(range(part.start.get(p, 0), end))
    # partition 2 (no start: its beginning) whole in the first part; 1 spans nothing
    assert covered == {0: list(range(10, 31)), 2: list(range(0, 7)), 3: [8]}
    assert 2 not in parts[1].end and 2 not in parts[0].start
    assert parts[0].start[0] == 10 and parts[0].end[0] == parts[1].start[0] == 20
    assert parts[1].end[0] == 31


def test_a_split_leaves_out_parts_with_nothing_to_read():
    r = BatchRanges("p", {0: 10}, {0: 12}, {}, 60.0)
    parts = r.split(4)
    assert [(p.start, p.end) for p in parts] == [({0: 10}, {0: 11}), ({0: 11}, {0: 12})]
    assert BatchRanges("p", {0: 10}, {0: 10}, {}, 60.0).split(3) == []
