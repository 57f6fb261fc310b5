"""`geops tail` lines of records with replicated partitions, and of old ones."""

from __future__ import annotations

from cli.render import to_text
from schemas import codec

SUMMARY = {"app_id": "a", "batch_id": 4, "epoch": 2, "strategy": "sPIS", "join": "STAL",
           "workers": 2, "partitions": 16, "records": 250, "dead_letters": 0, "items": 260,
           "matched_publications": 40, "start_time": 0, "end_time": 1, "duration_ms": 812.0}
COMMAND = {"epoch": 2, "assignment": [0, 0, 1, 1], "moves": [
    {"partition": 1, "from_worker": 0, "to_worker": 1}], "mldc_before": 0.8,
    "mldc_predicted": 0.1, "metric": "LB", "reason": "hot", "time": 0, "app_id": ""}


def decoded(name: str, record: dict) -> dict:
    return codec().decode(codec().encode(name, record))[1]


def test_tail_shows_the_replicas_of_a_command_and_of_a_batch() -> None:
    replicas = [{"partition": 3, "workers": [1, 0]}, {"partition": 7, "workers": [0, 1]}]
    line = to_text("RebalanceCommand", decoded("RebalanceCommand",
                                               {**COMMAND, "replicas": replicas}))
    assert "1 moves: p1 0->1; replicated p3 on [1, 0], p7 on [0, 1] - hot" in line
    line = to_text("BatchSummary", decoded("BatchSummary", {**SUMMARY, "replicas": replicas}))
    assert line.endswith("p99 - ms; replicated p3 on [1, 0], p7 on [0, 1]")


def test_records_without_replicas_read_as_before() -> None:
    assert "replicated" not in to_text("RebalanceCommand", decoded("RebalanceCommand", COMMAND))
    line = to_text("BatchSummary", decoded("BatchSummary", SUMMARY))
    assert line.endswith("latency p50 - ms p99 - ms")
