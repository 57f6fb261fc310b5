"""How geops fails: one base error, its exit code, and the line a user reads.

Every error geops raises on purpose derives from ``GeopsError`` and lives in its package's
``errors.py`` (``config``, ``schemas``, ``geops``, ``kafkaio``, ``app``, ``distributor``,
``bench``, ``cli``). It carries the exit code that ends a process it stops as ``exit_code`` (a
class attribute from ``config.exitcodes``; ``EXIT_FAILED`` unless the class says otherwise),
and its message is meant for the user: ``one_line`` renders it, so the command, the app and the
distributor report an error the same way. Errors that callers catch as ``ValueError`` or
``RuntimeError`` keep that as a second base.
"""

from __future__ import annotations

from config.exitcodes import EXIT_FAILED, EXIT_USAGE


class GeopsError(Exception):
    """An expected failure with a message for the user (no traceback) and an exit code."""

    exit_code: int = EXIT_FAILED


def one_line(exc: BaseException, where: str | None = None) -> str:
    """What a user reads about ``exc``: ``<where>: <message>``.

    The message is the error's own text as it was raised (it names what failed and what to do;
    a few append the last lines of a log below that line), or, for an error raised without
    one, the name of its class.
    """
    text = str(exc) or type(exc).__name__
    return f"{where}: {text}" if where else text


class ConfigError(GeopsError, ValueError):
    """A configuration value is missing or malformed; the message names the setting."""

    exit_code = EXIT_USAGE
