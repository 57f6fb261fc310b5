"""`geops generate`: the GeoPS workload (synthetic or real data, optionally skewed) to files.

Writes ``DIR/subscriptions.geojson``, ``DIR/publications.geojson``, Avro container files
``DIR/subscriptions.avro`` and ``DIR/publications.avro`` beside them, and ``DIR/workload.json``
(parameters, seed, counts per layer and relation, requested and measured skew). The partitioning
settings default to the app's (``app.partitions``, ``app.partitioner``, ``app.workers`` of the
configuration), so the skew asked for is the skew the app sees. Exit code 3 when input rows or
features were skipped.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import config
from cli.common import non_negative_int
from cli.errors import CommandError
from cli.progress import elapsed_log
from cli.workload_args import add_mix_arguments, relation_from
from config.exitcodes import EXIT_OK, EXIT_REJECTED, EXIT_USAGE
from geops.errors import DataError, GeoJSONError, ParameterError
from geops.partitioning import PARTITIONERS
from geops.workload import (
    LAYERS,
    SkewSpec,
    generate_workload,
    read_points_csv,
    read_polygons_geojson,
    synthetic_world,
    with_real_data,
    write_workload,
)
from geops.workload.generate import (
    DEFAULT_INTERVAL_MS,
    DEFAULT_POINT_SHARE,
    DEFAULT_PUBLICATIONS,
    DEFAULT_START_TIME_MS,
    DEFAULT_SUBSCRIPTIONS,
)
from geops.workload.output import FILES
from geops.workload.world import DEFAULT_SIZES, World

# Flag of each API parameter, for error messages.
FLAGS = {"area": "--areas", "district": "--districts", "sector": "--sectors",
         "start_time_ms": "--start-time"}
SHOWN_BAD_ROWS = 10
# Event times are Avro timestamp-millis: a signed 64-bit count of milliseconds.
TIME_RANGE = (-(2**63), 2**63 - 1)
# Cells of a synthetic layer: 90 times the default sectors, still built in minutes; far more
# would exhaust the memory of the Voronoi construction.
MAX_WORLD_CELLS = 1_000_000


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "generate", help="generate a GeoPS-like workload (GeoJSON + Avro files)",
        description="Generate subscriptions (20% areas, 30% districts, 50% sectors) and "
                    "publications (points and, 1:2:3, area/district/sector polygons covering "
                    "accident locations) on a synthetic country or on real data, optionally "
                    "skewed so a fraction of the stream items falls in the partitions of the "
                    "first --hot-workers of --workers workers.",
        epilog="Writes DIR/subscriptions.geojson, DIR/publications.geojson, the Avro container "
               "files DIR/subscriptions.avro and DIR/publications.avro, and DIR/workload.json. "
               "Exit code 3 when input rows or features were skipped.")
    p.add_argument("--out", required=True, metavar="DIR", help="output directory (created)")
    p.add_argument("--seed", type=non_negative_int, default=0,
                   help="random seed, an integer >= 0 (default 0)")
    p.add_argument("--subscriptions", type=int, default=DEFAULT_SUBSCRIPTIONS, metavar="N",
                   help=f"subscriptions (default {DEFAULT_SUBSCRIPTIONS:,})")
    p.add_argument("--publications", type=int, default=DEFAULT_PUBLICATIONS, metavar="M",
                   help=f"publications (default {DEFAULT_PUBLICATIONS:,}, as in the paper)")
    add_mix_arguments(p)
    p.add_argument("--objects", type=non_negative_int, default=0, metavar="N",
                   help="moving objects: every publication is a point position of one of N "
                        "objects (properties.object_id) moving along a track from a location "
                        "of the stream, and a fifth of the subscriptions are fences that "
                        "detect (properties.detect), some with properties.distance_m "
                        "(default 0: none)")
    p.add_argument("--roam-share", type=float, default=0.0, metavar="F",
                   help="with --objects: this fraction of the subscriptions (drawn among the "
                        "plain ones) are also roaming fences (properties.roam: 100 m to 2 km, "
                        "and the objects' ids matching object-*, object-1* or object-2?) "
                        "(default 0: none)")
    p.add_argument("--first-id", type=non_negative_int, default=0, metavar="N",
                   help="subscription and publication ids count from N (default 0), so that a "
                        "second workload can join a first one on the same topics")
    p.add_argument("--start-time", default=str(DEFAULT_START_TIME_MS), metavar="T",
                   help="event time of publication 0: epoch ms or ISO 8601 "
                        "(default 2024-01-01T00:00:00Z)")
    p.add_argument("--interval-ms", type=int, default=DEFAULT_INTERVAL_MS, metavar="MS",
                   help=f"event time step between publications (default {DEFAULT_INTERVAL_MS})")
    p.add_argument("--world-size", default=",".join(str(DEFAULT_SIZES[k]) for k in LAYERS),
                   metavar="A,D,S", help="cells of the synthetic areas, districts, sectors "
                                         "(default %(default)s)")
    skew = p.add_argument_group("skew (the paper's skew coefficient)")
    skew.add_argument("--skew", type=float, metavar="S",
                      help="fraction of stream items in the hot workers' partitions (0..1); "
                           "without it the stream follows the population, and its hot share "
                           "is only measured when --workers is given")
    skew.add_argument("--hot-workers", type=int, default=1, metavar="H",
                      help="hot workers: 0..H-1 (default 1)")
    skew.add_argument("--hot-partitions", type=int, metavar="K",
                      help="concentrate the --skew share in K partitions (the K lowest ids of "
                           "the hot workers' partitions, spatially adjacent) instead of all the "
                           "hot workers' partitions: a hot spot no move can take apart")
    skew.add_argument("--moving-hotspot", action="store_true",
                      help="the hot region moves half-way through the stream, from workers "
                           "0..H-1's partitions to the same partitions of workers W/2..W/2+H-1 "
                           "(needs --skew and W >= 2H)")
    skew.add_argument("--workers", type=int, metavar="W",
                      help="join workers W (default: app.workers of the configuration)")
    skew.add_argument("--partitions", type=int, metavar="P",
                      help="static partitions (default: app.partitions of the configuration)")
    skew.add_argument("--partitioner", choices=PARTITIONERS,
                      help="spatial partitioner (default: app.partitioner of the configuration)")
    skew.add_argument("--config", metavar="FILE",
                      help="TOML file overriding config/default.toml (env: GEOPS_CONFIG)")
    real = p.add_argument_group("real data (each replaces its synthetic counterpart)")
    real.add_argument("--points-csv", metavar="FILE",
                      help="accident locations: CSV with a header naming lon,lat (or "
                           "longitude,latitude or x,y) columns")
    for layer, flag in (("area", "--areas"), ("district", "--districts"),
                        ("sector", "--sectors")):
        real.add_argument(flag, dest=f"{layer}_file", metavar="FILE",
                          help=f"postcode {layer} polygons (GeoJSON FeatureCollection)")
    p.set_defaults(func=_generate)


def _flag(param: str) -> str:
    return FLAGS.get(param, "--" + param.replace("_", "-"))


def parse_time(text: str) -> int:
    """Epoch milliseconds from an integer or an ISO 8601 time (UTC unless it has an offset)."""
    text = text.strip()
    if text.lstrip("-").isdigit():
        return int(text)
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"--start-time expects epoch milliseconds or ISO 8601, got {text!r}")\
            from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return int(when.timestamp() * 1000)


def _check_times(start: int, interval_ms: int, publications: int) -> None:
    """Every event time start + i * interval_ms must be a timestamp-millis (ValueError)."""
    low, high = TIME_RANGE
    if not low <= start <= high:
        raise ValueError(f"--start-time {start} is outside the range of a timestamp-millis "
                         f"(a 64-bit count of milliseconds)")
    last = start + max(interval_ms, 0) * max(publications - 1, 0)
    if last > high or interval_ms > high:
        raise ValueError(f"--start-time {start} plus --interval-ms {interval_ms} for "
                         f"{publications:,} publications ends beyond the range of a "
                         f"timestamp-millis (a 64-bit count of milliseconds)")


def _world_size(text: str) -> tuple[int, int, int]:
    try:
        sizes = tuple(int(v) for v in text.split(","))
    except ValueError:
        sizes = ()
    if len(sizes) != 3 or not 1 <= sizes[0] <= sizes[1] <= sizes[2] <= MAX_WORLD_CELLS:
        raise ValueError(f"--world-size expects AREAS,DISTRICTS,SECTORS with "
                         f"1 <= AREAS <= DISTRICTS <= SECTORS <= {MAX_WORLD_CELLS:,}, "
                         f"got {text!r}")
    return sizes  # type: ignore[return-value]


def _logger() -> Any:
    if not sys.stderr.isatty():
        return None
    return elapsed_log("geops generate")


def _report_bad(path: str, what: str, problems: list[Any]) -> None:
    if not problems:
        return
    reasons = Counter(p.reason.split(":")[0] for p in problems)
    summary = "; ".join(f"{n} × {r}" for r, n in reasons.most_common())
    print(f"{path}: skipped {len(problems)} {what} ({summary})", file=sys.stderr)
    for p in problems[:SHOWN_BAD_ROWS]:
        print(f"{path}:   {p}", file=sys.stderr)
    if len(problems) > SHOWN_BAD_ROWS:
        print(f"{path}:   ... and {len(problems) - SHOWN_BAD_ROWS} more", file=sys.stderr)


def _skew_spec(args: argparse.Namespace) -> SkewSpec | None:
    flags = {path: value for path, value in (("app.workers", args.workers),
                                             ("app.partitions", args.partitions),
                                             ("app.partitioner", args.partitioner))
             if value is not None}
    if args.skew is None and (args.hot_partitions is not None or args.moving_hotspot):
        flag = "--hot-partitions" if args.hot_partitions is not None else "--moving-hotspot"
        raise CommandError(f"{flag} needs --skew: the share of the stream items that falls "
                           f"into the hot partitions", EXIT_USAGE)
    if args.skew is None and args.workers is None:
        if args.config is not None:
            config.load(args.config)   # a file the user named must exist and be valid
        return None
    cfg = config.load(args.config, flags=flags)
    workers = cfg.view.app.workers
    if workers == 0:
        raise CommandError("--skew needs --workers: the configured app.workers is 0 (all "
                           "executor cores), which the generator cannot know", EXIT_USAGE)
    return SkewSpec(workers=workers, hot_workers=args.hot_workers,
                    partitions=cfg.view.app.partitions, partitioner=cfg.view.app.partitioner,
                    target=args.skew, hot_partitions=args.hot_partitions,
                    moving=args.moving_hotspot)


def _generate(args: argparse.Namespace) -> int:
    try:
        start = parse_time(args.start_time)
        _check_times(start, args.interval_ms, args.publications)
        sizes = _world_size(args.world_size)
    except ValueError as exc:
        raise CommandError(str(exc), EXIT_USAGE) from None
    relation = relation_from(args)
    if args.objects and args.point_share != DEFAULT_POINT_SHARE:
        raise CommandError("--point-share does not apply with --objects: every position of a "
                           "moving object is a point", EXIT_USAGE)
    spec = _skew_spec(args)
    try:  # now, not after minutes of generating
        Path(args.out).mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CommandError(f"--out {args.out}: cannot create the directory: "
                           f"{exc.strerror or exc}", EXIT_USAGE) from None
    log = _logger()

    world, rejected = _world(args, sizes, log)

    try:
        workload = generate_workload(
            seed=args.seed, subscriptions=args.subscriptions, publications=args.publications,
            point_share=args.point_share, relation=relation, skew=spec, world=world,
            start_time_ms=start, interval_ms=args.interval_ms, objects=args.objects,
            first_id=args.first_id, roam_share=args.roam_share, log=log)
    except ParameterError as exc:
        raise CommandError(exc.render(_flag), EXIT_USAGE) from None
    except DataError as exc:
        raise CommandError(str(exc)) from None

    record = {
        "generator": "geops generate",
        "seed": args.seed,
        "parameters": {
            "subscriptions": args.subscriptions, "publications": args.publications,
            "point_share": args.point_share,
            "relation": None if relation is None else relation.name,
            "start_time_ms": start, "interval_ms": args.interval_ms,
            "world_size": dict(zip(LAYERS, sizes, strict=True)),
            "objects": args.objects, "first_id": args.first_id, "roam_share": args.roam_share,
        },
    }
    try:
        doc = write_workload(args.out, workload, record, log=log)
    except OSError as exc:
        where = f" ({exc.filename})" if exc.filename else ""
        raise CommandError(f"--out {args.out}: cannot write: {exc.strerror or exc}{where}") \
            from None
    _print_summary(doc, args.out)
    return EXIT_REJECTED if rejected else EXIT_OK


def _world(args: argparse.Namespace, sizes: tuple[int, ...],
           log: Any) -> tuple[World, bool]:
    """The synthetic world of ``--seed`` with the points and layers read from the files the
    flags name; True when a file had rows or features that were rejected (reported, and the
    exit code says so)."""
    world = synthetic_world(args.seed, *sizes, log=log)
    rejected = False
    points = None
    layers = {}
    sources: dict[str, str] = {}
    try:
        if args.points_csv:
            points, bad = read_points_csv(args.points_csv)
            _report_bad(args.points_csv, "rows", bad)
            rejected |= bool(bad)
            sources["points"] = args.points_csv
        for layer in LAYERS:
            path = getattr(args, f"{layer}_file")
            if path:
                layers[layer], bad_features = read_polygons_geojson(path)
                _report_bad(path, "features", bad_features)
                rejected |= bool(bad_features)
                sources[layer] = path
        world = with_real_data(world, points, layers, sources)
    except (DataError, GeoJSONError) as exc:
        raise CommandError(str(exc)) from None
    except OSError as exc:  # a directory, no permission, ...
        raise CommandError(f"{exc.filename}: cannot read: {exc.strerror or exc}") from None
    return world, rejected


def _print_summary(doc: dict[str, Any], out: str) -> None:
    """Print what was written: the files, the counts per layer, the moving objects and the
    measured skew."""
    subs, pubs = doc["subscriptions"], doc["publications"]
    print(f"wrote {', '.join(FILES)} to {out}")
    print(f"subscriptions: {subs['count']:,} "
          f"({', '.join(f'{k} {v:,}' for k, v in subs['layers'].items())})")
    print(f"publications: {pubs['count']:,} "
          f"({', '.join(f'{k} {v:,}' for k, v in pubs['layers'].items())})")
    if doc["objects"] is not None:
        o = doc["objects"]
        print(f"objects: {o['count']:,} moving; fences: {o['fences']:,} detecting, "
              f"{o['distance_fences']:,} with a distance ({o['point_fences']:,} around points), "
              f"{o['roaming_fences']:,} roaming")
    if doc["skew"] is not None and doc["skew"]["measured"] is not None:
        s = doc["skew"]
        requested = "not steered" if s["requested"] is None else f"requested {s['requested']}"
        print(f"skew: measured {s['measured']:.4f} ({requested}; balanced {s['balanced']:.4f}; "
              f"{s['hot_workers']} hot of {s['workers']} workers, {s['num_partitions']} "
              f"{s['partitioner']} partitions)")
