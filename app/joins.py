"""Where the static side of the join lives, per join (names and meanings: config.choices.JOINS).

- **STAL** (static-local): each static partition stays cached on its owner's executor and its
  built index in the owner's Python worker, so only stream items cross the network; moving a
  partition is a one-off cost of a rebalance.
- **STRL** (stream-local): the partitions stay at home and are shipped through the shuffle to
  the task that joins them, every batch, where their index is rebuilt.
"""

from __future__ import annotations

from dataclasses import dataclass

from config.choices import JOINS


@dataclass(frozen=True)
class JoinMode:
    resident: bool  # partitions (and built indexes) stay with their owner between batches


JOIN_MODES: dict[str, JoinMode] = JOINS.table({
    "STAL": JoinMode(resident=True),
    "STRL": JoinMode(resident=False),
})
