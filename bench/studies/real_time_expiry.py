"""What finding the objects the TTL expires costs a real-time task's events, per poll.

A real-time task (``app.realtime.events.TaskEvents``) holds every object seen within the TTL:
100,000 at 1,000 positions/s in ``geops bench events``. Two tasks are fed the same one-record
polls, alternately (the first of the pair alternating too), every object held (a TTL no
position outlives, as ten minutes at that rate): **A** looks at every held object each poll
(``bucket_events`` without ``due``), **B** takes them from its heap by last event time (what the
task does). Each poll's matches are found once, outside the timing, and given to both.

Usage: ``python -m bench.studies.real_time_expiry [--objects 100000] [--polls 4000]``.
Prints each one's p50, p99 and mean per poll and B/A.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from app.realtime.events import TaskEvents
from app.realtime.task import hits_of
from geops.offline import matched_as
from geops.strategies import LocalRunner, build_strategy
from geops.workload import generate_workload

TTL_MS = 10**12  # no object expires: every one stays held


def main() -> None:
    """Run the A/B and print it."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--objects", type=int, default=100_000)
    ap.add_argument("--polls", type=int, default=4_000)
    ap.add_argument("--subscriptions", type=int, default=50_000)
    args = ap.parse_args()
    n = args.objects
    w = generate_workload(seed=3, objects=n, subscriptions=args.subscriptions,
                          publications=n + args.polls, interval_ms=1_000)
    subs, detect = w.subscriptions, w.detect
    fenced, _ = matched_as(subs, detect, np.round(w.distance_m, 1), list(range(len(subs))))
    runner = LocalRunner(build_strategy("sPIS", fenced, 1))
    fences = dict(zip(subs.ids.tolist(), detect.tolist(), strict=True))
    tasks = {"A every object": TaskEvents(fences, TTL_MS, -1),
             "B heap": TaskEvents(fences, TTL_MS, -1)}
    tasks["A every object"]._due = None
    pubs, objects = w.publications, np.asarray(w.object_ids, object)
    part = np.zeros(len(pubs), np.int64)

    def feed(task: TaskEvents, rows: np.ndarray, hits: tuple) -> float:
        began = time.perf_counter()
        task.events(objects[rows], pubs.ids[rows], pubs.event_time[rows], *hits, 0, part[rows])
        return time.perf_counter() - began

    for lo in range(0, n, 5_000):  # every object's first position: all held
        rows = np.arange(lo, min(lo + 5_000, n))
        hits = hits_of(runner.match(rows, pubs.geoms[rows]), rows)
        for task in tasks.values():
            feed(task, rows, hits)
    took: dict[str, list[float]] = {name: [] for name in tasks}
    for k in range(n, n + args.polls):
        rows = np.arange(k, k + 1)
        hits = hits_of(runner.match(rows, pubs.geoms[rows]), rows)
        for name in (list(tasks) if k % 2 else list(tasks)[::-1]):
            took[name].append(feed(tasks[name], rows, hits))
    print(f"{len(tasks['B heap'].held.objects):,} objects held; {args.polls:,} one-record polls "
          f"each, alternating")
    ms = {name: np.array(t) * 1e3 for name, t in took.items()}
    for name, x in ms.items():
        print(f"{name}: p50 {np.median(x):.3f} ms, p99 {np.percentile(x, 99):.3f} ms, "
              f"mean {x.mean():.3f} ms")
    a, b = ms["A every object"], ms["B heap"]
    print(f"B/A: p50 {np.median(b) / np.median(a):.3f}, mean {b.mean() / a.mean():.3f}")


if __name__ == "__main__":
    main()
