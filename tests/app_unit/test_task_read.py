"""A small batch's ranges, as the app reads them in its join tasks (app.task_read)."""

from __future__ import annotations

from app.task_read import BatchRanges


def test_records_count_the_offsets_a_batch_spans():
    r = BatchRanges("p", {0: 10, 1: 5}, {0: 30, 1: 5, 2: 7}, {}, 60.0)
    # a partition without a start (new to the query) is read from its beginning
    assert r.records == 20 + 0 + 7
    # a partition planned to end below its start counts nothing (the app reads such a batch
    # through the connector, which names the loss)
    assert BatchRanges("p", {0: 10}, {0: 4}, {}, 60.0).records == 0
