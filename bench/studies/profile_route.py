"""Where one stream-side task's time goes (Avro decode, WKB, validity checks, routing, the whole
``decode_route`` and pickling its output for the shuffle), outside Spark: the best of three
runs of each step on one read task's worth of sPIS publications (18,000 at skew 0.9 against
10,000 subscriptions in 64 KDB-tree partitions).

Usage: ``python -m bench.studies.profile_route [PUBLICATIONS [SUBSCRIPTIONS]]``.
"""

from __future__ import annotations

import pickle
import sys
import timeit
import types
from collections.abc import Callable
from typing import Any

import numpy as np
import shapely

from app.batch.tasks import Record, RouteContext, decode_route
from geops.model import geometry_problems
from geops.strategies.routers import SpatialRouter
from geops.workload import SkewSpec, generate_workload
from schemas import codec
from schemas.records import publication_records


def profile(publications: int = 18_000, subscriptions: int = 10_000) -> list[str]:
    """One line per step: its best time and the time per record."""
    wl = generate_workload(seed=1, subscriptions=subscriptions, publications=publications,
                           skew=SkewSpec(workers=2, hot_workers=1, partitions=64,
                                         partitioner="kdbtree", target=0.9))
    c = codec()
    values = [c.encode("Publication", r) for r in publication_records(wl.publications)]
    out = [f"records {len(values)} point share "
           f"{np.mean(shapely.get_type_id(wl.publications.geoms) == 0)}"]

    def step(label: str, f: Callable[[], Any]) -> None:
        best = min(timeit.repeat(f, number=1, repeat=3))
        out.append(f"{label:28s} {best * 1e3:8.1f} ms  {best / len(values) * 1e6:6.2f} us/record")

    step("avro decode", lambda: [c.decode_as("Publication", v) for v in values])
    wkbs = np.array([c.decode_as("Publication", v)["geometry"] for v in values], dtype=object)
    step("from_wkb", lambda: shapely.from_wkb(wkbs, on_invalid="ignore"))
    geoms = shapely.from_wkb(wkbs)
    step("geometry_problems", lambda: geometry_problems(geoms))
    step("  is_valid alone", lambda: shapely.is_valid(geoms))
    router = SpatialRouter(wl.partitioner)
    step("route (place)", lambda: router.route(geoms))
    ctx = RouteContext(router=types.SimpleNamespace(value=router),
                       assignment=tuple(i % 2 for i in range(64)), workers=2,
                       with_presence=False, dead_letter_topic="dl")
    rows = [Record("t", 0, i, None, v) for i, v in enumerate(values)]
    step("decode_route total", lambda: list(decode_route(ctx, rows)))
    routed = list(decode_route(ctx, rows))
    step("pickle shuffle records", lambda: pickle.dumps(routed, protocol=5))
    out.append(f"pickled MB {len(pickle.dumps(routed, protocol=5)) / 1e6}")
    return out


def main(argv: list[str] | None = None) -> None:
    args = [int(a) for a in (sys.argv[1:] if argv is None else argv)]
    print("\n".join(profile(*args)))


if __name__ == "__main__":
    main()
