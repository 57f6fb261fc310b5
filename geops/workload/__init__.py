"""The GeoPS workload, synthetic or from real data, with a controllable skew.

``generate_workload`` returns subscriptions, publications and the layer each was drawn from, in
memory (benchmarks use it directly); ``write_workload`` writes them as `geops generate` does.
"""

from geops.workload.generate import SkewReport, Workload, generate_workload
from geops.workload.output import write_workload
from geops.workload.realdata import BadRow, read_points_csv, read_polygons_geojson, with_real_data
from geops.workload.skew import SkewSpec, measured_skew
from geops.workload.world import LAYERS, World, synthetic_world

__all__ = [
    "LAYERS",
    "BadRow",
    "SkewReport",
    "SkewSpec",
    "Workload",
    "World",
    "generate_workload",
    "measured_skew",
    "read_points_csv",
    "read_polygons_geojson",
    "synthetic_world",
    "with_real_data",
    "write_workload",
]
