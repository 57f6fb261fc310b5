"""One workload cache for the harness and the simulation, with one seed rule."""

from __future__ import annotations

import pytest

from bench.paper import workloads
from bench.paper.plan import FULL_SIZES, full_plan
from bench.paper.workloads import WorkloadKey, Workloads


@pytest.fixture
def generated(monkeypatch: pytest.MonkeyPatch) -> list[dict]:
    """The generator's calls, recorded instead of generating anything."""
    calls: list[dict] = []

    def fake(**kwargs):
        calls.append(kwargs)
        return object()

    monkeypatch.setattr(workloads, "generate_workload", fake)
    return calls


def _key(repeat: int, skew: float = 0.5) -> WorkloadKey:
    return WorkloadKey(repeat, 100, 200, 2, 1, 16, "kdbtree", skew)


def test_repeat_r_is_generated_with_seed_1000_plus_r(generated: list[dict]) -> None:
    Workloads().get(_key(2, 0.9))
    (call,) = generated
    assert call["seed"] == 1002 and (call["subscriptions"], call["publications"]) == (100, 200)
    skew = call["skew"]
    assert (skew.workers, skew.hot_workers, skew.partitions, skew.partitioner, skew.target) == (
        2, 1, 16, "kdbtree", 0.9)


def test_a_run_and_its_key_share_one_workload(generated: list[dict]) -> None:
    """The simulation asks by key for the workload the harness generated for a run."""
    spec = next(s for s in full_plan(2, ("sPIS",), ("Static STAL",), (0.5,)) if s.repeat == 1)
    sizes = FULL_SIZES["sPIS"]
    key = WorkloadKey(1, sizes.subscriptions, sizes.publications, 2, 1, 64, "kdbtree", 0.5)
    cache = Workloads()
    assert cache.get(spec) is cache.get(key) and len(generated) == 1


def test_the_cache_keeps_the_most_recent(generated: list[dict]) -> None:
    cache = Workloads(keep=2)
    a = cache.get(_key(0))
    cache.get(_key(1))
    assert cache.get(_key(0)) is a           # still kept, and now the most recent
    cache.get(_key(2))                       # evicts repeat 1, the least recent
    assert cache.get(_key(0)) is a
    cache.get(_key(1))
    assert [c["seed"] for c in generated] == [1000, 1001, 1002, 1001]
    with pytest.raises(ValueError):
        Workloads(keep=0)
