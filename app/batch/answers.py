"""Which join task answers each publication when the tasks write their own matches.

A publication's ``Match`` record lists every subscription it matched, from every partition its
items reached (and the DISJOINT subscriptions none of them excluded), so exactly one place may
write it, with all its partial matches at hand. The task that routes a publication sees every
worker its items go to (``span_records``): one whose items all go to one worker is that
worker's to answer; one that reaches no partition is answered by worker ``key mod W``; one
whose items go to several workers, or a position of a moving object (the driver derives the
geofence state from its matches), is *shared*: its partial matches go to the driver, which
merges them. ``LocalAnswers`` is the join task's side: it keeps the partial matches of the
publications it answers and hands the shared ones on.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from app.records import Matched, Presence, Shared, Unrouted
from geops.strategies import PartialMatches, merge
from schemas.assignment import owner_index


def item_workers(partition: np.ndarray, keys: np.ndarray, assignment: tuple[int, ...],
                 replicas: dict[int, tuple[int, ...]]) -> np.ndarray:
    """The worker each item goes to: its partition's owner, or for a replicated partition the
    owner its publication key chooses (``schemas.assignment.owner_index``)."""
    workers = np.asarray(assignment, np.int64)[partition]
    for pid, owners in replicas.items():
        sel = np.flatnonzero(partition == pid)
        if len(sel):
            workers[sel] = np.asarray(owners, np.int64)[owner_index(keys[sel], len(owners))]
    return workers


def span_records(pub_index: np.ndarray, workers: np.ndarray, keys: np.ndarray, ids: np.ndarray,
                 event_ms: np.ndarray, moving: np.ndarray, n_workers: int,
                 with_presence: bool) -> Iterator[tuple[int, tuple]]:
    """(worker, record) of who answers what, for ``keys`` (ids, event times) whose items
    (``pub_index`` into them) go to ``workers``; ``moving``: indexes of positions. Each worker
    gets the ``Shared`` keys among its items; worker ``key mod W`` the ``Unrouted``
    publications and (for the driver's DISJOINT merge) the ``Presence`` of shared ones."""
    pairs = np.unique(np.asarray(pub_index, np.int64) * n_workers + workers)
    pub, worker = pairs // n_workers, pairs % n_workers
    count = np.bincount(pub, minlength=len(keys))
    shared = count > 1
    shared[moving] = True
    on_shared = shared[pub]
    for w in np.unique(worker[on_shared]):
        yield int(w), Shared(keys[pub[on_shared & (worker == w)]])
    if not with_presence:
        return
    target = keys % n_workers
    alone = (count == 0) & ~shared
    for w in np.unique(target[shared | alone]):
        here = target == w
        sel = here & shared
        if sel.any():
            yield int(w), Presence(keys[sel], ids[sel], event_ms[sel])
        sel = here & alone
        if sel.any():
            yield int(w), Unrouted(keys[sel], ids[sel], event_ms[sel])


def _pick(partial: PartialMatches, keep: np.ndarray, keep_excluded: np.ndarray
          ) -> PartialMatches:
    return PartialMatches(partial.keys[keep], partial.sub_ids[keep],
                          partial.excluded_keys[keep_excluded],
                          partial.excluded_sub_ids[keep_excluded], partial.candidates)


@dataclass
class LocalAnswers:
    """A join task's publications: those it answers and the partial matches of each."""

    shared: np.ndarray = field(default_factory=lambda: np.empty(0, np.int64))
    partials: list[PartialMatches] = field(default_factory=list)
    keys: list[np.ndarray] = field(default_factory=list)
    ids: list[np.ndarray] = field(default_factory=list)
    event_ms: list[np.ndarray] = field(default_factory=list)

    def add_shared(self, rec: Shared) -> None:
        self.shared = np.union1d(self.shared, rec.keys)

    def add_unrouted(self, rec: Unrouted) -> None:
        self.keys.append(rec.keys)
        self.ids.append(rec.ids)
        self.event_ms.append(rec.event_ms)

    def split(self, pid: int, partial: PartialMatches, keys: np.ndarray, ids: np.ndarray,
              event_ms: np.ndarray) -> Matched | None:
        """Keep partition ``pid``'s matches of the publications answered here (``keys``: its
        items'); the ``Matched`` of the shared ones, for the driver, or None."""
        mine = ~np.isin(keys, self.shared)
        self.keys.append(keys[mine])
        self.ids.append(ids[mine])
        self.event_ms.append(event_ms[mine])
        on_shared = np.isin(partial.keys, self.shared)
        ex_shared = np.isin(partial.excluded_keys, self.shared)
        self.partials.append(_pick(partial, ~on_shared, ~ex_shared))
        if not on_shared.any() and not ex_shared.any():
            return None
        found = _pick(partial, on_shared, ex_shared)
        matched = np.unique(found.keys)
        order = np.argsort(keys, kind="stable")
        pos = order[np.searchsorted(keys, matched, sorter=order)]
        return Matched(pid, found, matched, ids[pos], event_ms[pos])

    def answers(self, disjoint: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(keys, ids, event times, CSR offsets, subscription ids) of every publication answered
        here that matched something, DISJOINT subscriptions included."""
        if not self.keys:
            empty = np.empty(0, np.int64)
            return empty, empty, empty, np.zeros(1, np.int64), empty
        keys, first = np.unique(np.concatenate(self.keys), return_index=True)
        ids = np.concatenate(self.ids)[first]
        times = np.concatenate(self.event_ms)[first]
        mkeys, offsets, sub_ids = merge(keys if len(disjoint) else np.empty(0, np.int64),
                                        self.partials, disjoint)
        pos = np.searchsorted(keys, mkeys)
        return mkeys, ids[pos], times[pos], offsets, sub_ids
