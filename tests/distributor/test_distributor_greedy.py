"""The ``greedy`` policy: lowest maximum worker load, fewest moves, deterministic."""

import itertools
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from distributor.errors import InvalidPolicyOption, ShapeError, UnknownPolicy
from distributor.mldc import worker_loads
from distributor.policies import POLICIES, GreedyPolicy, make_policy
from schemas.assignment import moves_between

GREEDY = GreedyPolicy()
EXACT = GreedyPolicy(tolerance=0.0)


def peak(loads, assignment, workers):
    return max(worker_loads(loads, assignment, workers))


def brute_force(loads, assignment, workers):
    """{max load: fewest moves reaching it} over every possible assignment."""
    best = {}
    for candidate in itertools.product(range(workers), repeat=len(loads)):
        m = peak(loads, candidate, workers)
        moves = sum(a != b for a, b in zip(candidate, assignment, strict=True))
        best[m] = min(best.get(m, len(loads) + 1), moves)
    return best


# Figure 2, built so that the paper's two moves are the minimal-move optimum. Worker A (0)
# carries 60 = 21 + 20 + 19, B (1) one partition of 20, C (2) two partitions of 10.
FIG2_LOADS = [21, 20, 19, 20, 10, 10]
FIG2_START = [0, 0, 0, 1, 2, 2]


def test_figure_2_two_moves_hot_to_one_worker_and_ten_between_the_others():
    new = GREEDY.propose(FIG2_LOADS, FIG2_START, 3)
    assert moves_between(FIG2_START, new) == [(0, 0, 2), (4, 2, 1)]
    assert worker_loads(FIG2_LOADS, new, 3) == [39.0, 30.0, 31.0]


def test_figure_2_construction_really_is_the_minimal_move_optimum():
    best = brute_force(FIG2_LOADS, FIG2_START, 3)
    assert min(best) == 39 and best[39] == 2
    # one move reaches at best 40, so the second move is needed
    assert min(m for m, k in best.items() if k <= 1) == 40
    # and every two-move optimum moves the 21 to C and a 10 from C to B
    optima = {tuple(c) for c in itertools.product(range(3), repeat=6)
              if peak(FIG2_LOADS, c, 3) == 39 and len(moves_between(FIG2_START, c)) == 2}
    assert optima == {(2, 0, 0, 1, 1, 2), (2, 0, 0, 1, 2, 1)}


def test_figure_2_with_round_numbers_needs_only_one_move():
    # 20+20+20 / 10+10 / 10+10, as drawn: the best maximum, 40, is one move away (40/40/20),
    # so the drawn second move only evens out the two workers below the maximum.
    loads, start = [20, 20, 20, 10, 10, 10, 10], [0, 0, 0, 1, 1, 2, 2]
    new = GREEDY.propose(loads, start, 3)
    assert peak(loads, new, 3) == 40 == min(brute_force(loads, start, 3))
    assert len(moves_between(start, new)) == 1


def test_a_partition_that_fits_nowhere_moves_by_a_two_move_chain():
    # 20/13/8: a 10 must leave worker 0 but overloads either other worker unless that worker
    # passes one of its own partitions on; without the chain step the search takes three moves.
    loads, start = [10, 10, 5, 8, 8], [0, 0, 1, 1, 2]
    new = GREEDY.propose(loads, start, 3)
    assert moves_between(start, new) == [(0, 0, 1), (3, 1, 2)]
    best = brute_force(loads, start, 3)
    assert peak(loads, new, 3) == min(best) == 16 and best[16] == 2


def test_migration_cost_breaks_ties_between_equal_loads():
    loads, start = [10, 10, 10, 10], [0, 0, 0, 1]
    assert moves_between(start, GREEDY.propose(loads, start, 2)) == [(0, 0, 1)]
    cheap_second = GREEDY.propose(loads, start, 2, costs=[5, 1, 3, 0])
    assert moves_between(start, cheap_second) == [(1, 0, 1)]


def test_tolerance_trades_a_noise_sized_gain_for_fewer_moves():
    loads, start = [10, 10, 10, 1], [0, 0, 0, 0]   # best 20/11 takes two moves, 21/10 one
    exact = EXACT.propose(loads, start, 2)
    assert (peak(loads, exact, 2), len(moves_between(start, exact))) == (20, 2)
    loose = GreedyPolicy(tolerance=0.1).propose(loads, start, 2)
    assert (peak(loads, loose, 2), len(moves_between(start, loose))) == (21, 1)


@pytest.mark.parametrize(("loads", "start", "workers"), [
    ([0, 0, 0], [0, 0, 1], 2),           # no load at all
    ([5, 5], [0, 0], 1),                 # one worker
    ([9, 1, 1], [0, 1, 1], 2),           # the largest partition alone is the maximum
    ([3, 4, 4, 3], [0, 0, 1, 1], 2),     # perfectly balanced
    ([7, 0, 0, 7], [0, 0, 1, 1], 2),     # zero-load partitions are never worth moving
])
def test_nothing_to_gain_means_no_moves(loads, start, workers):
    assert GREEDY.propose(loads, start, workers) == start


def test_rejects_inconsistent_input():
    with pytest.raises(ShapeError, match="3 loads, 2 owners"):
        GREEDY.propose([1, 2, 3], [0, 1], 2)
    with pytest.raises(InvalidPolicyOption):
        GreedyPolicy(tolerance=-1)


def test_registry_by_name():
    assert "greedy" in POLICIES
    policy = make_policy("greedy", tolerance=0.0)
    assert isinstance(policy, GreedyPolicy) and policy.name == "greedy"
    assert policy.tolerance == 0.0
    with pytest.raises(UnknownPolicy, match="unknown policy 'roundrobin'; known: greedy, llfd, "
                       "minmig, mixed, replicate"):
        make_policy("roundrobin")


@st.composite
def instances(draw, max_workers=6, max_partitions=30):
    workers = draw(st.integers(2, max_workers))
    partitions = draw(st.integers(1, max_partitions))
    load = st.one_of(st.integers(0, 1000), st.floats(0, 1e9, allow_nan=False))
    loads = draw(st.lists(load, min_size=partitions, max_size=partitions))
    start = draw(st.lists(st.integers(0, workers - 1), min_size=partitions,
                          max_size=partitions))
    return loads, start, workers


def check_guarantees(loads, start, workers, new):
    assert len(new) == len(start) and all(0 <= w < workers for w in new)
    before, after = peak(loads, start, workers), peak(loads, new, workers)
    slack = 1e-9 * max(1.0, sum(loads))
    assert after <= before + slack                      # never increases the maximum
    if new != start:
        assert after < before                           # moves only for a real gain
    per_worker = worker_loads(loads, new, workers)
    for p, old, _ in moves_between(start, new):          # no unneeded move
        assert per_worker[old] + loads[p] > after - slack, f"moving {p} back costs nothing"


@settings(max_examples=300, deadline=None)
@given(instances())
def test_never_worse_never_an_unneeded_move_deterministic(instance):
    loads, start, workers = instance
    new = GREEDY.propose(loads, start, workers)
    check_guarantees(loads, start, workers, new)
    assert GREEDY.propose(loads, start, workers) == new


@settings(max_examples=100, deadline=None)
@given(st.integers(2, 5), st.lists(st.integers(0, 100), min_size=1, max_size=6),
       st.randoms(use_true_random=False))
def test_balanced_input_gives_no_moves(workers, per_worker, rnd):
    # every worker owns the same multiset of partition loads, in shuffled partition order
    owners = [w for w in range(workers) for _ in per_worker]
    loads = per_worker * workers
    order = list(range(len(loads)))
    rnd.shuffle(order)
    loads = [loads[i] for i in order]
    start = [owners[i] for i in order]
    assert GREEDY.propose(loads, start, workers) == start


def test_close_to_brute_force_optimum_on_small_instances():
    rng = random.Random(7)
    cases = optimal_max = fewest_moves = 0
    for _ in range(200):
        workers = rng.randint(2, 3)
        partitions = rng.randint(workers, 7)
        loads = [rng.choice([0, 1, 2, 3, 5, 8, 10, 13, 20, 21, 34]) for _ in range(partitions)]
        start = [rng.randrange(workers) for _ in range(partitions)]
        if not sum(loads):
            continue
        new = EXACT.propose(loads, start, workers)
        check_guarantees(loads, start, workers, new)
        best = brute_force(loads, start, workers)
        got = peak(loads, new, workers)
        assert got <= (4 / 3 - 1 / (3 * workers)) * min(best) + 1e-9   # LPT's bound
        reach = min(k for m, k in best.items() if m <= got)
        cases += 1
        optimal_max += got == min(best)
        fewest_moves += len(moves_between(start, new)) == reach
    assert optimal_max >= 0.98 * cases and fewest_moves >= 0.95 * cases


def test_large_skewed_instance_is_balanced_with_few_moves():
    rng = random.Random(3)
    partitions, workers = 2000, 16
    start = [p * workers // partitions for p in range(partitions)]
    loads = [rng.expovariate(1) * (8 if start[p] < 3 else 1) * 1e6 for p in range(partitions)]
    new = GREEDY.propose(loads, start, workers)
    check_guarantees(loads, start, workers, new)
    mean = sum(loads) / workers
    assert peak(loads, new, workers) <= 1.02 * mean
    # the three hot workers must shed about 2/3 of their partitions' load; far fewer than P
    assert len(moves_between(start, new)) < partitions // 8
