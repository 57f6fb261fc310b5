"""Where a batch's subscription changes cost time, outside Spark: the driver applying them to the
live set (``LiveSubscriptions.apply``: placing, the per-partition deltas), pickling the deltas
pending since the last rebase (every join task's closure carries them), and the executors
applying them to resident sPIS matchers of every partition (``apply_deltas``), per batch of
changes: 25 % new ids, 50 % updates, 25 % tombstones, as ``geops bench churn`` writes them.

Usage: ``python -m bench.studies.profile_churn [CHANGES_PER_BATCH [BATCHES [SUBSCRIPTIONS]]]``
(default 600 changes per batch, 10 batches, 10,000 subscriptions in 64 partitions: the churn
benchmark's 1,000 changes/s at its batch rate).
"""

from __future__ import annotations

import pickle
import sys
import time

import numpy as np

from geops.model import Subscriptions
from geops.strategies import load_partition
from geops.strategies.churn import LiveSubscriptions, apply_deltas
from geops.strategies.strategy import build_strategy
from geops.workload import generate_workload

PARTITIONS = 64


def profile(changes: int = 600, batches: int = 10, subscriptions: int = 10_000) -> list[str]:
    """One line per batch: milliseconds of each step and the size of the pending deltas."""
    subs = generate_workload(seed=5, subscriptions=subscriptions, publications=10).subscriptions
    pool = generate_workload(seed=6, subscriptions=max(2 * changes, 1_000),
                             publications=10).subscriptions
    live = LiveSubscriptions(build_strategy("sPIS", subs, PARTITIONS), subs)
    matchers = {p: load_partition("sPIS", live.payload(p)) for p in range(PARTITIONS)}
    for m in matchers.values():
        m.applied = 0
    rng = np.random.default_rng(0)
    next_id = int(subs.ids.max()) + 1
    lines = []
    for b in range(batches):
        new, old = changes // 4, changes - changes // 4
        ids = np.concatenate([np.arange(next_id, next_id + new),
                              rng.choice(subs.ids, old, replace=False)])
        next_id += new
        pick = rng.choice(len(pool), new + old // 3 * 2, replace=False)
        upserts = Subscriptions(ids[:len(pick)], pool.geoms[pick], pool.relations[pick])
        t0 = time.perf_counter()
        live.apply(upserts, ids[len(pick):])
        t1 = time.perf_counter()
        blob = pickle.dumps({p: tuple(d) for p, d in live.pending.items()}, protocol=5)
        t2 = time.perf_counter()
        for p, deltas in live.pending.items():
            matchers[p].applied = apply_deltas(matchers[p], deltas, matchers[p].applied)
        t3 = time.perf_counter()
        lines.append(f"batch {b}: driver apply {(t1 - t0) * 1e3:.0f} ms, pending "
                     f"{live.pending_bytes() / 1e6:.2f} MB pickled in {(t2 - t1) * 1e3:.0f} ms "
                     f"({len(blob) / 1e6:.2f} MB), executors apply (all {PARTITIONS} "
                     f"partitions, one process) {(t3 - t2) * 1e3:.0f} ms")
    return lines


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    try:
        args = [int(a) for a in argv]
    except ValueError:
        args = []
    if len(argv) > 3 or len(args) != len(argv) or any(a < 1 for a in args):
        print(next(line for line in __doc__.splitlines() if line.startswith("Usage")),
              file=sys.stderr)
        return 2
    for line in profile(*args):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
