"""The errors of the benchmarks: a run that failed, a plan that conflicts with results on disk,
and a fast path whose result differs from its reference.

``RunFailed`` and ``BenchFailed`` are ``RuntimeError`` too, as they were before they shared a
base; ``MismatchError``, once one per benchmark, is one class for ``bench load``, ``bench
decode`` and ``bench kernel``.
"""

from __future__ import annotations

from config.errors import GeopsError
from config.exitcodes import EXIT_USAGE


class BenchFailed(GeopsError, RuntimeError):
    """Something the benchmark started failed; the message points at its log."""


class RunFailed(GeopsError, RuntimeError):
    """A run did not complete; the message points at its logs."""


class PlanConflict(GeopsError):
    """The results directory holds runs of the same id with other sizes."""

    exit_code = EXIT_USAGE


class MismatchError(GeopsError, AssertionError):
    """A fast path disagrees with its reference (the bulk reader, encoder or decoder with the
    codec, a matcher with the reference matcher): it is wrong, whatever its speed."""
