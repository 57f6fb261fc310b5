"""`python -m bench.studies.static_memory` measures every piece of the static side and checks
its flags."""

from __future__ import annotations

import pytest

from bench.studies.static_memory import format_report, main, measure_strategy, parser
from geops.workload import generate_workload


def test_every_piece_is_measured_per_strategy():
    workload = generate_workload(seed=1, subscriptions=300, publications=40)
    spis = measure_strategy("sPIS", workload, 4)
    names = [p.name for p in spis.pieces]
    assert names[0] == "payload bytes" and "R-tree (EnvelopeIndex)" in names
    assert names[-1] == "after matching (grown)"
    assert spis.placed >= spis.subscriptions and spis.payload_bytes > 0
    assert 0 < spis.coverage <= 1 and spis.candidates > 0
    risps = measure_strategy("RIsPS", workload, 4)
    assert "router index (per process)" in [p.name for p in risps.pieces]
    assert "R-tree (EnvelopeIndex)" not in [p.name for p in risps.pieces]
    table = format_report(risps)
    assert table.startswith("RIsPS: 300 subscriptions") and "(B/sub)" in table


@pytest.mark.parametrize("argv", [["--subscriptions", "0"], ["--subscriptions", "many"],
                                  ["--strategies", "sPIS,foo"], ["--strategies", ","],
                                  ["--partitions", "-1"], ["--publications", "0"]])
def test_bad_flags_are_refused(argv, capsys):
    with pytest.raises(SystemExit) as stop:
        parser().parse_args(argv)
    assert stop.value.code == 2
    assert "python -m bench.studies.static_memory: error: argument --" in capsys.readouterr().err


def test_help_and_a_small_run(capsys):
    with pytest.raises(SystemExit) as stop:
        main(["--help"])
    assert stop.value.code == 0 and "--subscriptions" in capsys.readouterr().out
    assert main(["--subscriptions", "200", "--publications", "20", "--strategies", "RIhPS",
                 "--partitions", "3"]) == 0
    assert capsys.readouterr().out.startswith("RIhPS: 200 subscriptions")
