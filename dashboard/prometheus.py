"""The dashboard's figures in the Prometheus text format (``/metrics``), from the newest
published documents: the same numbers as the page, labelled with the app id. A figure that is
unknown (no batch yet, Kafka unreachable) is left out rather than given as 0."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, Protocol

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector


class Documents(Protocol):
    """What the collector reads: the published state and map documents."""

    state: dict[str, Any]
    map: dict[str, Any]


# (metric name, help, field of the state's "latest" row)
ROW_GAUGES = (
    ("geops_input_publications_per_second",
     "publications per second arriving on the publications topic", "input_rate"),
    ("geops_output_publications_per_second", "publications per second the app processed",
     "output_rate"),
    ("geops_consumer_lag_records",
     "records on the publications topic the app has not processed", "lag"),
    ("geops_latency_p50_milliseconds", "median latency from event time to match", "p50_ms"),
    ("geops_latency_p99_milliseconds", "99th percentile latency from event time to match",
     "p99_ms"),
    ("geops_mldc", "maximum load distance coefficient of per-worker processing time (LB)",
     "mldc"),
    ("geops_mldc_threshold", "the distributor's MLDC threshold", "threshold"),
    ("geops_epoch", "assignment epoch in force", "epoch"),
    ("geops_events_per_second", "geofence events per second written to the events topic",
     "events_per_s"),
)


class ViewCollector(Collector):
    """Yields gauges from ``latest()`` (a ``dashboard.server.Published``, or None)."""

    def __init__(self, latest: Callable[[], Documents | None]):
        self.latest = latest

    def collect(self) -> Iterator[Metric]:
        docs = self.latest()
        up = GaugeMetricFamily("geops_dashboard_kafka_up",
                               "1 when the dashboard reads Kafka, 0 when it cannot",
                               labels=["app_id"])
        if docs is None:
            return
        state, map_doc = docs.state, docs.map
        app = state["app_id"]
        up.add_metric([app], 0.0 if state["problem"] else 1.0)
        yield up
        row = state["latest"] or {}
        for name, text, key in ROW_GAUGES:
            value = row.get(key)
            if value is not None:
                gauge = GaugeMetricFamily(name, text, labels=["app_id"])
                gauge.add_metric([app], float(value))
                yield gauge
        loads = row.get("worker_load_ms_per_s") or []
        if any(v is not None for v in loads):
            gauge = GaugeMetricFamily(
                "geops_worker_load_ms_per_second",
                "processing time of each worker per second of the last period",
                labels=["app_id", "worker"])
            for w, v in enumerate(loads):
                if v is not None:
                    gauge.add_metric([app, str(w)], float(v))
            yield gauge
        parts = map_doc["partitions"]
        if parts:
            load = GaugeMetricFamily(
                "geops_partition_load_ms_per_second",
                f"processing time of each static partition per second over the last "
                f"{map_doc['window_s']:g} s", labels=["app_id", "partition"])
            subs = GaugeMetricFamily("geops_partition_subscriptions",
                                     "subscriptions in each static partition",
                                     labels=["app_id", "partition"])
            owners = GaugeMetricFamily("geops_partition_owners",
                                       "workers owning each static partition",
                                       labels=["app_id", "partition"])
            for p in parts:
                label = [app, str(p["id"])]
                load.add_metric(label, float(p["load_ms_per_s"] or 0.0))
                owners.add_metric(label, float(len(p["owners"])))
                if p["subscriptions"] is not None:
                    subs.add_metric(label, float(p["subscriptions"]))
            yield load
            yield subs
            yield owners
        if state["rebalances"]:
            newest = state["rebalances"][-1]
            when = GaugeMetricFamily("geops_last_rebalance_timestamp_seconds",
                                     "when the newest rebalance command was issued",
                                     labels=["app_id", "epoch"])
            when.add_metric([app, str(newest["epoch"])], newest["time_ms"] / 1000)
            yield when
        decision = state["decision"]
        if decision is not None:
            info = GaugeMetricFamily("geops_distributor_decision",
                                     "the distributor's last decision (1 for the one in force)",
                                     labels=["app_id", "mode", "decision"])
            info.add_metric([app, decision["mode"], decision["decision"]], 1.0)
            yield info
