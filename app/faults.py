"""Faults the delivery tests inject into a running app, named by environment variables.

- ``GEOPS_FAULT_KILL=<point>@<batch id>``: the driver kills itself with SIGKILL (as
  ``kill -9`` would) when batch ``<batch id>`` reaches ``<point>`` of its write, one of
  ``KILL_POINTS``: ``before-write`` (the batch's job has run, nothing is sent),
  ``mid-write`` (its matches and loads are sent and flushed, the summary is not; in a
  transaction, not committed) and ``after-commit`` (all of it is in Kafka, committed, and
  Spark has not yet committed the batch).
- ``GEOPS_FAULT_FAIL_TASK=<file>``: the first join task with stream items that can create
  ``<file>`` fails after it has done its work, once (Spark retries it when its master allows a
  task more than one attempt, e.g. ``local[2,2]``).

Unset, they cost one comparison per point per batch and one lookup per join task.
"""

from __future__ import annotations

import os
import signal
import sys

KILL_VAR = "GEOPS_FAULT_KILL"
FAIL_TASK_VAR = "GEOPS_FAULT_FAIL_TASK"
KILL_POINTS = ("before-write", "mid-write", "after-commit")


class KillPoint:
    """Where the driver kills itself, from ``GEOPS_FAULT_KILL`` (None: nowhere)."""

    def __init__(self, spec: str | None):
        self.at: tuple[str, int] | None = None
        if spec:
            point, sep, batch = spec.partition("@")
            if point not in KILL_POINTS or not sep or not batch.isdigit():
                raise ValueError(f"{KILL_VAR}={spec!r}: expected <point>@<batch id> with a "
                                 f"point among {', '.join(KILL_POINTS)}")
            self.at = (point, int(batch))

    @classmethod
    def from_env(cls) -> KillPoint:
        return cls(os.environ.get(KILL_VAR))

    def __call__(self, point: str, batch_id: int) -> None:
        if self.at is not None and self.at == (point, batch_id):
            os.kill(os.getpid(), signal.SIGKILL)


def fail_task_once() -> None:
    """Raise in the calling task the first time ``GEOPS_FAULT_FAIL_TASK`` names a file that
    does not exist yet (created here, so every later attempt and task goes on)."""
    path = os.environ.get(FAIL_TASK_VAR)
    if not path:
        return
    try:
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return
    message = f"injected task failure ({FAIL_TASK_VAR}={path})"
    print(f"geops: {message}", file=sys.stderr, flush=True)  # the task's log, whatever Spark's
    raise RuntimeError(message)
