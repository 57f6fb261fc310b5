"""One registry per enumeration: the names in config/choices.py, and every table that builds
them, the settings that validate them and the plan that runs them agree."""

import pytest

import config
from bench.paper import plan
from config import choices
from distributor.policies import POLICIES
from geops.partitioning import KINDS as PARTITIONER_KINDS
from geops.strategies import KINDS as STRATEGY_KINDS


def test_every_builder_table_has_exactly_the_registered_names() -> None:
    assert tuple(STRATEGY_KINDS) == choices.STRATEGIES.names
    assert tuple(PARTITIONER_KINDS) == choices.PARTITIONERS.names
    assert tuple(POLICIES) == choices.POLICIES.names
    assert tuple(plan.FULL_SIZES) == plan.PIPELINES == choices.STRATEGIES.names


@pytest.mark.parametrize(("path", "registry"), [
    ("app.strategy", choices.STRATEGIES), ("app.join", choices.JOINS),
    ("app.partitioner", choices.PARTITIONERS), ("distributor.policy", choices.POLICIES),
    ("distributor.metric", choices.METRICS), ("distributor.mode", choices.DISTRIBUTOR_MODES),
    ("distributor.first_period", choices.FIRST_PERIODS),
])
def test_settings_validate_against_the_registry(path, registry) -> None:
    assert config.BY_PATH[path].choices == registry.names
    assert config.defaults()[path] in registry


def test_a_table_must_match_its_names() -> None:
    with pytest.raises(ValueError, match=r"missing \['sPIS', 'RIhPS', 'RIsPS'\]"):
        choices.STRATEGIES.table({"sPS": 1})
    with pytest.raises(ValueError, match=r"unknown \['roundrobin'\]"):
        choices.POLICIES.table({"greedy": 1, "llfd": 2, "minmig": 3, "mixed": 4,
                                "replicate": 5, "roundrobin": 6})
    with pytest.raises(ValueError, match="unknown join 'STIL'; expected one of STAL, STRL"):
        choices.JOINS.check("STIL")
    assert list(choices.JOINS) == ["STAL", "STRL"] and choices.JOINS[-1] == "STRL"
