"""The errors of the wire format: bytes that are no record, a record that is no command."""

from __future__ import annotations

from config.errors import GeopsError


class DecodeError(GeopsError, ValueError):
    """Bytes that are not a geops single-object record; the message says why."""


class CommandRejected(GeopsError, ValueError):
    """A control record that is no command for this app now; ``kind`` says which reason."""

    def __init__(self, kind: str, reason: str):
        super().__init__(reason)
        self.kind = kind
