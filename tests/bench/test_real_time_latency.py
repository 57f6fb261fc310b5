"""bench.studies.real_time_latency: its figures and options, without Spark or Kafka."""

from __future__ import annotations

import csv
import gzip
from pathlib import Path

import pytest

from bench.studies import real_time_latency as rtl


def _result() -> rtl.Result:
    res = rtl.Result("lrt", "local[3]", sent=4, window=(100.0, 102.0))
    # send at 1 s + seq ms; out timestamp 2, 3, 4, 5 ms later; seq 2 twice, seq 3 missing
    for seq, late in ((0, 2), (1, 3), (2, 4), (2, 5)):
        send = 1_000_000 + seq * 1000
        res.records.append(rtl.Out(seq, seq % 2, send, send // 1000 + late, send + 7000))
    return res


def test_summary_counts_missing_and_duplicates() -> None:
    s = rtl.summary(_result())
    assert (s["sent"], s["out"], s["missing"], s["duplicates"]) == (4, 4, 1, 1)
    assert s["rate"] == pytest.approx(1.5)             # 3 distinct records in 2 s
    assert s["p50"] == pytest.approx(3.5)
    assert s["max"] == pytest.approx(5.0)
    assert s["seen_p50"] == pytest.approx(7.0)


def test_percentile_interpolates_and_is_nan_for_none() -> None:
    assert rtl.percentile([1.0, 2.0, 3.0, 4.0], 0.5) == pytest.approx(2.5)
    assert rtl.percentile([5.0], 0.99) == 5.0
    assert rtl.percentile([], 0.5) != rtl.percentile([], 0.5)


def test_table_and_raw_file(tmp_path: Path) -> None:
    lines = rtl.table([rtl.summary(_result())])
    assert lines[0].startswith("| probe | settings |")
    assert lines[2].startswith("| lrt | local[3] |")
    rtl.write_raw(tmp_path / "raw.csv.gz", [_result()])
    with gzip.open(tmp_path / "raw.csv.gz", "rt") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 4 and rows[1]["out_ms"] == "3.0" and rows[1]["send_s"] == "0.001"


def test_options_are_checked() -> None:
    args = rtl.parse_args(["--probes", "rtm-jvm,lrt", "--conf", "a.b=1", "--source", "x=y"])
    assert args.probes == ["rtm-jvm", "lrt"] and args.conf == [("a.b", "1")]
    assert "epoch 5 seconds" in rtl.settings_of("rtm-jvm", args)
    with pytest.raises(SystemExit):
        rtl.parse_args(["--probes", "nope"])
