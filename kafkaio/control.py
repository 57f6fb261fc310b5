"""Reading the control topic: the newest rebalance command for one app.

The topic is compacted and keyed by app id, so after a restart the newest command is still
there; the app (which assignment to resume) and the distributor (which epoch it is at) both
recover through ``newest_command``. Each record is judged by ``schemas.assignment.command_for``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from kafkaio.offsets import read_to_end
from kafkaio.retry import DEFAULT_OUTAGE_LIMIT
from schemas.assignment import command_for
from schemas.errors import CommandRejected


def newest_command(client_conf: Mapping[str, str], topic: str, app_id: str, *,
                   newer_than: int | None = None, partitions: int | None = None,
                   workers: int | None = None,
                   skipped: Callable[[CommandRejected, str], None] | None = None,
                   outage_limit: float = DEFAULT_OUTAGE_LIMIT) -> dict[str, Any] | None:
    """The command with the highest epoch (the first of equal ones) that ``command_for``
    accepts, reading ``topic`` to its end; None when there is none.

    ``skipped(why, where)`` hears of every other record (``where``: ``topic[partition]@offset``).
    """
    newest: dict[str, Any] | None = None
    for msg in read_to_end(client_conf, topic, outage_limit=outage_limit):
        floor = newest["epoch"] if newest is not None else newer_than
        try:
            newest = command_for(msg.value(), app_id, floor, partitions, workers)
        except CommandRejected as why:
            if skipped is not None:
                skipped(why, f"{msg.topic()}[{msg.partition()}]@{msg.offset()}")
    return newest
