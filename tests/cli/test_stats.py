"""`geops stats` arithmetic on hand-made metrics records."""

from __future__ import annotations

import io
import sys
import threading
import time

import pytest

from cli.stats import shortfall, summarise
from cli.stats_follow import HEADER, format_row
from dashboard.periods import Follower, Period
from kafkaio.sender import Sender
from schemas import codec


def summary(batch, epoch, start, end, records=100):
    return {"app_id": "a", "batch_id": batch, "epoch": epoch, "records": records,
            "dead_letters": 1, "workers": 2, "start_time": start, "end_time": end,
            "duration_ms": float(end - start), "latency_p50_ms": float(end - start) / 2,
            "latency_p99_ms": float(end - start) + batch}


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
    assert epoch0[-4:-2] == ["0.50", "0.80"]  # (300 - 200) / 200 and (90 - 50) / 50
    assert epoch0[-2:] == ["500", "1,001"]  # median p50, worst batch p99
    epoch1 = lines[3].split()
    assert epoch1[:5] == ["1", "2", "200", "200", "500"]
    assert epoch1[-4:] == ["0.00", "0.00", "250", "503"]
    assert lines[4] == "moved in epoch 1: 2 partitions, 2.50 MB in 40 ms (before batch 2)"


def test_batches_that_matched_nothing_have_no_latency():
    unmatched = {"latency_p50_ms": None, "latency_p99_ms": None}
    records = {"BatchSummary": [{**summary(0, 0, 0, 1000), **unmatched},
                                summary(1, 0, 1000, 2000), {**summary(2, 1, 2000, 3000),
                                                            **unmatched}]}
    lines = summarise(records, "a")
    assert lines[2].split()[-2:] == ["500", "1,001"]  # the batch that matched something
    assert lines[3].split()[-2:] == ["-", "-"]


def test_nothing_yet():
    assert summarise({}, "a") == ["no batches with records from app 'a' on the metrics topic"]


def test_shortfall_names_missing_publications_and_a_missing_rebalance():
    one_epoch = {"BatchSummary": [summary(0, 0, 0, 10), summary(1, 0, 10, 20),
                                  summary(1, 0, 10, 20),  # a replayed batch counts once
                                  {**summary(0, 0, 0, 1), "app_id": "other"}]}
    assert shortfall(one_epoch, "a", 200) is None
    assert shortfall(one_epoch, "a", 201) == (
        "the app 'a' processed 200 of the 201 publications expected")
    assert shortfall(one_epoch, "a", rebalance=True) == (
        "no rebalance reached the app 'a': all its batches ran in epoch 0")
    assert shortfall({}, "a", 1) == "the app 'a' processed 0 of the 1 publications expected"
    rebalanced = {"BatchSummary": [*one_epoch["BatchSummary"], summary(2, 1, 20, 30)]}
    assert shortfall(rebalanced, "a", 300, rebalance=True) is None


# -- `geops stats --follow`: one period's arithmetic, no Kafka --------------------------------

def batch(batch_id, epoch, records, ends=None, p50=None, p99=None, app="a"):
    return ("BatchSummary", {"app_id": app, "batch_id": batch_id, "epoch": epoch,
                             "records": records, "workers": 2, "latency_p50_ms": p50,
                             "latency_p99_ms": p99, "source_end_offsets": ends or {}})


def part_load(worker, ns, epoch=0, app="a"):
    return ("PartitionLoad", {"app_id": app, "batch_id": 0, "epoch": epoch, "partition": worker,
                              "worker": worker, "processing_ns": ns, "items": 1})


def match(latency_ms, app="a"):
    return {"publication_id": 1, "subscription_ids": [2], "event_time": 1_000,
            "match_time": 1_000 + latency_ms, "batch_id": 0, "app_id": app}


def test_follow_period_rates_lag_latency_mldc_and_epoch():
    f = Follower("a", topic_end={0: 100, 1: 100})
    row = f.step(Period(
        seconds=5.0, topic_end={0: 600, 1: 600},
        metrics=[part_load(0, 300), part_load(1, 100),
                 batch(7, 3, 300, {"0": 400, "1": 450}),
                 batch(8, 3, 200, {"0": 500, "1": 450}),
                 batch(9, 5, 10_000, {"0": 0}, app="other"),   # another app: ignored
                 part_load(0, 10**12, app="other")],
        matches=[match(ms) for ms in range(1, 101)] + [match(10**6, app="other")]))
    assert row.input_rate == 200.0                    # (1200 - 200) / 5 s
    assert row.output_rate == 100.0                   # (300 + 200) / 5 s
    assert row.lag == 100 + 150                       # topic end - last batch's end offsets
    assert row.batches == 2 and row.epoch == 3
    assert row.p50_ms == 50.5 and abs(row.p99_ms - 99.01) < 1e-9
    assert not row.latency_from_batches
    assert row.mldc == 0.5                            # (300 - 200) / 200


def test_follow_unknown_end_gives_dashes_then_a_rate_over_both_periods():
    f = Follower("a", topic_end={0: 0})
    row = f.step(Period(2.0, None, [batch(0, 0, 10, {"0": 10})]))
    assert row.input_rate is None and row.lag is None and row.output_rate == 5.0
    row = f.step(Period(2.0, {0: 40, 1: 5}))          # a partition appeared meanwhile
    assert row.input_rate == 45 / 4.0
    assert row.lag == 30 + 5                          # unseen partition: all of it is lag
    assert row.batches == 0 and row.output_rate == 0 and row.epoch == 0  # epoch carries over
    assert row.mldc is None and row.p50_ms is None


def test_follow_without_batch_offsets_or_matches():
    f = Follower("a", topic_end={0: 0})
    # a BatchSummary written before v3 has no end offsets: lag unknown, not 0
    row = f.step(Period(1.0, {0: 10}, [batch(0, 0, 10, None, p50=40.0, p99=90.0),
                                       batch(1, 0, 10, None, p50=60.0, p99=70.0)]))
    assert row.lag is None
    assert (row.p50_ms, row.p99_ms, row.latency_from_batches) == (50.0, 90.0, True)
    assert "~50" in format_row(row) and "~90" in format_row(row)
    # first period without a starting end: no input rate, the next one has it
    f = Follower("a")
    assert f.step(Period(1.0, {0: 10})).input_rate is None
    assert f.step(Period(1.0, {0: 15})).input_rate == 5.0


def test_follow_rows_are_aligned_under_the_header():
    f = Follower("a", topic_end={0: 0})
    rows = [f.step(Period(1.0, {0: 1_234_567}, [part_load(0, 1), part_load(1, 3),
                                               batch(0, 12, 1_000_000, {"0": 1})],
                          [match(1234)])),
            f.step(Period(1.0, None))]
    lines = [HEADER] + [format_row(r) for r in rows]
    assert len({len(line) for line in lines}) == 1
    cells = lines[1].split()
    assert cells[1:] == ["1,234,567", "1,000,000", "1,234,566", "1", "1,234", "1,234", "0.50",
                         "12"]
    assert lines[2].split()[1:] == ["-", "0", "-", "0", "-", "-", "-", "12"]
    ends = [i + len(h) for h, i in ((h, lines[0].index(h)) for h in
                                    ("in/s", "out/s", "lag", "p50 ms", "epoch"))]
    for line in lines[1:]:  # right-aligned: every column ends where its header ends
        assert all(line[e - 1] != " " for e in ends)


def test_follow_options_need_follow(capsys):
    from cli.main import main

    for argv in (["--period", "2s"], ["--until-idle", "10s"], ["--from-beginning"]):
        assert main(["stats", *argv]) == 2
        assert "only applies with --follow" in capsys.readouterr().err


# -- `geops stats --follow` against a real Apache Kafka ----------------------------------

class _Lines(io.StringIO):
    """stdout that tells a producer thread when the header and each row are out."""

    def __init__(self):
        super().__init__()
        self.lines: list[str] = []
        self.printed = [threading.Event() for _ in range(3)]

    def write(self, text):
        for line in text.splitlines():
            self.lines.append(line)
            if len(self.lines) <= len(self.printed):
                self.printed[len(self.lines) - 1].set()
        return super().write(text)


def _summary(app, batch_id, epoch, records, ends, p50=None, p99=None):
    return {"app_id": app, "batch_id": batch_id, "epoch": epoch, "strategy": "sPIS",
            "join": "STAL", "workers": 2, "partitions": 2, "records": records,
            "dead_letters": 0, "items": records, "matched_publications": 0, "start_time": 0,
            "end_time": 1, "duration_ms": 1.0, "latency_p50_ms": p50, "latency_p99_ms": p99,
            "source_end_offsets": {str(p): o for p, o in ends.items()}}


def _load(app, batch_id, epoch, worker, ns):
    return {"app_id": app, "batch_id": batch_id, "epoch": epoch, "partition": worker,
            "worker": worker, "items": 1, "processing_ns": ns, "time": 0}


@pytest.mark.integration
def test_follow_prints_rates_lag_latency_of_two_periods(kafka_cfg, capsys, monkeypatch):
    from cli.main import main

    assert main(["topics", "create"]) == 0
    capsys.readouterr()
    app = kafka_cfg["app.app_id"]
    pubs, metrics, matches = (kafka_cfg.topic(t) for t in ("publications", "metrics",
                                                           "matches"))
    c = codec()
    sender = Sender(kafka_cfg.kafka_client())
    now = int(time.time() * 1000)

    def publish(partition, n):
        for i in range(n):
            sender.send(pubs, c.encode("Publication", {"id": i, "geometry": b"\x01",
                                                       "event_time": now}),
                        key=str(i).encode(), partition=partition)

    def metric(name, record):
        sender.send(metrics, c.encode(name, record), key=app.encode())

    publish(0, 10)  # before following: not input of the first period
    metric("BatchSummary", _summary(app, 0, 0, 10_000, {0: 10}))  # nor output
    sender.flush()
    out = _Lines()
    failed: list[BaseException] = []

    def play_the_app():
        try:
            assert out.printed[0].wait(30)             # header: period 1 is running
            publish(0, 400)
            publish(1, 100)                            # ends 410, 100, 0, 0
            metric("PartitionLoad", _load(app, 1, 1, 0, 300))
            metric("PartitionLoad", _load(app, 1, 1, 1, 100))
            metric("BatchSummary", _summary(app, 1, 1, 300, {0: 310, 1: 100}, 40.0, 90.0))
            sender.flush()
            assert out.printed[1].wait(30)             # first row: period 2 is running
            publish(2, 200)                            # ends 410, 100, 200, 0
            metric("PartitionLoad", _load(app, 2, 2, 0, 200))
            metric("PartitionLoad", _load(app, 2, 2, 1, 200))
            metric("BatchSummary", _summary(app, 2, 2, 510, {0: 410, 1: 100, 2: 200, 3: 0}))
            for i, latency in enumerate(range(10, 1001, 10)):
                sender.send(matches, c.encode("Match", {
                    "publication_id": i, "subscription_ids": [1], "event_time": now,
                    "match_time": now + latency, "batch_id": 2, "app_id": app}),
                    key=str(i).encode())
            sender.flush()
        except BaseException as exc:  # reported by the test thread
            failed.append(exc)

    producer = threading.Thread(target=play_the_app, daemon=True)
    producer.start()
    monkeypatch.setattr(sys, "stdout", out)
    code = main(["stats", "--follow", "--period", "2.5s", "--periods", "2"])
    producer.join(30)
    sender.close()
    assert not failed, failed
    assert code == 0
    assert out.lines[0] == HEADER and len(out.lines) == 3, out.lines
    first, second = (line.split() for line in out.lines[1:])
    number = lambda cell: float(cell.replace(",", "").lstrip("~"))  # noqa: E731
    # period 1: 500 publications in; the app's batch read 300 and ended at 310 of 410 on p0
    assert 500 / 2.5 * 0.8 <= number(first[1]) <= 500 / 2.5 * 1.05, first
    assert 300 / 2.5 * 0.8 <= number(first[2]) <= 300 / 2.5 * 1.05, first
    assert first[3:] == ["100", "1", "~40", "~90", "0.50", "1"], first
    # period 2: 200 in, 510 out, caught up; latency of the 100 Match records (10..1000 ms)
    assert 200 / 2.5 * 0.8 <= number(second[1]) <= 200 / 2.5 * 1.05, second
    assert 510 / 2.5 * 0.8 <= number(second[2]) <= 510 / 2.5 * 1.05, second
    assert second[3:] == ["0", "1", "505", "990", "0.00", "2"], second
