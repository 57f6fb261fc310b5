"""The source's per-trigger record limit: exact budgets, proportional shares, no starvation."""

from __future__ import annotations

import random

from app.source import plan_limit


def test_exact_budget_in_proportion_to_backlog():
    ends = {"0": 1000, "1": 1000, "2": 1000}
    out = plan_limit({"0": 0, "1": 0, "2": 0}, ends, 200)
    assert sum(out.values()) == 200 and all(66 <= v <= 67 for v in out.values())
    out = plan_limit({"0": 0, "1": 500, "2": 990}, ends, 300)
    taken = {p: out[p] - s for p, s in {"0": 0, "1": 500, "2": 990}.items()}
    assert sum(taken.values()) == 300 and taken["0"] > taken["1"] > taken["2"] >= 1


def test_whole_backlog_when_it_fits_and_new_partitions_start_at_zero():
    assert plan_limit({"0": 5}, {"0": 9, "1": 3}, 100) == {"0": 9, "1": 3}


def test_random_plans_never_overshoot_and_use_the_whole_budget():
    rng = random.Random(1)
    for _ in range(2000):
        parts = [str(p) for p in range(rng.randint(1, 6))]
        start = {p: rng.randint(0, 50) for p in parts}
        ends = {p: start[p] + rng.randint(0, 200) for p in parts}
        budget = rng.randint(1, 400)
        out = plan_limit(start, ends, budget)
        assert all(start[p] <= out[p] <= ends[p] for p in parts)
        backlog = sum(ends[p] - start[p] for p in parts)
        assert sum(out[p] - start[p] for p in parts) == min(budget, backlog)
