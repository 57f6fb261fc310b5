"""--scale: streams and batches for a faster machine, never mixed with runs of other sizes."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.harness.errors import PlanConflict
from bench.paper import evaluation
from bench.paper.plan import FULL_SIZES, full_plan, scaled
from bench.paper.runner import DistributorSettings
from cli.main import main


def test_scale_keeps_the_number_of_batches_and_the_static_side() -> None:
    sizes = scaled(FULL_SIZES, 1.5)
    for name, s in sizes.items():
        before = FULL_SIZES[name]
        assert s.publications == round(before.publications * 1.5)
        assert s.max_records_per_trigger == round(before.max_records_per_trigger * 1.5)
        assert s.subscriptions == before.subscriptions
    base = FULL_SIZES["sPS"].publications
    spec = full_plan(1, ("sPS",), ("Static STAL",), (0.9,), sizes)[0]
    assert spec.sizes.publications == round(base * 1.5)
    with pytest.raises(ValueError, match="scale"):
        scaled(FULL_SIZES, 0)


def test_resume_refuses_runs_recorded_with_other_sizes(tmp_path: Path) -> None:
    base = FULL_SIZES["sPS"].publications
    plan = full_plan(1, ("sPS",), ("Static STAL",), (0.9,), scaled(FULL_SIZES, 2))
    (tmp_path / "runs.csv").write_text(f"run_id,publications\n{plan[0].run_id},{base}\n")
    with pytest.raises(PlanConflict,
                       match=rf"{base:,} publications.*{2 * base:,}"):
        evaluation.run_plan(plan, tmp_path, tmp_path / "work", DistributorSettings())
    assert not (tmp_path / "meta.json").exists()  # refused before anything was written


@pytest.mark.parametrize("argv, message", [
    (["--scale", "0"], "--scale must be in (0, 100]"),
    (["--quick", "--scale", "2"], "--scale applies to --full"),
])
def test_bad_scale_is_a_usage_error(argv: list[str], message: str, tmp_path: Path,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["bench", "paper", *argv, "--out", str(tmp_path / "out")])
    assert code == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "out").exists()
