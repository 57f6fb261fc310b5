"""The epoch protocol of the distributor: which assignment epoch is in force and who owns what.

The engine judges only the loads of the assignment epoch in force; records of older epochs are
counted and ignored. After it commands epoch e+1 it waits (decision ``waiting``) until the app
reports e+1. If the app reports an epoch newer than the engine's (another distributor, or a
restart that could not read the control topic), the engine adopts it and learns that epoch's
assignment from the ``worker`` of the records. The next command's epoch is always one more than
the highest epoch seen, so an epoch is never reused. A restore, an adoption and a command all
start the N-period cool-down.

The engine never waits forever. When the app has not reported an awaited epoch (commanded, or
restored from the control topic) within ``resync_periods`` periods but does report an older one
(it rejected the command, e.g. a forged one with workers it does not have, or never received
it), the period's decision is ``resync``: the engine goes back to the newest epoch the app
reports, with the assignment its records show (learnt from their ``worker`` if not every
partition reported yet), and judges that epoch's loads again; its next command still gets an
epoch above every epoch seen, so the app, which applies only newer epochs, accepts it. Epochs
are Avro longs: an epoch of 2**63 - 1 leaves no room for a newer command (``LAST_EPOCH``).

``Epochs`` holds this state and answers from it; the engine changes the epoch through it and
starts its loads over whenever it does.
"""

from __future__ import annotations

from collections.abc import Sequence

from distributor.loads import LONG_MAX, EpochLoads
from schemas.assignment import Owners, initial_assignment

# The last epoch an Avro long holds: no command can follow it, so no input may bring it.
LAST_EPOCH = LONG_MAX


def last_epoch_reason(epoch: int) -> str:
    """Why ``epoch`` cannot be used: no newer command could follow it."""
    return (f"epoch {epoch} is the last (or beyond the last) an Avro long holds: no newer "
            f"command could follow it")


class Epochs:
    """The epoch in force, the highest seen, its owners, and the wait for an epoch commanded."""

    def __init__(self) -> None:
        self.epoch = 0
        self.highest = 0              # the highest epoch restored, adopted or commanded
        self.adopted: int | None = None  # the last epoch adopted from the app's records
        self.owners: list[Owners] | None = None   # per partition, primary first
        self.learnt = False           # owners learnt from the loads (not commanded/restored)
        # While awaiting: the newest older epoch the app still reports, and where its loads put
        # each partition (partition -> workers); what a resync goes back to.
        self.reported: int | None = None
        self.reported_locations: dict[int, set[int]] = {}
        self.awaiting = False         # commanded or restored an epoch the app has not reported
        self.changed_at: int | None = None  # period of the last assignment change

    def change(self, epoch: int, owners: Sequence[Owners] | None, period: int,
               shape: tuple[int, int] | None) -> None:
        """Make ``epoch`` the one in force from ``period`` on, with ``owners`` (None: to be
        learnt; epoch 0 of a known shape (P, W) starts from the initial assignment)."""
        self.epoch = epoch
        self.highest = max(self.highest, epoch)
        self.owners = None if owners is None else [tuple(o) for o in owners]
        self.learnt = False
        self.reported, self.reported_locations = None, {}
        if owners is None and epoch == 0 and shape is not None:
            self.owners = [(w,) for w in initial_assignment(*shape)]
        self.awaiting = False
        self.changed_at = period

    def note_reported(self, epoch: int, partition: int | None = None,
                      worker: int | None = None) -> None:
        """While awaiting, remember the newest older epoch the app reports and, from its loads,
        which worker runs each partition."""
        if not self.awaiting:
            return
        if self.reported is None or epoch > self.reported:
            self.reported, self.reported_locations = epoch, {}
        if epoch == self.reported and partition is not None and worker is not None:
            self.reported_locations.setdefault(partition, set()).add(worker)

    def known_owners(self, loads: EpochLoads | None, partitions: int | None
                     ) -> list[Owners] | None:
        """The owners in force, completing learnt ones once every partition reported (a
        partition reported by several workers in this epoch is replicated); learnt owners
        follow the loads as more workers report."""
        if loads is not None and (self.owners is None or self.learnt) and (
                len(loads.reporters) == partitions):
            assert partitions is not None
            self.owners = [loads.owners(p) for p in range(partitions)]
            self.learnt = True
        return self.owners

    def since(self, period: int) -> int | None:
        """Periods since the last assignment change, None before any."""
        return None if self.changed_at is None else period - self.changed_at

    def waiting(self, period: int, limit: int, partitions: int | None) -> tuple[str, str]:
        """The decision while awaiting ``epoch``: go on waiting, or resync once it took
        ``limit`` periods and the app reports an older epoch to go back to."""
        since = self.since(period) or 0
        waiting = f"the app has not reported epoch {self.epoch} for {since} period(s)"
        if since < limit:
            return "waiting", (f"waiting for the app to report epoch {self.epoch} ({since} "
                               f"period(s) so far; re-synchronising after {limit})")
        if self.reported is None:
            return "waiting", (f"{waiting} and reports no other epoch either: nothing to "
                               f"re-synchronise with; still waiting")
        assert partitions is not None
        seen = len(self.reported_locations)
        known = ("its assignment as the loads show it" if seen == partitions else
                 f"its assignment to be learnt from its loads ({seen} of {partitions} "
                 f"partitions seen)")
        return "resync", (f"{waiting} (limit {limit}; did it reject the command?) but reports "
                          f"epoch {self.reported}: re-synchronised with epoch {self.reported} "
                          f"and {known}; the next command gets epoch {self.highest + 1}")

    def resync_owners(self, partitions: int | None) -> list[Owners] | None:
        """The owners of the reported epoch a resync goes back to, None while not every
        partition reported."""
        assert self.reported is not None and partitions is not None
        where = self.reported_locations
        return ([tuple(sorted(where[p])) for p in range(partitions)]
                if len(where) == partitions else None)
