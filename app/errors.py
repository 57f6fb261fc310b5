"""The errors of the Spark application's own code (its Kafka and configuration errors are
those of ``kafkaio`` and ``config``)."""

from __future__ import annotations

from config.errors import GeopsError


class OffsetLogError(GeopsError, RuntimeError):
    """The checkpoint does not hold the offsets of a batch in the expected form."""


class EndedBeforeQuery(GeopsError):
    """The app ends before its query starts, with ``exit_code``: the start-up step that raises
    it has logged why and stopped what the steps before it started."""

    def __init__(self, exit_code: int):
        super().__init__(f"the app ended before its query started (exit code {exit_code})")
        self.exit_code = exit_code
