"""`geops bench decode`: the harness checks the decoders agree; no timing is asserted."""

from __future__ import annotations

import pytest

from bench.decode import run as decode
from bench.harness.errors import MismatchError
from cli.main import main


def test_both_decoders_are_timed_on_the_same_records() -> None:
    timings = decode.run_decode_bench(publications=300, repeat=1, log=lambda _: None)
    assert [t.method for t in timings] == [decode.PER_RECORD, decode.BULK]
    assert all(t.records == 300 and t.seconds > 0 for t in timings)
    lines = decode.format_table(timings).splitlines()
    assert len(lines) == 3 and lines[1].endswith(" 1.00")


def test_a_wrong_decoder_fails_the_bench(monkeypatch) -> None:
    real = decode.decode_publications

    def off_by_one(values):
        got = real(values)
        return type(got)(got.ok, got.ids + 1, got.geometries, got.event_times, got.errors,
                         got.object_ids)

    monkeypatch.setattr(decode, "decode_publications", off_by_one)
    with pytest.raises(MismatchError):
        decode.run_decode_bench(publications=50, repeat=1, log=lambda _: None)


def test_cli_prints_the_table(capsys) -> None:
    assert main(["bench", "decode", "--publications", "200", "--repeat", "1"]) == 0
    out = capsys.readouterr().out
    assert decode.BULK in out and "ratio" in out
    with pytest.raises(SystemExit):
        main(["bench", "decode", "--publications", "0"])
    assert "--publications" in capsys.readouterr().err
