"""A producer that writes publications while the app runs, for the live-stream tests."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

import config
from app.main import checkpoint_dir, ready_path
from geops.model import Publications, Subscriptions
from kafkaio.sender import Sender
from kafkaio.topics import create_topics
from schemas import codec
from schemas.records import publication_records, subscription_records


@dataclass
class Phase:
    """``count`` publications at ``rate`` per second (None: as fast as possible), then
    ``pause`` seconds of silence."""

    count: int
    rate: float | None = None
    pause: float = 0.0


@dataclass
class LiveProducer:
    """Writes the publications phase by phase once the app's query has started.

    The query has started when the app wrote its ready file in the checkpoint
    (``app.main.ready_path``); from then on every record the producer writes arrives while the
    app runs.
    """

    cfg: config.Config
    pubs: Publications
    phases: list[Phase]
    started_at: float = 0.0
    finished_at: float = 0.0
    error: BaseException | None = None
    _thread: threading.Thread | None = field(default=None, repr=False)

    def start(self) -> LiveProducer:
        assert sum(p.count for p in self.phases) == len(self.pubs)
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def join(self, timeout: float = 120.0) -> None:
        assert self._thread is not None
        self._thread.join(timeout)
        assert not self._thread.is_alive(), "the producer did not finish"
        if self.error is not None:
            raise self.error

    def _run(self) -> None:
        try:
            marker = ready_path(checkpoint_dir(self.cfg))
            deadline = time.monotonic() + 180
            while not marker.exists():
                if time.monotonic() > deadline:
                    raise TimeoutError(f"the app's query did not start ({marker})")
                time.sleep(0.1)
            c = codec()
            topic = self.cfg.topic("publications")
            records = list(publication_records(self.pubs))
            self.started_at = time.time()
            done = 0
            for phase in self.phases:
                sender = Sender(self.cfg.kafka_client(), rate=phase.rate)
                for rec in records[done:done + phase.count]:
                    rec["event_time"] = int(time.time() * 1000)
                    sender.send(topic, c.encode("Publication", rec), key=str(rec["id"]).encode())
                sender.close()
                done += phase.count
                time.sleep(phase.pause)
            self.finished_at = time.time()
        except BaseException as exc:  # reported by join()
            self.error = exc


def load_subscriptions_only(cfg: config.Config, subs: Subscriptions) -> None:
    """Create the topics and produce the subscriptions; publications come live."""
    from kafkaio.sender import produce_records

    create_topics(cfg)
    produce_records(cfg.kafka_client(), cfg.topic("subscriptions"), "Subscription",
                    subscription_records(subs))
