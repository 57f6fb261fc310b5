"""Writing a workload: GeoJSON for people and `geops match`, Avro container files for producers.

``DIR/subscriptions.geojson`` and ``DIR/publications.geojson`` carry each feature's ``layer``
(area/district/sector, or point) as a property; ``DIR/subscriptions.avro`` and
``DIR/publications.avro`` are Avro object container files with the ``Subscription`` and
``Publication`` schemas of ``schemas/`` (geometry as WKB, relation as the enum symbol, event time
as epoch milliseconds), in the same order; ``DIR/workload.json`` records how it was made.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import fastavro

from geops.geojson import write_publications, write_subscriptions
from geops.workload.generate import Workload
from geops.workload.world import Log
from schemas.codec import codec
from schemas.records import publication_records, subscription_records

FILES = ("subscriptions.geojson", "publications.geojson", "subscriptions.avro",
         "publications.avro", "workload.json")


def write_avro(path: str | os.PathLike[str], schema_name: str,
               records: Iterator[dict[str, Any]]) -> None:
    """An Avro object container file of the current schema ``schema_name``.

    The sync marker is derived from the schema name instead of drawn at random, so the same
    seed gives byte-identical files.
    """
    sync = hashlib.md5(f"geops {schema_name}".encode()).digest()
    with open(path, "wb") as fh:
        fastavro.writer(fh, codec().current[schema_name].parsed, records, sync_marker=sync)


def write_workload(out: str | os.PathLike[str], workload: Workload, record: dict[str, Any],
                   log: Log | None = None) -> dict[str, Any]:
    """Write every file of ``FILES`` into ``out`` (created if needed); returns workload.json.

    ``record`` holds what the caller wants kept beside the summary (parameters, seed, inputs).
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    def step(name: str) -> Path:
        if log:
            log(f"writing {out / name}")
        return out / name

    write_subscriptions(step("subscriptions.geojson"), workload.subscriptions,
                        {"layer": workload.subscription_layers})
    write_publications(step("publications.geojson"), workload.publications,
                       {"layer": workload.publication_layers})
    write_avro(step("subscriptions.avro"), "Subscription",
               subscription_records(workload.subscriptions))
    write_avro(step("publications.avro"), "Publication",
               publication_records(workload.publications))
    doc = {**record, **workload.summary()}
    with open(out / "workload.json", "w", encoding="utf-8") as fh:
        json.dump(doc, fh, indent=2)
        fh.write("\n")
    return doc
