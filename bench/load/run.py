"""`geops bench load`: reading and encoding subscriptions for `geops subscribe`, before and now.

On the subscriptions of a generated GeoPS workload, written as ``geops generate`` writes them
(GeoJSON and an Avro container file), it times in one process each stage of ``geops subscribe``
short of Kafka, the way it was done before and the way it is done now:

- parsing the JSON text: ``json.loads`` with the garbage collector on (before), ``json.loads``
  and ``orjson.loads`` with it off;
- building the geometries: each through GEOS's GeoJSON reader (before), all in bulk
  (``geops.geojson_geoms``);
- encoding the records: the codec one record at a time (before), ``schemas.bulk_encoder``;
- the whole path, file to encoded records: GeoJSON before and now, and the Avro file.

It checks that both ways give the same subscriptions and the same bytes, and reports each time
per feature and the ratio of before to now, measured in the same run (absolute times on this
shared machine vary from day to day; the ratios much less).
"""

from __future__ import annotations

import gc
import json
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import orjson
import shapely

from bench.harness.errors import MismatchError
from bench.harness.tables import text_table
from geops.avro_input import read_subscriptions_avro
from geops.geojson import read_subscriptions, write_subscriptions
from geops.geojson_geoms import geometries
from geops.workload import generate_workload
from geops.workload.output import write_avro
from schemas import codec
from schemas.bulk_encoder import encode_subscriptions
from schemas.records import subscription_records


@dataclass(frozen=True)
class Timing:
    stage: str
    method: str
    seconds: float
    features: int
    baseline: float  # the seconds of the stage's "before" method

    @property
    def us_per_feature(self) -> float:
        return self.seconds / self.features * 1e6


def _timed(run: Callable[[], Any], collect: bool = True) -> tuple[float, Any]:
    enabled = gc.isenabled()
    if collect:
        gc.enable()
    else:
        gc.disable()
    try:
        t0 = time.perf_counter()
        out = run()
        return time.perf_counter() - t0, out
    finally:
        (gc.enable if enabled else gc.disable)()


def _old_encode(subs: Any) -> list[bytes]:
    c = codec()
    return [c.encode("Subscription", r) for r in subscription_records(subs)]


def run_load_bench(subscriptions: int = 50_000, seed: int = 0,
                   log: Callable[[str], None] = print,
                   workdir: str | Path | None = None) -> list[Timing]:
    """Time each stage both ways on ``subscriptions`` generated features; raise if they
    disagree."""
    with tempfile.TemporaryDirectory(dir=workdir) as tmp:
        log(f"generating {subscriptions:,} subscriptions (seed {seed})")
        wl = generate_workload(seed=seed, subscriptions=subscriptions, publications=1)
        geojson, avro = Path(tmp) / "subscriptions.geojson", Path(tmp) / "subscriptions.avro"
        write_subscriptions(geojson, wl.subscriptions)
        write_avro(avro, "Subscription", subscription_records(wl.subscriptions))
        raw = geojson.read_bytes()
        n = subscriptions
        rows: list[Timing] = []

        def row(stage: str, method: str, seconds: float, baseline: float) -> None:
            rows.append(Timing(stage, method, seconds, n, baseline))
            log(f"{stage}: {method}: {seconds / n * 1e6:.1f} us/feature")

        log("parsing the JSON text")
        t_json, doc = _timed(lambda: json.loads(raw))
        row("parse JSON", "json.loads, gc on (before)", t_json, t_json)
        doc = None
        t, _ = _timed(lambda: json.loads(raw), collect=False)
        row("parse JSON", "json.loads, gc off", t, t_json)
        t, doc = _timed(lambda: orjson.loads(raw), collect=False)
        row("parse JSON", "orjson.loads, gc off (now)", t, t_json)

        log("building the geometries")
        objects = [f["geometry"] for f in doc["features"]]
        t_geos, (old, _, _) = _timed(partial(geometries, objects, bulk=False), collect=False)
        row("geometries", "GEOS GeoJSON reader, each (before)", t_geos, t_geos)
        t, (new, errors, _) = _timed(partial(geometries, objects), collect=False)
        row("geometries", "bulk, from_ragged_array (now)", t, t_geos)
        if errors or not shapely.equals_exact(old, new, tolerance=0).all():
            raise MismatchError("the bulk geometries differ from GEOS's GeoJSON reader's")
        doc = objects = old = new = None  # free them before the next stage

        log("reading the whole file as geops subscribe does")
        t_before, (subs_old, _, _) = _timed(lambda: read_subscriptions(geojson, bulk=False))
        t_now, (subs, _, rejected) = _timed(lambda: read_subscriptions(geojson))
        t_avro, (subs_avro, _, _) = _timed(lambda: read_subscriptions_avro(avro))
        for other in (subs, subs_avro):
            if (rejected or other.ids.tolist() != subs_old.ids.tolist()
                    or other.relations.tolist() != subs_old.relations.tolist()
                    or not shapely.equals_exact(other.geoms, subs_old.geoms, tolerance=0).all()):
                raise MismatchError("the subscriptions read now differ from those read before")
        row("read file", "GeoJSON: json + GEOS each (before)", t_before, t_before)
        row("read file", "GeoJSON: orjson + bulk (now)", t_now, t_before)
        row("read file", "Avro container file (now)", t_avro, t_before)

        log("encoding the records")
        t_codec, old_values = _timed(lambda: _old_encode(subs_old))
        t_bulk, values = _timed(lambda: encode_subscriptions(subs))
        if values != old_values:
            raise MismatchError("the bulk encoder's bytes differ from the codec's")
        row("encode", "codec, each record (before)", t_codec, t_codec)
        row("encode", "bulk_encoder (now)", t_bulk, t_codec)

        total = t_before + t_codec
        row("file to records", "GeoJSON (before)", total, total)
        row("file to records", "GeoJSON (now)", t_now + t_bulk, total)
        row("file to records", "Avro container file (now)", t_avro + t_bulk, total)
        return rows


def format_table(rows: Sequence[Timing]) -> str:
    """One line per stage and method; ratio = the stage's time before / this method's."""
    return "\n".join(text_table(
        [("stage", "16s"), ("method", "38s"), ("s", "8.2f"), ("us/feature", "11.1f"),
         ("ratio", "7.2f")],
        ([r.stage, r.method, r.seconds, r.us_per_feature, r.baseline / r.seconds]
         for r in rows)))
