"""The interface every redistribution policy implements.

A policy maps measured partition loads and the assignment in force to a new assignment; the
engine judges the proposal (MLDC_new) and turns it into a command. Returning the input
assignment unchanged means "nothing better found". Policies are pure and deterministic: the
same input gives the same output, so a trace replay reproduces a live run.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol


class Policy(Protocol):
    """Proposes a partition -> worker assignment."""

    name: str

    def propose(self, partition_loads: Sequence[float], assignment: Sequence[int],
                workers: int, costs: Sequence[float] | None = None) -> list[int]:
        """A full new assignment (index = partition) for ``workers`` workers.

        ``costs`` is an optional migration cost per partition (e.g. its static bytes): among
        otherwise equal choices the policy moves the cheaper partitions.
        """
        ...
