"""`geops stats` arithmetic on hand-made metrics records."""

from __future__ import annotations

from cli.stats import summarise


def summary(batch, epoch, start, end, records=100):
    return {"app_id": "a", "batch_id": batch, "epoch": epoch, "records": records,
            "dead_letters": 1, "workers": 2, "start_time": start, "end_time": end,
            "duration_ms": float(end - start)}


def load(batch, epoch, worker, ns, items):
    return {"app_id": "a", "batch_id": batch, "epoch": epoch, "partition": 0, "worker": worker,
            "processing_ns": ns, "items": items}


def test_per_epoch_throughput_shares_and_mldc():
    records = {
        "BatchSummary": [summary(0, 0, 0, 1000), summary(1, 0, 1000, 2000),
                         summary(2, 1, 2000, 2500), summary(3, 1, 2500, 3000),
                         {**summary(4, 1, 3000, 3100), "records": 0},
                         {**summary(0, 0, 0, 1), "app_id": "other"}],
        "PartitionLoad": [load(0, 0, 0, 300, 90), load(0, 0, 1, 100, 10),
                          load(2, 1, 0, 100, 50), load(2, 1, 1, 100, 50),
                          load(9, 1, 0, 10**9, 1)],  # batch without records: ignored
        "MoveReport": [{"app_id": "a", "epoch": 1, "partitions_moved": [1, 2], "bytes": 2_500_000,
                        "duration_ms": 40.0, "batch_id": 2}],
    }
    lines = summarise(records, "a")
    assert lines[0] == "app a: 4 batches, 400 publications, 4 dead letters, 2 workers"
    epoch0 = lines[2].split()
    assert epoch0[:5] == ["0", "2", "200", "100", "1,000"]
    assert "75% / 25%" in lines[2] and "90% / 10%" in lines[2]
    assert epoch0[-2:] == ["0.50", "0.80"]  # (300 - 200) / 200 and (90 - 50) / 50
    epoch1 = lines[3].split()
    assert epoch1[:5] == ["1", "2", "200", "200", "500"]
    assert epoch1[-2:] == ["0.00", "0.00"]
    assert lines[4] == "moved in epoch 1: 2 partitions, 2.50 MB in 40 ms (before batch 2)"


def test_nothing_yet():
    assert summarise({}, "a") == ["no batches with records from app 'a' on the metrics topic"]
