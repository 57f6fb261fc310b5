"""The kernel benchmark: its reference and plain matchers are exact; the command prints a table."""

from __future__ import annotations

import numpy as np
import pytest

from bench.kernel.run import PLAIN, REFERENCE, ReferenceMatcher, plain_match, run_kernel_bench
from cli.main import main
from geops.oracle import oracle_match
from geops.strategies import STRATEGIES


@pytest.mark.parametrize("seed", [0, 1])
def test_reference_and_plain_matchers_equal_the_oracle(cases, seed):
    subs = cases.subscriptions(seed + 40)  # all ten relations, DISJOINT included
    keys, geoms = cases.publications(seed + 40, subs, None)
    want = oracle_match(subs, keys, geoms)
    for got in (ReferenceMatcher(subs).match(keys, geoms), plain_match(subs, keys, geoms)):
        for a, b in zip((got.keys, got.offsets, got.sub_ids), want, strict=True):
            assert np.array_equal(a, b)


def test_run_reports_every_matcher_with_the_same_matches():
    report = run_kernel_bench(subscriptions=300, publications=500, partitions=4)
    names = [r.name for r in report.rows]
    assert names == [REFERENCE, *STRATEGIES, PLAIN]
    assert len({r.pairs for r in report.rows}) == 1 and report.rows[0].pairs > 0
    assert report.rows[0].ratio == 1.0
    assert all(r.ratio > 0 and r.match_seconds > 0 for r in report.rows)


def test_command_prints_the_table(capsys):
    code = main(["bench", "kernel", "--subscriptions", "200", "--publications", "300",
                 "--partitions", "3", "--strategies", "sPIS,RIsPS", "--no-plain"])
    assert code == 0
    out = capsys.readouterr().out
    rows = [line.split()[0] for line in out.splitlines()[2:-1]]
    assert rows == [REFERENCE, "sPIS", "RIsPS"]
    assert "ratio" in out


def test_command_usage_errors(capsys):
    assert main(["bench", "kernel", "--strategies", "sPIS,RIS"]) == 2
    assert "unknown RIS" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_info:
        main(["bench"])
    assert exit_info.value.code == 2
