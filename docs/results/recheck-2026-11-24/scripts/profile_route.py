"""Where one stream-side task's time goes (decode, validity, WKB, routing), outside Spark.
Run from the repository root: .venv/bin/python docs/results/recheck-2026-11-24/scripts/profile_route.py
"""
import time, types
import numpy as np, shapely
from geops.workload import generate_workload, SkewSpec
from geops.partitioning import build_partitioner
from geops.model import geometry_problems
from cli.produce import publication_records
from schemas import codec
from app.tasks import decode_route, RouteContext, Record
from geops.strategies.routers import SpatialRouter

wl = generate_workload(seed=1, subscriptions=10_000, publications=18_000,
                       skew=SkewSpec(workers=2, hot_workers=1, partitions=64, partitioner="kdbtree", target=0.9))
part = wl.partitioner
c = codec()
values = [c.encode("Publication", r) for r in publication_records(wl.publications)]
print("records", len(values), "point share", np.mean(shapely.get_type_id(wl.publications.geoms) == 0))
def t(label, f, n=3):
    best = min((lambda s: (f(), time.perf_counter() - s)[1])(time.perf_counter()) for _ in range(n))
    print(f"{label:28s} {best*1e3:8.1f} ms  {best/len(values)*1e6:6.2f} us/record")
    return best
t("avro decode", lambda: [c.decode_as("Publication", v) for v in values])
recs = [c.decode_as("Publication", v) for v in values]
wkbs = np.array([r["geometry"] for r in recs], dtype=object)
t("from_wkb", lambda: shapely.from_wkb(wkbs, on_invalid="ignore"))
geoms = shapely.from_wkb(wkbs)
t("geometry_problems", lambda: geometry_problems(geoms))
t("  is_valid alone", lambda: shapely.is_valid(geoms))
router = SpatialRouter(part)
t("route (place)", lambda: router.route(geoms))
ctx = RouteContext(router=types.SimpleNamespace(value=router), assignment=tuple(i % 2 for i in range(64)), workers=2,
                   with_presence=False, dead_letter_topic="dl")
rows = [Record("t", 0, i, None, v) for i, v in enumerate(values)]
t("decode_route total", lambda: list(decode_route(ctx, rows)))
import pickle
out = list(decode_route(ctx, rows))
t("pickle shuffle records", lambda: pickle.dumps(out, protocol=5))
print("pickled MB", len(pickle.dumps(out, protocol=5)) / 1e6)
