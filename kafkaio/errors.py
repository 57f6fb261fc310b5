"""The errors of the Kafka plumbing: a cluster that does not answer or refuses, data that is
gone, a setting the Java client cannot take, and a local broker that will not start.

``KafkaUnavailable`` and its kinds, ``DataLoss``, ``BrokerError``, ``SecurityError`` and
``JvmError`` are ``RuntimeError`` too, ``UntranslatableSetting`` a ``ValueError``, as they were
before they shared a base.
"""

from __future__ import annotations

from config.errors import GeopsError
from config.exitcodes import EXIT_DATA_LOSS, EXIT_OUTAGE, EXIT_REPLACED, EXIT_USAGE


class KafkaUnavailable(GeopsError, RuntimeError):
    """The Kafka cluster could not be reached or refused the request."""


class TopicMissing(KafkaUnavailable):
    """The cluster answered: the topic does not exist (an answer, not an outage)."""


class KafkaOutage(KafkaUnavailable):
    """Kafka did not answer for longer than the outage limit."""

    exit_code = EXIT_OUTAGE


class Aborted(KafkaUnavailable):
    """The transaction had to be aborted (a record could not be written, the broker lost its
    state of it): nothing of it is visible, the unit may be written again."""


class Fenced(KafkaUnavailable):
    """Another producer with the same transactional id has started: this one must stop."""


class NoLeaseTopic(TopicMissing):
    """The lease topic (``kafkaio.lease``) does not exist: the app runs without a lease."""


class LeaseLost(KafkaUnavailable):
    """Another process of the app claimed the same term of its lease first."""

    exit_code = EXIT_REPLACED


class DataLoss(GeopsError, RuntimeError):
    """Records the app must read no longer exist on the broker."""

    exit_code = EXIT_DATA_LOSS


class UntranslatableSetting(GeopsError, ValueError):
    """A client setting that the Java client cannot be given; the message names it."""

    exit_code = EXIT_USAGE


class BrokerError(GeopsError, RuntimeError):
    """The broker could not be started or stopped; the message says why and what to do."""


class SecurityError(GeopsError, RuntimeError):
    """The secured broker's files could not be made or read; the message says which."""


class JvmError(GeopsError, RuntimeError):
    """A bundle's jars could not be found or resolved; the message says what to do."""
