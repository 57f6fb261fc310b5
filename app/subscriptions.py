"""Reading the compacted subscriptions topic into the static data the app partitions.

The last value per key wins and a tombstone (null value) deletes the key, exactly as
compaction would leave the topic. Records that cannot be used are logged and skipped.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import shapely

from geops.model import Relation, Subscriptions, geometry_problems
from kafkaio.offsets import read_to_end
from kafkaio.retry import DEFAULT_OUTAGE_LIMIT
from schemas import DecodeError, codec

log = logging.getLogger("geops.app.subscriptions")


@dataclass
class LoadReport:
    """How the subscriptions topic was turned into subscriptions."""

    records: int = 0
    tombstones: int = 0
    skipped: int = 0


def load_subscriptions(client_conf: Mapping[str, str], topic: str,
                       outage_limit: float = DEFAULT_OUTAGE_LIMIT,
                       ) -> tuple[Subscriptions, LoadReport]:
    """The live subscriptions of ``topic`` (read to its end as of now)."""
    c = codec()
    report = LoadReport()
    latest: dict[bytes, tuple[int, bytes, int] | None] = {}
    for msg in read_to_end(client_conf, topic, outage_limit=outage_limit):
        report.records += 1
        where = f"{msg.topic()}[{msg.partition()}]@{msg.offset()}"
        key = msg.key()
        if msg.value() is None:
            report.tombstones += 1
            if key is None:
                log.warning("skipping %s: tombstone without a key", where)
                report.skipped += 1
            else:
                latest[key] = None
            continue
        try:
            rec = c.decode_as("Subscription", msg.value())
        except DecodeError as exc:
            log.warning("skipping %s: %s", where, exc)
            report.skipped += 1
            continue
        latest[key if key is not None else str(rec["id"]).encode()] = (
            rec["id"], rec["geometry"], int(Relation[rec["relation"]]))
    live = [v for v in latest.values() if v is not None]
    if not live:
        return Subscriptions.empty(), report
    ids = np.array([v[0] for v in live], np.int64)
    geoms = shapely.from_wkb(np.array([v[1] for v in live], dtype=object), on_invalid="ignore")
    rels = np.array([v[2] for v in live], np.int8)
    keep = np.ones(len(ids), bool)
    for i, problem in enumerate(geometry_problems(geoms)):
        if problem:
            log.warning("skipping subscription %d: %s", ids[i], problem)
            keep[i] = False
    # Two keys with the same subscription id: the later record wins, like a re-subscribe.
    _, last = np.unique(ids[keep][::-1], return_index=True)
    pick = np.flatnonzero(keep)[::-1][last]
    report.skipped += int(len(ids) - len(pick))
    pick.sort()
    return Subscriptions(ids[pick], geoms[pick], rels[pick]), report
