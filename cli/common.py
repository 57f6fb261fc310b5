"""Helpers shared by the subcommands: configuration from flags, argument types, reachability,
logical topic names."""

from __future__ import annotations

import argparse
import contextlib
import signal
from collections.abc import Iterator

import config
from cli.errors import CommandError
from config import TOPICS, Config
from config.embedded import read_record
from config.exitcodes import EXIT_FAILED, EXIT_USAGE  # noqa: F401 - EXIT_USAGE: cli/bench_live.py
from kafkaio.clients import check_reachable
from kafkaio.errors import KafkaOutage, KafkaUnavailable


def positive_int(text: str) -> int:
    """argparse type: an integer of at least 1."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def non_negative_int(text: str) -> int:
    """argparse type: an integer of at least 0."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {text!r}")
    return value


def non_negative_duration(text: str) -> float:
    """argparse type: a duration such as 500ms, 10s, 2m or a number of seconds, 0 or more."""
    try:
        value = config.parse_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"expected a duration of 0 or more, got {text!r}")
    return value


def positive_duration(text: str) -> float:
    """argparse type: a duration such as 500ms, 10s, 2m or a number of seconds, above zero."""
    try:
        value = config.parse_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected a duration above zero, got {text!r}")
    return value


def duration_text(text: str) -> str:
    """argparse type: a duration above zero (as ``positive_duration``), kept as written, for a
    flag passed on to another command."""
    positive_duration(text)
    return text


def memory_size(text: str) -> str:
    """argparse type: a JVM memory size such as 4g or 512m."""
    try:
        return config.parse_memory(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def settings(args: argparse.Namespace) -> Config:
    """The resolved configuration of a subcommand (defaults < file < env < flags)."""
    return config.from_args(args)


def reachable(cfg: Config) -> None:
    """Fail fast with a helpful message when Kafka cannot be reached or refuses this client
    (a client without credentials of the state directory's secured broker is told where its
    settings are); a broker that accepts connections but is silent is waited for up to the
    outage limit, as any outage is (exit code 4 past it)."""
    try:
        check_reachable(cfg.kafka_client(), timeout=10.0, outage_limit=cfg.view.kafka.outage_limit)
    except KafkaUnavailable as exc:
        hint = "" if isinstance(exc, KafkaOutage) else _secured_hint(cfg)
        raise CommandError(f"{exc}{hint}", exc.exit_code) from None


def _secured_hint(cfg: Config) -> str:
    if cfg.kafka_client().get("sasl.username"):
        return ""
    try:
        record = read_record(cfg.state_dir()) or {}
    except OSError:
        return ""
    secure = record.get("secure_dir")
    return (f"; the local broker of {cfg.state_dir()} is secured: connect as a part of geops "
            f"with --config {secure}/<part>.toml" if secure else "")


def topic_name(cfg: Config, given: str) -> str:
    """A logical topic ('control', 'dead-letter') maps to its configured name; others as given."""
    logical = given.replace("-", "_")
    return cfg.topic(logical) if logical in TOPICS else given


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM stops the block as Ctrl-C does (KeyboardInterrupt, so the ``finally`` blocks stop
    what it started), once: further SIGTERMs are ignored while it stops. A second one (``timeout``
    forwards its own SIGTERM to the command a ``pkill`` already reached) interrupted the
    stopping and left the broker and the app running."""

    def interrupt(signum: int, _frame: object) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        raise KeyboardInterrupt(signal.Signals(signum).name)

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
