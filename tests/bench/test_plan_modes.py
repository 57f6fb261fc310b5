"""The run modes' names, as the paper spells them and the results files hold them."""

import pytest

from bench.paper.plan import ADAPTIVE, MODES, REPLICATE, RUN_MODES, mode_key, mode_name


def test_the_paper_six_then_ours():
    assert list(MODES) == ["Static STRL", "Static STAL", "Dynamic LB STAL", "Dynamic DB STAL",
                           "Dynamic LB STRL", "Dynamic DB STRL"]
    assert (ADAPTIVE, REPLICATE) == ("Adaptive STAL", "Dynamic LB STAL replicate")
    assert all(mode_name(*RUN_MODES[m]) == m for m in MODES)
    assert mode_key(REPLICATE) == "DynamicLBSTALreplicate"


@pytest.mark.parametrize("join, balancing", [("STAX", "static"), ("STAL", "XB")])
def test_an_unknown_join_or_metric_is_refused(join, balancing):
    with pytest.raises(ValueError, match="unknown"):
        mode_name(join, balancing)
