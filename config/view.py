"""The resolved settings as typed, frozen attributes: ``cfg.view.app.workers`` is
``cfg["app.workers"]`` with its type. Written by ``python -m config.view_source`` from the
declarations in ``config/settings.py``; edit those, not this file."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class TopicSettings:
    """One logical topic's settings."""

    name: str
    partitions: int


@dataclass(frozen=True)
class TopicsSettings:
    """Every logical topic's settings."""

    publications: TopicSettings
    subscriptions: TopicSettings
    matches: TopicSettings
    metrics: TopicSettings
    control: TopicSettings
    dead_letter: TopicSettings
    status: TopicSettings
    events: TopicSettings
    positions: TopicSettings
    object_state: TopicSettings
    lease: TopicSettings


@dataclass(frozen=True)
class KafkaSettings:
    """The ``[kafka]`` settings."""

    bootstrap_servers: str
    outage_limit: float
    replication_factor: int
    client: Mapping[str, Any]


@dataclass(frozen=True)
class BrokerSettings:
    """The ``[broker]`` settings."""

    port: int
    nodes: int
    heap: str
    state_dir: str


@dataclass(frozen=True)
class AppSettings:
    """The ``[app]`` settings."""

    app_id: str
    strategy: str
    join: str
    workers: int
    partitions: int
    partitioner: str
    trigger: float
    one_stage_records: int
    large_batch_read: str
    max_records_per_trigger: int
    checkpoint: str
    stop_after_idle: float
    on_data_loss: str
    mode: str
    realtime_task_memory: int
    delivery: str
    output_from: str
    fold_bytes: int
    static_snapshot: str
    lease_time: float
    events: str
    object_ttl: float


@dataclass(frozen=True)
class SparkSettings:
    """The ``[spark]`` settings."""

    master: str
    ui: str
    driver_memory: str
    executor_memory: str
    driver_max_result_size: str
    driver_java_options: str
    conf: Mapping[str, Any]


@dataclass(frozen=True)
class DistributorSettings:
    """The ``[distributor]`` settings."""

    metric: str
    mode: str
    policy: str
    threshold: float
    min_items: int
    wait_periods: int
    period: float
    min_improvement: float
    first_period: str
    resync_periods: int
    min_saving: float
    safety_margin: float
    stability_tolerance: float
    stop_after_idle: float


@dataclass(frozen=True)
class DashboardSettings:
    """The ``[dashboard]`` settings."""

    host: str
    port: int
    period: float
    history: float
    map_window: float


@dataclass(frozen=True)
class Settings:
    """Every resolved setting, by section."""

    topics: TopicsSettings
    kafka: KafkaSettings
    broker: BrokerSettings
    app: AppSettings
    spark: SparkSettings
    distributor: DistributorSettings
    dashboard: DashboardSettings
