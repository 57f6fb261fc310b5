"""Column-wise publications and subscriptions as records of the ``Publication`` and
``Subscription`` schemas (geometry as WKB, relation by its enum symbol).

Anything with the columns of ``geops.model.Publications`` (``ids``, ``geoms``, ``event_time``)
or ``Subscriptions`` (``ids``, ``geoms``, ``relations``: the index of the relation in the Avro
enum ``io.geops.Relation``) converts, so the wire format does not depend on the model.
"""

from __future__ import annotations

from collections.abc import Iterator
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


def publication_records(pubs: PublicationColumns) -> Iterator[dict[str, Any]]:
    """Publications as records of the Avro ``Publication`` schema."""
    wkb = shapely.to_wkb(pubs.geoms)
    for pid, geom, t in zip(pubs.ids.tolist(), wkb, pubs.event_time.tolist(), strict=True):
        yield {"id": pid, "geometry": geom, "event_time": t}


def subscription_records(subs: SubscriptionColumns) -> Iterator[dict[str, Any]]:
    """Subscriptions as records of the Avro ``Subscription`` schema."""
    wkb = shapely.to_wkb(subs.geoms)
    names = relation_symbols()
    for sid, geom, rel in zip(subs.ids.tolist(), wkb, subs.relations.tolist(), strict=True):
        yield {"id": sid, "geometry": geom, "relation": names[rel]}
