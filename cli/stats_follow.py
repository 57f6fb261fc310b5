"""`geops stats --follow`: the live service, one line per period until Ctrl-C, --periods or
--until-idle (the columns: `geops stats --help`; their figures: dashboard.periods)."""

from __future__ import annotations

import contextlib
import signal
import sys
import time
from collections.abc import Callable, Iterator
from types import FrameType
from typing import TextIO

from confluent_kafka import OFFSET_BEGINNING, TopicPartition

from cli.errors import CommandError
from config import Config
from dashboard.periods import Follower, Period, Row, collect
from kafkaio.clients import consumer
from kafkaio.errors import KafkaUnavailable
from kafkaio.offsets import EndOffsets

COLUMNS = (("time", 8), ("in/s", 9), ("out/s", 9), ("lag", 11), ("batches", 7),
           ("p50 ms", 8), ("p99 ms", 8), ("MLDC LB", 7), ("epoch", 5))
HEADER = " ".join(f"{name:>{width}}" for name, width in COLUMNS)


def format_row(row: Row) -> str:
    """A row under HEADER, every number right-aligned in its column."""
    def num(value: float | None, fmt: str = ",.0f", mark: str = "") -> str:
        return "-" if value is None else f"{mark}{value:{fmt}}"

    mark = "~" if row.latency_from_batches else ""
    cells = (time.strftime("%H:%M:%S", time.localtime(row.time_ms / 1000)),
             num(row.input_rate), num(row.output_rate), num(row.lag, ","),
             str(row.batches), num(row.p50_ms, mark=mark), num(row.p99_ms, mark=mark),
             num(row.mldc, ".2f"), num(row.epoch, "d"))
    return " ".join(f"{cell:>{width}}" for cell, (_, width) in zip(cells, COLUMNS, strict=True))


def follow(cfg: Config, app_id: str, *, period: float = 5.0, until_idle: float | None = None,
           periods: int | None = None, from_beginning: bool = False, out: TextIO | None = None,
           clock: Callable[[], float] = time.monotonic) -> int:
    """Print HEADER, then one row per period until Ctrl-C/SIGTERM, ``periods`` rows or
    ``until_idle`` seconds without a publication, batch or match."""
    out = out or sys.stdout
    conf = cfg.kafka_client()
    pubs, metrics, matches = (cfg.topic(t) for t in ("publications", "metrics", "matches"))
    probe = EndOffsets(conf)
    c = None
    try:
        try:
            parts = {t: probe.partitions(t) for t in (metrics, matches)}
            starts = {t: ({p: OFFSET_BEGINNING for p in ps} if from_beginning else probe(t))
                      for t, ps in parts.items()}
            probe.partitions(pubs)  # a missing publications topic is an error, not a "-"
        except KafkaUnavailable as exc:
            raise CommandError(str(exc)) from None
        c = consumer(conf)
        c.assign([TopicPartition(t, p, starts[t].get(p, OFFSET_BEGINNING))
                  for t, ps in parts.items() for p in ps])
        follower = Follower(app_id, _topic_end(probe, pubs))
        with _signals_as_interrupt():
            out.write(HEADER + "\n")
            out.flush()
            began = last_active = clock()
            done = 0
            while periods is None or done < periods:
                got = collect(c, began + period, clock)
                topic_end = _topic_end(probe, pubs)
                now = clock()
                row = follower.step(Period(now - began, topic_end, got.records[metrics],
                                           got.named(matches, "Match"),
                                           int(time.time() * 1000)))
                began = now
                out.write(format_row(row) + "\n")
                out.flush()
                done += 1
                if row.batches or row.matches or (row.input_rate or 0) > 0:
                    last_active = now
                if until_idle is not None and now - last_active >= until_idle:
                    break
    except KeyboardInterrupt:  # Ctrl-C is how a follow ends: not an error
        pass
    except BrokenPipeError:  # e.g. `geops stats --follow | head`
        pass
    finally:
        if c is not None:
            c.close()
        probe.close()
    return 0


def _topic_end(probe: EndOffsets, topic: str) -> dict[int, int] | None:
    """The topic's end offsets, or None (a "-" this period) when they cannot be read now."""
    try:
        return probe(topic)
    except KafkaUnavailable as exc:
        print(f"geops stats: end offsets of {topic} unknown this period: {exc}", file=sys.stderr)
        return None


@contextlib.contextmanager
def _signals_as_interrupt() -> Iterator[None]:
    """SIGINT and SIGTERM end the follow like Ctrl-C in a terminal, also when the shell started
    it in the background with SIGINT ignored (only the main thread may set handlers)."""
    previous = {}
    try:
        for signum in (signal.SIGINT, signal.SIGTERM):
            previous[signum] = signal.signal(signum, _interrupt)
    except ValueError:  # not the main thread
        pass
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, signal.SIG_DFL if handler is None else handler)


def _interrupt(_signum: int, _frame: FrameType | None) -> None:
    raise KeyboardInterrupt
