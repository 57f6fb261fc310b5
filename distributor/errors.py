"""The errors of the Dynamic Distributor: parameters, policies and loads it cannot work with.

Each is a ``ValueError`` too (what the caller passed is unusable), as it was before they
shared a base. None ends a command by itself: ``geops distributor`` turns a bad parameter
into a ``config.errors.ConfigError`` naming its flag, and the rest are a caller's mistake.
"""

from __future__ import annotations

from config.errors import GeopsError


class InvalidParams(GeopsError, ValueError):
    """A parameter of the distributor (Table 1, metric, mode, first period, the tunables of
    mode adaptive) is out of its range, or two of them do not go together; the message names
    it and what it takes."""


class UnknownPolicy(GeopsError, ValueError):
    """No redistribution policy is registered under the name; the message lists the known."""


class InvalidPolicyOption(GeopsError, ValueError):
    """A policy's option (tolerance, precision, theta, beta, table_max) is out of its range."""


class ShapeError(GeopsError, ValueError):
    """Partitions and workers that do not fit together: per-partition loads, owners or costs
    of different lengths, a partition without an owner, or an engine given only one of
    partitions and workers, or fewer than one."""


class ReplayInputError(GeopsError, ValueError):
    """A trace ``replay`` cannot run: metric LB without processing times, periods of
    different sizes, or a load the engine rejects (the message names period and partition)."""
