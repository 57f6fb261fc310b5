"""The static side's snapshot in an app's checkpoint, as the restart tests damage or replace it
(``app.static_snapshot``)."""

from __future__ import annotations

import re
import time
from pathlib import Path

import numpy as np

from app.static.snapshot import CURRENT, Identity, new_stage, payload_name, root_of
from app.static.snapshot_writer import Built, SnapshotWriter
from geops.model import Envelopes
from geops.strategies.strategy import build_strategy
from geops.workload import generate_workload

FROM_SNAPSHOT = "read from snapshot s-"
_REBUILT = re.compile(r"snapshot \S+ does not match: (.*); rebuilding from the subscriptions "
                      r"topic$", re.M)


def rebuilt_because(log: str) -> str | None:
    """Why the app's log says it did not use its snapshot, if it says so (in its one line)."""
    found = _REBUILT.findall(log)
    assert len(found) <= 1, found
    return found[0] if found else None


def current(checkpoint: str, timeout: float = 60.0) -> Path:
    """The directory of the snapshot in force, once there is one."""
    root = root_of(checkpoint)
    deadline = time.monotonic() + timeout
    while not (root / CURRENT).exists():
        assert time.monotonic() < deadline, f"no snapshot of the static side in {root}"
        time.sleep(0.1)
    return root / (root / CURRENT).read_text().strip()


def truncate_a_payload(checkpoint: str) -> None:
    """Cut the end off the largest payload of the snapshot in force."""
    where = current(checkpoint, timeout=0)
    path = max(where.glob("p*.bin"), key=lambda p: p.stat().st_size)
    path.write_bytes(path.read_bytes()[:-100])


def put_foreign(checkpoint: str, topic: str = "another-workload") -> None:
    """Put in force a snapshot of another workload (another subscriptions topic)."""
    subs = generate_workload(seed=99, subscriptions=50, publications=1).subscriptions
    strategy = build_strategy("sPIS", subs, 16)
    root = root_of(checkpoint)
    writer = SnapshotWriter(root, Identity("geops", topic, "", "sPIS", "kdbtree", 16))
    stage = new_stage(root)
    sizes = np.zeros(strategy.num_partitions, np.int64)
    for pid in range(strategy.num_partitions):
        data = strategy.partition_payload(pid)
        (stage / payload_name(pid)).write_bytes(data)
        sizes[pid] = len(data)
    writer.built(Built(stage, {0: 0}, Envelopes.of(subs), np.zeros(len(subs), np.uint8),
                       strategy.partitioner, strategy.num_partitions, sizes))
    assert writer.wait_written(1, 30)
    writer.close()


def snapshot_ids(checkpoint: str, strategy: str, partitions: int, topic: str
                 ) -> tuple[dict[str, int], list[int], list[int]]:
    """The snapshot in force, checked as a restart checks it: its subscription offsets, the
    ids of its envelopes and the ids its payloads hold (each partition's, together)."""
    from app.static.snapshot import verify
    from geops.strategies import payload

    where = current(checkpoint, timeout=0)
    snap, why = verify(where.parent, Identity("geops", topic, "", strategy, "kdbtree",
                                              partitions), {0: 1 << 62})
    assert snap is not None, why
    held = set()
    for pid in snap.files:
        held.update(payload.decode(snap.path(pid).read_bytes())[0].ids.tolist())
    return ({str(p): e for p, e in snap.offsets.items()}, snap.envelopes.ids.tolist(),
            sorted(held))
