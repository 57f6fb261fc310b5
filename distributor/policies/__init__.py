"""Redistribution policies, chosen by name (``--policy``).

To add one (LLFD/Mixed, hot-partition replication, ...), implement ``Policy`` in its own module,
name it in ``config/choices.py`` (``POLICIES``) and list its factory here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from config import choices
from distributor.policies.base import Policy
from distributor.policies.greedy import GreedyPolicy

POLICIES: dict[str, Callable[..., Policy]] = choices.POLICIES.table({
    "greedy": GreedyPolicy,
})


def make_policy(name: str, **options: Any) -> Policy:
    """A new policy by its registered name; ValueError naming the known ones otherwise."""
    try:
        factory = POLICIES[name]
    except KeyError:
        raise ValueError(f"unknown policy {name!r}; known: {', '.join(sorted(POLICIES))}") from None
    return factory(**options)


__all__ = ["POLICIES", "GreedyPolicy", "Policy", "make_policy"]
