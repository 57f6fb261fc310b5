"""Writing a workload: GeoJSON for people and `geops match`, Avro container files for producers.

``DIR/subscriptions.geojson`` and ``DIR/publications.geojson`` carry each feature's ``layer``
(area/district/sector, or point) as a property; ``DIR/subscriptions.avro`` and
``DIR/publications.avro`` are Avro object container files with the ``Subscription`` and
``Publication`` schemas of ``schemas/`` (geometry as WKB, relation as the enum symbol, event time
as epoch milliseconds), in the same order; ``DIR/workload.json`` records how it was made.
A workload of moving objects adds ``object_id`` to the publications and ``detect`` /
``distance_m`` / ``roam`` to the subscriptions that are fences (properties and record fields
alike).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import fastavro
import numpy as np

from geops.geojson import write_publications, write_subscriptions
from geops.model import DetectKind
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

    sub_extra: dict[str, np.ndarray] = {"layer": workload.subscription_layers}
    pub_extra: dict[str, np.ndarray] = {"layer": workload.publication_layers}
    if workload.object_ids is not None:
        # the properties geops subscribe / publish / match --events read
        sub_extra["detect"] = _detect_names(workload.detect)
        sub_extra["distance_m"] = np.array([None if np.isnan(d) else round(float(d), 1)
                                            for d in workload.distance_m], object)
        pub_extra["object_id"] = workload.object_ids
    if workload.roams is not None:
        sub_extra["roam"] = np.empty(len(workload.roams), object)
        sub_extra["roam"][:] = [None if r is None else {"distance_m": r[0], "match": r[1]}
                                for r in workload.roams]
    write_subscriptions(step("subscriptions.geojson"), workload.subscriptions, sub_extra)
    write_publications(step("publications.geojson"), workload.publications, pub_extra)
    write_avro(step("subscriptions.avro"), "Subscription",
               subscription_records(workload.subscriptions, workload.detect,
                                    None if workload.distance_m is None else
                                    np.round(workload.distance_m, 1), workload.roams))
    write_avro(step("publications.avro"), "Publication",
               publication_records(workload.publications, workload.object_ids))
    doc = {**record, **workload.summary()}
    with open(out / "workload.json", "w", encoding="utf-8") as fh:
        json.dump(doc, fh, indent=2)
        fh.write("\n")
    return doc


def _detect_names(masks: np.ndarray) -> np.ndarray:
    """``properties.detect`` of each subscription: lower-case kind names, None for none."""
    out = np.empty(len(masks), object)
    out[:] = [[k.lower() for k in DetectKind.names(m)] or None for m in masks.tolist()]
    return out
