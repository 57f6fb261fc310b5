"""The Dynamic Distributor service: the Kafka loop around the decision engine.

Start-up: check that Kafka answers and the topics exist, then recover the epoch and assignment
in force from the newest RebalanceCommand for this app on the compacted control topic (so an
epoch is never reused after a restart), then follow the metrics topic from its *true* end
(``kafkaio.offsets.EndOffsets``), because only new
loads matter. The app's PartitionLoad and BatchSummary records feed the engine; its MoveReports
are logged.

Every period D (wall clock) the engine closes the period; the first one closes as soon as the
first batches bring M items (``first_period = "min-items"``, the default; ``"full"`` waits D as
the paper does), and the following periods last D from then. The DistributorStatus goes to the
status topic and the RebalanceCommand, if any, to the control topic keyed by the app id
(compaction keeps the latest per app); both are flushed before the next period starts. One log
line per period gives the epoch, MLDC, decision and reason; it is a warning when the decision is
``resync`` (the app did not report a commanded or recovered epoch within
``distributor.resync_periods`` periods, so the engine went back to the epoch the app reports).

Input never stops the service: undecodable records, records of other schemas or apps and
records the engine rejects are counted (``Service.counters``) and reported at most once per
period. Expected rejections (older epochs in flight after a rebalance, other apps) are only
counted; loads that come before the first BatchSummary are held until it tells P and W.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from dataclasses import dataclass, field, fields
from typing import Any

from confluent_kafka import KafkaError, TopicPartition

from config import BY_PATH, Config, ConfigError, one_line
from config.exitcodes import EXIT_OK
from distributor.decisions import REAL_TIME_WHY
from distributor.engine import Engine
from distributor.errors import InvalidParams
from distributor.params import Params
from distributor.records import PeriodResult
from kafkaio.clients import check_reachable, consumer
from kafkaio.control import newest_command
from kafkaio.errors import KafkaUnavailable
from kafkaio.offsets import EndOffsets
from kafkaio.sender import Sender
from schemas import codec
from schemas.assignment import MALFORMED
from schemas.errors import CommandRejected, DecodeError

log = logging.getLogger("geops.distributor")

REACH_TIMEOUT_S = 10.0
POLL_S = 0.2  # longest wait for metrics, so a stop or a period end is noticed promptly
# A period ends at a batch boundary: when the loads of a batch arrived but not yet its
# BatchSummary (the app writes it right after them), the period end waits up to this long.
BATCH_GRACE_S = 2.0
# Rejection kinds that are normal operation: counted, never warned about.
QUIET = frozenset({"stale epoch", "foreign app"})
UNDECODABLE = "undecodable"
UNEXPECTED = "unexpected schema"
KAFKA_ERROR = "kafka error"


def build_engine(cfg: Config) -> Engine:
    """The engine of the ``[distributor]`` settings; ConfigError naming the flag when bad."""
    settings = cfg["distributor"]
    for param in fields(Params):  # each value on its own, in a mode that takes every metric
        if param.name in settings:
            try:
                Params(**{"mode": "dynamic", param.name: settings[param.name]})
            except InvalidParams as exc:
                raise _config_error(f"distributor.{param.name}", str(exc)) from None
    try:  # then together: mode adaptive needs metric LB
        Params.from_settings(settings)
    except InvalidParams as exc:
        raise _config_error("distributor.metric", f"{settings['metric']} with "
                            f"{BY_PATH['distributor.mode'].flag} {settings['mode']}: {exc}"
                            ) from None
    if settings["period"] <= 0:
        raise _config_error("distributor.period", f"must be positive, got {settings['period']}")
    return Engine.from_settings(settings, app_id=cfg.view.app.app_id)


def _config_error(path: str, detail: str) -> ConfigError:
    return ConfigError(f"{BY_PATH[path].flag} ({path}): {detail}")


@dataclass
class _Skipped:
    """Records skipped in the current period, per kind, with the first reason of each kind."""

    counts: Counter = field(default_factory=Counter)
    examples: dict[str, str] = field(default_factory=dict)

    def add(self, kind: str, reason: str) -> None:
        self.counts[kind] += 1
        self.examples.setdefault(kind, reason)

    def warning(self) -> str | None:
        """One line naming every non-quiet kind with a count and an example, or None."""
        loud = [k for k in self.counts if k not in QUIET]
        if not loud:
            return None
        return "; ".join(f"{self.counts[k]} {k} (first: {self.examples[k]})" for k in loud)

    def quiet(self) -> str:
        return ", ".join(f"{n} {k}" for k, n in self.counts.items() if k in QUIET)


class Service:
    """One distributor for one app: build it, then ``run(stop)`` until stopped or idle.

    ``ready`` is set once the service follows the metrics topic (from then on no load of the
    app is missed); ``counters`` counts what it saw, skipped and did.
    """

    def __init__(self, cfg: Config):
        self.engine = build_engine(cfg)
        self.conf = cfg.kafka_client()
        self.app_id: str = cfg.view.app.app_id
        self.period_s: float = cfg.view.distributor.period
        self.idle_s: float = cfg.view.distributor.stop_after_idle
        self.outage_limit: float = cfg.view.kafka.outage_limit
        self.metrics_topic = cfg.topic("metrics")
        self.control_topic = cfg.topic("control")
        self.status_topic = cfg.topic("status")
        self.ready = threading.Event()
        self._own = Counter()
        self._skipped = _Skipped()
        self._mid_batch = False  # loads of a batch seen, its BatchSummary not yet
        self._real_time_told = False  # REAL_TIME_WHY logged since the app became real-time
        self._codec = codec()

    @property
    def counters(self) -> dict[str, int]:
        """The engine's counters plus the service's (records, periods, commands, skips).

        Safe to read from another thread while ``run`` goes on (each dict is copied at once).
        """
        total = dict(self.engine.counters)
        for key, count in dict(self._own).items():
            total[key] = total.get(key, 0) + count
        return total

    def run(self, stop: threading.Event | None = None) -> int:
        """Serve until ``stop`` is set or the app is idle; 0 when stopped cleanly, 1 on Kafka
        failure, 4 when Kafka did not answer for the outage limit (it waits that long)."""
        stop = stop or threading.Event()
        try:
            check_reachable(self.conf, timeout=REACH_TIMEOUT_S, outage_limit=self.outage_limit)
            probe = EndOffsets(self.conf)
            try:
                probe.partitions(self.status_topic)  # fails now if it does not exist
                self._recover()
                ends = probe(self.metrics_topic)
            finally:
                probe.close()
        except KafkaUnavailable as exc:  # 4 when silent past the outage limit, else 1
            log.error("%s", one_line(exc))
            return exc.exit_code
        metrics = consumer(self.conf)
        sender = Sender(self.conf, outage_limit=self.outage_limit)
        try:
            metrics.assign([TopicPartition(self.metrics_topic, p, end)
                            for p, end in sorted(ends.items())])
            log.info("balancing app %r: %s; following '%s' from its end, period %.3g s",
                     self.app_id, self._describe(), self.metrics_topic, self.period_s)
            self.ready.set()
            self._loop(metrics, sender, stop)
            sender.close()
        except KafkaUnavailable as exc:  # exit code 4 for no answer within the outage limit
            log.error("%s", one_line(exc))
            return exc.exit_code
        finally:
            metrics.close()
        log.info("stopped after %d period(s), %d command(s); counters: %s",
                 self._own["periods"], self._own["commands"], dict(sorted(self.counters.items())))
        return EXIT_OK

    def _describe(self) -> str:
        p = self.engine.params
        if self.engine.adaptive:
            return (f"metric {p.metric}, mode adaptive (judged every batch), policy "
                    f"{self.engine.policy.name}, min saving {p.min_saving:g} of a batch, safety "
                    f"margin {p.safety_margin:g}, stability tolerance {p.stability_tolerance:g}")
        return (f"metric {p.metric}, mode {p.mode}, policy {self.engine.policy.name}, threshold "
                f"{p.threshold}, M={p.min_items}, N={p.wait_periods}, "
                f"miMLDC={p.min_improvement}, first period {p.first_period}")

    # -- start-up -----------------------------------------------------------------------------

    def _recover(self) -> None:
        """Restore the newest command for this app from the control topic, if there is one."""
        bad = 0

        def skipped(why: CommandRejected, where: str) -> None:
            nonlocal bad
            if why.kind == MALFORMED:  # tombstones and other apps' commands are expected
                bad += 1
                log.warning("control %s skipped: %s", where, why)

        newest = newest_command(self.conf, self.control_topic, self.app_id, skipped=skipped,
                                outage_limit=self.outage_limit)
        self._own["control records skipped"] += bad
        if newest is None:
            log.info("no command for app %r on '%s': starting from epoch 0", self.app_id,
                     self.control_topic)
            return
        replicas = newest.get("replicas") or []
        why = self.engine.restore(newest["epoch"], newest["assignment"], replicas)
        if why is None:
            log.info("recovered epoch %d from '%s' (%d partitions, %d replicated)",
                     newest["epoch"], self.control_topic, len(newest["assignment"]),
                     len(replicas))
            return
        log.warning("the newest command (epoch %s) is unusable: %s; keeping only its epoch",
                    newest["epoch"], why)
        why = self.engine.restore(newest["epoch"])
        if why is not None:
            log.warning("cannot restore epoch %s either: %s; starting from epoch 0",
                        newest["epoch"], why)

    # -- the loop -----------------------------------------------------------------------------

    def _loop(self, metrics: Any, sender: Sender, stop: threading.Event) -> None:
        period_end = time.monotonic() + self.period_s
        last_seen = time.monotonic()
        engine = self.engine
        while not stop.is_set():
            wait = period_end - time.monotonic()
            for msg in metrics.consume(1000, timeout=POLL_S if wait <= 0 else min(POLL_S, wait)):
                if self._handle(msg):
                    last_seen = time.monotonic()
                if engine.adaptive and engine.decision_due:  # every batch boundary, no period D
                    self._end_period(sender)
            now = time.monotonic()
            # a real-time app has no batches to time decisions by: its periods are D, in
            # every mode
            if engine.adaptive and not engine.real_time:
                pass
            elif not self._mid_batch and self.engine.first_period_due:
                log.info("closing the first period early: %d item(s) of the app are in (M=%d)",
                         self.engine.period_items, self.engine.params.min_items)
                self._end_period(sender)
                period_end = now + self.period_s  # later periods last D from here
            elif now >= period_end and (not self._mid_batch
                                        or now >= period_end + BATCH_GRACE_S):
                self._end_period(sender)
                period_end += self.period_s
                if period_end <= now:  # fell behind (e.g. a slow flush): skip, do not burst
                    period_end = now + self.period_s
            if self.idle_s and now - last_seen >= self.idle_s:
                log.info("no metrics from app %r for %.0f s; stopping", self.app_id,
                         now - last_seen)
                break

    def _handle(self, msg: Any) -> bool:
        """Feed one metrics record to the engine; True when it came from our app."""
        err = msg.error()
        if err is not None:
            if err.fatal():
                raise KafkaUnavailable(f"reading '{self.metrics_topic}': {err.str()}")
            if err.code() != KafkaError._PARTITION_EOF:
                self._skip(KAFKA_ERROR, err.str())
            return False
        self._own["records"] += 1
        try:
            name, record = self._codec.decode(msg.value())
        except DecodeError as exc:
            self._skip(UNDECODABLE, f"@{msg.offset()}: {exc}")
            return False
        ours = not self.app_id or record.get("app_id") == self.app_id
        if name == "PartitionLoad":
            why = self.engine.observe_load(record)
            self._mid_batch = self._mid_batch or ours
        elif name == "BatchSummary":
            why = self.engine.observe_batch(record)
            self._mid_batch = self._mid_batch and not ours
        elif name == "MoveReport":
            why = self.engine.observe_move(record)
            if why is not None:
                if ours:
                    self._skipped.add(why.split(":", 1)[0], f"@{msg.offset()}: {why}")
                return False
            if ours:
                log.info("app %r runs epoch %d from batch %d: %d partition(s) moved, %.1f KiB "
                         "in %.0f ms", record["app_id"], record["epoch"], record["batch_id"],
                         len(record["partitions_moved"]), record["bytes"] / 1024,
                         record["duration_ms"])
            return ours
        elif name == "PartitionLayout":  # where the partitions lie: for maps, not balancing
            return False
        else:
            self._skip(UNEXPECTED, f"@{msg.offset()}: a {name} record")
            return False
        if why is not None:
            kind = why.split(":", 1)[0]
            self._skipped.add(kind, f"@{msg.offset()}: {why}")
        return ours

    def _skip(self, kind: str, reason: str) -> None:
        self._own[kind] += 1
        self._skipped.add(kind, reason)

    def _end_period(self, sender: Sender) -> None:
        if self.engine.real_time != self._real_time_told:
            self._real_time_told = self.engine.real_time
            if self.engine.real_time:
                log.info("app %r runs in real time (its summaries' join): %s; a status every "
                         "%.3g s, in every mode", self.app_id, REAL_TIME_WHY, self.period_s)
        result = self.engine.end_period(int(time.time() * 1000))
        self._own["periods"] += 1
        self._mid_batch = False  # its BatchSummary is late past the grace (or already here)
        enc = self._codec.encode
        key = self.app_id.encode()
        sender.send(self.status_topic, enc("DistributorStatus", result.status), key=key)
        if result.command is not None:
            sender.send(self.control_topic, enc("RebalanceCommand", result.command), key=key)
            self._own["commands"] += 1
        sender.flush()
        self._log_period(result)

    def _log_period(self, result: PeriodResult) -> None:
        s = result.status
        unit = 1e6 if s["metric"] == "LB" else 1.0
        loads = ", ".join(f"{v / unit:.4g}" for v in s["worker_loads"])
        mldc = "n/a" if s["mldc"] is None else f"{s['mldc']:.3f}"
        quiet = self._skipped.quiet()
        # a resync means a command was rejected or lost: worth a warning, not just a status
        level = logging.WARNING if s["decision"] == "resync" else logging.INFO
        log.log(level, "period %d epoch %d: MLDC %s (threshold %g), loads [%s] %s, %d items%s -> "
                "%s: %s", s["period"], s["epoch"], mldc, s["threshold"], loads,
                "ms" if s["metric"] == "LB" else "items", s["items"],
                f" (ignored {quiet})" if quiet else "", s["decision"], s["reason"])
        if result.command is not None:
            c = result.command
            moves = ", ".join(f"p{m['partition']} {m['from_worker']}->{m['to_worker']}"
                              for m in c["moves"])
            log.info("commanded epoch %d on '%s': MLDC %.3f -> %.3f predicted, %d move(s): %s",
                     c["epoch"], self.control_topic, c["mldc_before"], c["mldc_predicted"],
                     len(c["moves"]), moves)
        warning = self._skipped.warning()
        if warning:
            log.warning("period %d skipped metrics records: %s", s["period"], warning)
        self._skipped = _Skipped()


def run(cfg: Config, stop: threading.Event | None = None) -> int:
    """Run the distributor of ``cfg`` until ``stop`` is set or the app is idle for
    ``distributor.stop_after_idle``. Returns 0 when stopped cleanly, 1 when Kafka failed;
    raises ConfigError (naming the flag) for a bad setting."""
    return Service(cfg).run(stop)
