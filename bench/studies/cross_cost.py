"""What fences that ask for cross cost the events query's bucket operator, without Spark.

The operator keeps, in every bucket's state, the shapes of the fences that ask for cross (its
objects may go anywhere), decodes them each batch and tests the batch's tracks against them.
This study runs the operator's own code (``app.events.query.bucket_events``, the state pickled
and read back each batch as the state store does) over one moving-object workload of
``geops generate`` twice, A/B interleaved per repeat (the order alternating): its fences as
generated with one in N asking for cross too (``--cross-every``), and the same fences without
the cross bit. It prints the operator's seconds for both, their ratio per repeat and its
median, and the pickled states' bytes over the 64 buckets (what the state store writes each
batch where every bucket has a record).

Usage: ``python -m bench.studies.cross_cost [--subscriptions 10000] [--objects 2000]
[--positions 40000] [--per-batch 4000] [--cross-every 10,50] [--repeats 5]``.
"""

from __future__ import annotations

import argparse
import pickle
import time
from dataclasses import dataclass

import numpy as np
import shapely

from app.events.positions import FenceTable, bucket_records, position_hits
from app.events.query import Held, bucket_events
from app.records import Positions
from geops.events import position_points
from geops.model import DetectKind
from geops.offline import matched_as
from geops.strategies import LocalRunner, build_strategy
from geops.workload import generate_workload
from geops.workload import objects as objects_module

CROSS = int(DetectKind.CROSS)
TTL_MS = 600_000


@dataclass
class Prepared:
    """A workload with each position's fences and place, computed once for both runs."""

    workload: object
    fenced: object
    found: object
    places: np.ndarray
    keys: np.ndarray


def prepare(subscriptions: int, objects: int, positions: int, cross_every: int) -> Prepared:
    """The workload of ``geops generate`` (one fence in ``cross_every`` asking for cross), its
    fences' shapes and the matches of its positions."""
    generated = objects_module.CROSS_EVERY
    objects_module.CROSS_EVERY = cross_every
    try:
        w = generate_workload(seed=1, objects=objects, subscriptions=subscriptions,
                              publications=positions, interval_ms=1)
    finally:
        objects_module.CROSS_EVERY = generated
    subs = w.subscriptions
    fenced, _ = matched_as(subs, w.detect, np.round(w.distance_m, 1), list(range(len(subs))))
    runner = LocalRunner(build_strategy("sPIS", fenced, 1))
    keys = np.arange(len(w.publications), dtype=np.int64)
    return Prepared(w, fenced, runner.match(keys, w.publications.geoms),
                    position_points(w.publications.geoms), keys)


def run(p: Prepared, with_cross: bool, per_batch: int) -> tuple[float, int, int]:
    """(operator seconds, events, pickled state bytes at the end) of the workload's positions
    in batches of ``per_batch``, its fences with or without the cross bit."""
    w, pubs = p.workload, p.workload.publications
    detect = w.detect if with_cross else (w.detect & ~np.uint8(CROSS)).astype(np.uint8)
    mask = dict(zip(w.subscriptions.ids.tolist(), detect.tolist(), strict=True))
    shapes = {i: g for i, g in zip(p.fenced.ids.tolist(), shapely.to_wkb(p.fenced.geoms),
                                   strict=True) if mask.get(i, 0) & CROSS}
    table = FenceTable(w.subscriptions.ids, detect, shapes)
    held: dict[int, bytes] = {}
    names = np.asarray(w.object_ids)
    seconds, events = 0.0, 0
    for b, lo in enumerate(range(0, len(pubs), per_batch)):
        rows = np.arange(lo, min(lo + per_batch, len(pubs)))
        hits = position_hits([Positions(p.keys[rows], pubs.ids[rows], names[rows],
                                        pubs.event_time[rows], p.places[rows])],
                             p.found.keys, p.found.offsets, p.found.sub_ids, table.ids)
        records = bucket_records("a", b, 0, hits, table, int(pubs.event_time[rows].max()))
        table.written()
        t0 = time.perf_counter()
        for _, rec in records:
            state = pickle.loads(held[rec["bucket"]]) if rec["bucket"] in held else Held()
            events += len(bucket_events(state, [rec], TTL_MS)["kind"])
            held[rec["bucket"]] = pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL)
        seconds += time.perf_counter() - t0
    return seconds, events, sum(len(v) for v in held.values())


def main(argv: list[str] | None = None) -> None:
    """Run the study and print its table."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--subscriptions", type=int, default=10_000)
    ap.add_argument("--objects", type=int, default=2_000)
    ap.add_argument("--positions", type=int, default=40_000)
    ap.add_argument("--per-batch", type=int, default=4_000)
    ap.add_argument("--cross-every", default="10,50")
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args(argv)
    for every in [int(v) for v in args.cross_every.split(",")]:
        p = prepare(args.subscriptions, args.objects, args.positions, every)
        fences = int((p.workload.detect > 0).sum())
        asking = int(((p.workload.detect & CROSS) > 0).sum())
        print(f"cross every {every}: {args.subscriptions:,} subscriptions, {fences:,} fences, "
              f"{asking:,} asking for cross; {args.positions:,} positions")
        ratios = []
        for r in range(args.repeats):
            order = (True, False) if r % 2 == 0 else (False, True)
            got = {mode: run(p, mode, args.per_batch) for mode in order}
            (tc, ec, sc), (tn, en, sn) = got[True], got[False]
            ratios.append(tc / tn)
            print(f"  repeat {r}: with cross {tc:.3f} s ({ec:,} events, state {sc:,} B); "
                  f"without {tn:.3f} s ({en:,} events, state {sn:,} B); ratio {tc / tn:.2f}")
        print(f"  median ratio with/without: {np.median(ratios):.2f}")


if __name__ == "__main__":
    main()
