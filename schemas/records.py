"""Column-wise publications and subscriptions as records of the ``Publication`` and
``Subscription`` schemas (geometry as WKB, relation by its enum symbol).

Anything with the columns of ``geops.model.Publications`` (``ids``, ``geoms``, ``event_time``)
or ``Subscriptions`` (``ids``, ``geoms``, ``relations``: the index of the relation in the Avro
enum ``io.geops.Relation``) converts, so the wire format does not depend on the model; object
ids of publications, detect kinds (bit i: symbol i of ``io.geops.DetectKind``) and distances
of subscriptions are optional columns beside them.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from typing import Any, Protocol

import numpy as np
import shapely

from schemas.codec import codec

# A publication whose event time is this is stamped with the time it is sent
# (``kafkaio.sender.produce_records``).
MISSING_TIME = int(np.iinfo(np.int64).min)


class PublicationColumns(Protocol):
    ids: np.ndarray
    geoms: np.ndarray
    event_time: np.ndarray


class SubscriptionColumns(Protocol):
    ids: np.ndarray
    geoms: np.ndarray
    relations: np.ndarray


def relation_symbols() -> tuple[str, ...]:
    """The symbols of the Avro enum ``io.geops.Relation``, in the order of their codes."""
    fields = codec().current["Subscription"].source["fields"]
    return tuple(next(f["type"]["symbols"] for f in fields if f["name"] == "relation"))


def detect_symbols() -> tuple[str, ...]:
    """The symbols of the Avro enum ``io.geops.DetectKind``, in the order of their bits."""
    fields = codec().current["Subscription"].source["fields"]
    return tuple(next(f["type"]["items"]["symbols"] for f in fields if f["name"] == "detect"))


def publication_records(pubs: PublicationColumns, object_ids: Sequence[str | None] | None = None
                        ) -> Iterator[dict[str, Any]]:
    """Publications as records of the Avro ``Publication`` schema; ``object_ids`` (None
    where a publication has none) when given."""
    wkb = shapely.to_wkb(pubs.geoms)
    objects = [None] * len(wkb) if object_ids is None else object_ids
    for pid, geom, t, obj in zip(pubs.ids.tolist(), wkb, pubs.event_time.tolist(), objects,
                                 strict=True):
        yield {"id": pid, "geometry": geom, "event_time": t, "object_id": obj}


def subscription_records(subs: SubscriptionColumns, detect: np.ndarray | None = None,
                         distance_m: np.ndarray | None = None,
                         roams: Sequence[tuple[float, str] | None] | None = None
                         ) -> Iterator[dict[str, Any]]:
    """Subscriptions as records of the Avro ``Subscription`` schema; ``detect`` (bit masks),
    ``distance_m`` (NaN: none) and ``roams`` ((distance, glob), None: none) when given."""
    wkb = shapely.to_wkb(subs.geoms)
    names, kinds = relation_symbols(), detect_symbols()
    n = len(wkb)
    masks = [0] * n if detect is None else np.asarray(detect).tolist()
    distances = [math.nan] * n if distance_m is None else np.asarray(distance_m, float).tolist()
    roams = [None] * n if roams is None else roams
    for sid, geom, rel, mask, d, roam in zip(subs.ids.tolist(), wkb, subs.relations.tolist(),
                                             masks, distances, roams, strict=True):
        yield {"id": sid, "geometry": geom, "relation": names[rel],
               "detect": [k for i, k in enumerate(kinds) if mask >> i & 1],
               "distance_m": None if math.isnan(d) else d,
               "roam": None if roam is None else {"distance_m": float(roam[0]),
                                                  "match": roam[1]}}
