"""The parts a batch runner is built from: its settings, its Kafka side and its static side.

Each part is what one concern of the runner needs, typed and named once, so the runner, the
start-up that builds it and the supervision that follows it pass three parts rather than a
score of loose values.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark import Broadcast

from app.batch.control import ControlChannel
from app.batch.workers import WorkerCount
from app.events.positions import FenceTable
from app.static.side import StaticSide
from app.static.snapshot_writer import SnapshotWriter
from app.subscriptions.feed import SubscriptionFeed
from config import Config
from geops.strategies import Strategy
from geops.strategies.churn import LiveSubscriptions


@dataclass
class Topics:
    """Resolved topic names the app reads and writes."""

    publications: str
    matches: str
    metrics: str
    control: str
    dead_letter: str
    positions: str = ""  # each batch's positions of moving objects (app.events.positions); "": none


@dataclass(frozen=True)
class RunnerSettings:
    """The settings a batch runner follows, fixed for the app's life; their defaults are the
    configuration's (``of``)."""

    app_id: str
    join_mode: str
    checkpoint: str
    fold_bytes: int
    delivery: str
    outage_limit: float
    on_data_loss: str
    one_stage_records: int  # 0: every batch in two stages
    # whether a batch too large for one stage is read by the app's read tasks (else by the
    # connector's)
    direct_read: bool
    # who writes the Match records: "driver", or "tasks" (``app.batch.task_output``)
    output_from: str = "driver"

    @classmethod
    def of(cls, cfg: Config, checkpoint: str) -> RunnerSettings:
        """The runner's settings as the configuration resolves them."""
        app = cfg.view.app
        return cls(app_id=app.app_id, join_mode=app.join, checkpoint=checkpoint,
                   fold_bytes=app.fold_bytes, delivery=app.delivery,
                   outage_limit=cfg.view.kafka.outage_limit, on_data_loss=app.on_data_loss,
                   one_stage_records=app.one_stage_records,
                   direct_read=app.large_batch_read == "direct",
                   output_from=app.output_from)


@dataclass(frozen=True)
class KafkaSide:
    """What the runner reads and writes in Kafka besides the publications Spark hands it."""

    conf: dict[str, str]
    topics: Topics
    control: ControlChannel
    feed: SubscriptionFeed | None = None  # the subscription changes (None: none followed)


@dataclass
class StaticParts:
    """The static side and what matches against it: the strategy and its router (broadcast
    again when subscription changes have grown its pending list), the built partitions on the
    executors, the subscriptions as they change, the fences the events hear of (None: no
    events), the executors the workers follow (None: W stays as it is) and the writer of the
    static side's snapshot."""

    strategy: Strategy
    router: Broadcast
    static: StaticSide
    live: LiveSubscriptions | None = None
    fences: FenceTable | None = None
    follow: WorkerCount | None = None
    snapshots: SnapshotWriter | None = None  # keeps the static side's snapshot (None: none)
