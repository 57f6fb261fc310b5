"""The error a subcommand raises to stop with a message and an exit code of its choosing."""

from __future__ import annotations

from config.errors import GeopsError
from config.exitcodes import EXIT_FAILED


class CommandError(GeopsError):
    """An expected failure with a message for the user (no traceback); ``exit_code`` is the
    one given (``EXIT_FAILED`` unless the command says otherwise)."""

    def __init__(self, message: str, exit_code: int = EXIT_FAILED):
        super().__init__(message)
        self.exit_code = exit_code
