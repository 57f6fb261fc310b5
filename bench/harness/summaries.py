"""An app's batch summaries as a benchmark reads them from the metrics topic."""

from __future__ import annotations

import config
from kafkaio.dump import by_schema


def summaries(cfg: config.Config, app_id: str) -> list[dict]:
    """The app's batch summaries with records, one per batch id (the last written), in batch
    order."""
    seen: dict[int, dict] = {}
    for s in by_schema(cfg.kafka_client(), cfg.topic("metrics")).get("BatchSummary", []):
        if s["app_id"] == app_id and s["records"]:
            seen[s["batch_id"]] = s
    return [seen[b] for b in sorted(seen)]
