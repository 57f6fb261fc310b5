"""Redistribution policies, chosen by name (``--policy``).

To add one, implement ``Policy`` (or ``OwnersPolicy``, when it may give a partition several
owners) in its own module, name it in ``config/choices.py`` (``POLICIES``) and list its factory
here. ``greedy`` is the paper's; ``llfd``, ``minmig`` and ``mixed`` are the migration-aware
family of Fang et al., HPDC 2017 (``migration.py``); ``replicate`` adds replication of hot
partitions.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from config import choices
from distributor.errors import UnknownPolicy
from distributor.policies.base import OwnersPolicy, Policy, added_owners, propose_owners
from distributor.policies.greedy import GreedyPolicy
from distributor.policies.llfd import LLFDPolicy
from distributor.policies.minmig import MinMigPolicy
from distributor.policies.mixed import MixedPolicy
from distributor.policies.replicate import ReplicatePolicy

POLICIES: dict[str, Callable[..., Policy]] = choices.POLICIES.table({
    "greedy": GreedyPolicy,
    "llfd": LLFDPolicy,
    "minmig": MinMigPolicy,
    "mixed": MixedPolicy,
    "replicate": ReplicatePolicy,
})


def make_policy(name: str, **options: Any) -> Policy:
    """A new policy by its registered name; UnknownPolicy naming the known ones otherwise."""
    try:
        factory = POLICIES[name]
    except KeyError:
        raise UnknownPolicy(f"unknown policy {name!r}; known: "
                            f"{', '.join(sorted(POLICIES))}") from None
    return factory(**options)


__all__ = ["POLICIES", "GreedyPolicy", "LLFDPolicy", "MinMigPolicy", "MixedPolicy",
           "OwnersPolicy", "Policy", "ReplicatePolicy", "added_owners", "make_policy",
           "propose_owners"]
