"""Which subscription changes are broadcast, handed to the tasks and destroyed: each change
once, kept while anything pending refers to it (``app.static.broadcasts``)."""

from __future__ import annotations

import numpy as np

from app.static.broadcasts import ChangeBroadcasts
from geops.model import Subscriptions
from geops.strategies import build_strategy
from geops.strategies.churn import LiveSubscriptions
from geops.workload import generate_workload


class _Broadcast:
    def __init__(self, value):
        self.value, self.destroyed = value, False

    def destroy(self, blocking: bool = False) -> None:
        assert not self.destroyed, "destroyed twice"
        self.destroyed = True


class _Context:
    """What ``ChangeBroadcasts`` asks of the SparkContext: ``broadcast``; keeps them all."""

    def __init__(self):
        self.made: list[_Broadcast] = []

    def broadcast(self, value):
        self.made.append(_Broadcast(value))
        return self.made[-1]


def test_changes_are_broadcast_once_and_destroyed_when_folded_or_in_a_new_router():
    wl = generate_workload(seed=3, subscriptions=300, publications=10)
    pool = generate_workload(seed=4, subscriptions=200, publications=10).subscriptions
    live = LiveSubscriptions(build_strategy("RIsPS", wl.subscriptions, 8), wl.subscriptions)
    sc = _Context()
    shipped = ChangeBroadcasts(sc)
    for k in range(6):
        rows = np.arange(k * 20, k * 20 + 20)
        result = live.apply(Subscriptions(pool.ids[rows] + 10_000, pool.geoms[rows],
                                          pool.relations[rows]), wl.subscriptions.ids[rows[:3]])
        shipped.publish(live.seq, result)
    assert len(sc.made) == 12  # per change one of partition deltas, one for the router
    seqs, changes = shipped.for_join(live.pending)
    assert seqs == {p: tuple(d.seq for d in ds) for p, ds in live.pending.items()}
    assert sorted(changes) == list(range(1, 7))
    for p, ss in seqs.items():  # each broadcast holds its change's delta of every partition
        assert [changes[s].value[p] for s in ss] == live.pending[p]
    router = shipped.for_router(live.router_pending)
    assert [b.value for b in router] == live.router_pending

    live.rebase(4)  # changes 1-4 folded into the payloads
    shipped.retire(live.pending, live.router_pending)
    partition_bc = {b.value[next(iter(b.value))].seq: b for b in sc.made
                    if isinstance(b.value, dict)}
    assert [s for s, b in sorted(partition_bc.items()) if b.destroyed] == [1, 2, 3, 4]
    assert sorted(shipped.for_join(live.pending)[1]) == [5, 6]
    assert not any(b.destroyed for b in router)  # the router's changes are still pending

    live.router_pending.clear()  # a new router includes them all
    shipped.retire(live.pending, live.router_pending)
    assert all(b.destroyed for b in router) and shipped.for_router(live.router_pending) == ()
    shipped.retire({}, ())  # nothing pending: none kept
    assert all(b.destroyed for b in sc.made)
