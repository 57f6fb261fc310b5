"""The errors of the Spark application's own code (its Kafka and configuration errors are
those of ``kafkaio`` and ``config``)."""

from __future__ import annotations

from config.errors import GeopsError


class OffsetLogError(GeopsError, RuntimeError):
    """The checkpoint does not hold the offsets of a batch in the expected form."""
