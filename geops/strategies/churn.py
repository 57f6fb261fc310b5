"""Subscriptions that change while the stream runs, applied incrementally to a strategy.

``LiveSubscriptions`` holds the live set of one strategy and turns each change (upserts by id,
deletes by id) into what the partitions and the router need, nothing more:

- per static partition a ``PartitionDelta`` (the subscriptions to insert: rows of the change's
  upserts, encoded once like a partition payload and shared by its partitions; and the ids to
  delete): a new subscription goes where the strategy's
  placement rule puts it (``Layout.place``: the partitioner's cells, which
  cover the whole plane, or ``id mod P``); a changed one leaves the partitions it no longer
  belongs to;
- for RIhPS and RIsPS a ``RouterDelta`` for the replicated global index;
- the DISJOINT ids and the partition sizes.

Deltas carry a sequence number. A matcher records the last one it applied (``apply_deltas``),
so a partition built from an older payload catches up, and a resident one skips what it has.
``rebase`` hands the pending deltas over, when they grow, to be folded into the payloads where
they live (``fold_deltas``, on the executors: the delta travels, not the partition), so the
bytes that move or ship are the partition again, not its history.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from geops.model import Envelopes, Relation, Subscriptions
from geops.strategies import payload
from geops.strategies.strategy import KINDS, Layout


class Upserts:
    """The subscriptions one change upserts, encoded once for all the partitions it touches:
    pickled with the change, this shared object is written once (not once per partition), and
    a process decodes it at most once, however many of its partitions take rows of it."""

    __slots__ = ("_subs", "count", "data")

    def __init__(self, subs: Subscriptions):
        self.data = payload.encode(subs)
        self.count = len(subs)
        self._subs: Subscriptions | None = None

    def __getstate__(self) -> tuple[bytes, int]:
        return self.data, self.count

    def __setstate__(self, state: tuple[bytes, int]) -> None:
        self.data, self.count = state
        self._subs = None

    def subscriptions(self) -> Subscriptions:
        if self._subs is None:
            self._subs = payload.decode(self.data)[0]
        return self._subs


@dataclass(frozen=True)
class PartitionDelta:
    """Change ``seq`` of one static partition: subscriptions to upsert, ids to delete."""

    seq: int
    upserts: Upserts | None        # the change's upserted subscriptions (all its partitions')
    rows: np.ndarray               # int32: which of them this partition takes
    deletes: np.ndarray            # int64 ids

    @classmethod
    def of(cls, seq: int, upserts: Subscriptions, deletes: np.ndarray) -> PartitionDelta:
        """A delta upserting all of ``upserts`` (tests, one-partition changes)."""
        return cls(seq, Upserts(upserts) if len(upserts) else None,
                   np.arange(len(upserts), dtype=np.int32), np.asarray(deletes, np.int64))

    def subscriptions(self) -> Subscriptions | None:
        """The subscriptions this partition upserts, or None."""
        if self.upserts is None or not len(self.rows):
            return None
        return self.upserts.subscriptions().take(self.rows)

    @property
    def nbytes(self) -> int:
        """What it holds: its rows' share of the change's upserts, and its deletes."""
        share = (len(self.upserts.data) * len(self.rows) // max(1, self.upserts.count)
                 if self.upserts is not None else 0)
        return share + self.rows.nbytes + self.deletes.nbytes


@dataclass(frozen=True)
class RouterDelta:
    """Change ``seq`` of the replicated (partition, id) index of RIhPS / RIsPS."""

    seq: int
    ids: np.ndarray                # upserted entries: ids, bounds (n, 4), partitions
    bounds: np.ndarray
    partitions: np.ndarray
    deletes: np.ndarray            # ids whose entries go away (before the upserts)


@dataclass
class ChangeResult:
    """What one change did: the deltas made, and how many subscriptions it added/removed."""

    partitions: dict[int, PartitionDelta] = field(default_factory=dict)
    router: RouterDelta | None = None
    added: int = 0
    updated: int = 0
    removed: int = 0


class LiveSubscriptions:
    """The live subscriptions of a strategy, changed incrementally.

    Given ``Subscriptions`` it keeps their shapes too (the live set and its partitions can be
    read back: offline runs, tests); given ``Envelopes`` (the app's driver) it keeps what
    placing and routing need only, per id: its envelope, relation and partitions.
    """

    def __init__(self, strategy: Layout, subs: Subscriptions | Envelopes):
        self.strategy = strategy
        self.seq = 0
        envelopes = subs if isinstance(subs, Envelopes) else Envelopes.of(subs)
        self._geoms: dict[int, object] | None = (
            None if isinstance(subs, Envelopes)
            else dict(zip(subs.ids.tolist(), subs.geoms, strict=True)))
        n = len(envelopes)
        self._row: dict[int, int] = dict(zip(envelopes.ids.tolist(), range(n), strict=True))
        self._bounds = envelopes.bounds.copy()
        self._relations = envelopes.relations.copy()
        self._free: list[int] = []
        index, pids = strategy.place(envelopes)
        self._places: dict[int, tuple[int, ...]] = {}
        ids = envelopes.ids[index].tolist()
        for sid, pid in zip(ids, pids.tolist(), strict=True):
            self._places[sid] = (*self._places.get(sid, ()), pid)
        self._sizes = np.bincount(pids, minlength=strategy.num_partitions).astype(np.int64)
        self._disjoint = set(envelopes.ids[envelopes.relations == Relation.DISJOINT].tolist())
        self.pending: dict[int, list[PartitionDelta]] = {}
        self.router_pending: list[RouterDelta] = []

    def __len__(self) -> int:
        return len(self._row)

    @property
    def has_router_index(self) -> bool:
        return KINDS[self.strategy.name].candidates

    def disjoint_ids(self) -> np.ndarray:
        """Sorted ids of the live DISJOINT subscriptions."""
        return np.array(sorted(self._disjoint), np.int64)

    def partition_sizes(self) -> np.ndarray:
        """Live subscriptions per partition (replicas count in each)."""
        return self._sizes.copy()

    def _shapes(self) -> dict[int, object]:
        if self._geoms is None:
            raise RuntimeError("this live set keeps envelopes only, not the subscriptions' "
                               "shapes")
        return self._geoms

    def _take(self, ids: list[int]) -> Subscriptions:
        geoms = self._shapes()
        rows = np.array([self._row[i] for i in ids], np.int64)
        return Subscriptions(np.array(ids, np.int64), np.array([geoms[i] for i in ids], object),
                             self._relations[rows])

    def subscriptions(self) -> Subscriptions:
        """The live set, sorted by id (only when built with the shapes)."""
        return self._take(sorted(self._row))

    def partition_subscriptions(self, pid: int) -> Subscriptions:
        """The live subscriptions of partition ``pid``, sorted by id (only when built with the
        shapes)."""
        return self._take(sorted(i for i, places in self._places.items() if pid in places))

    def _forget(self, sid: int) -> None:
        self._free.append(self._row.pop(sid))
        if self._geoms is not None:
            del self._geoms[sid]
        self._disjoint.discard(sid)

    def _keep(self, sid: int, bounds: np.ndarray, relation: int, geom: object) -> None:
        row = self._row.get(sid)
        if row is None:
            if not self._free:
                grow = max(16, len(self._relations))
                self._free = list(range(len(self._relations) + grow - 1,
                                        len(self._relations) - 1, -1))
                self._bounds = np.concatenate([self._bounds, np.zeros((grow, 4))])
                self._relations = np.concatenate([self._relations, np.zeros(grow, np.int8)])
            row = self._row[sid] = self._free.pop()
        self._bounds[row] = bounds
        self._relations[row] = relation
        if self._geoms is not None:
            self._geoms[sid] = geom
        if relation == Relation.DISJOINT:
            self._disjoint.add(sid)
        else:
            self._disjoint.discard(sid)

    def apply(self, upserts: Subscriptions, deletes: np.ndarray) -> ChangeResult:
        """Apply one change: ``deletes`` (ids; unknown ones are ignored), then ``upserts``
        (a known id is replaced). An id in both ends up upserted."""
        upserts = _last_per_id(upserts)
        deletes = np.setdiff1d(np.asarray(deletes, np.int64), upserts.ids)
        self.seq += 1
        out = ChangeResult()
        gone: dict[int, list[int]] = {}
        router_gone = []
        for sid in deletes.tolist():
            places = self._places.pop(sid, None)
            if places is None:
                continue
            out.removed += 1
            router_gone.append(sid)
            for pid in places:
                gone.setdefault(pid, []).append(sid)
                self._sizes[pid] -= 1
            self._forget(sid)
        envelopes = Envelopes.of(upserts)
        index, pids = self.strategy.place(envelopes)
        new_places: dict[int, tuple[int, ...]] = {}
        for sid, pid in zip(upserts.ids[index].tolist(), pids.tolist(), strict=True):
            new_places[sid] = (*new_places.get(sid, ()), pid)
        added: dict[int, list[int]] = {}
        for row, sid in enumerate(upserts.ids.tolist()):
            old = self._places.get(sid)
            places = new_places.get(sid, ())
            if old is None:
                out.added += 1
            else:
                out.updated += 1
                router_gone.append(sid)
                for pid in set(old) - set(places):
                    gone.setdefault(pid, []).append(sid)
                for pid in old:
                    self._sizes[pid] -= 1
            for pid in places:
                added.setdefault(pid, []).append(row)
                self._sizes[pid] += 1
            self._places[sid] = places
            self._keep(sid, envelopes.bounds[row], int(upserts.relations[row]),
                       upserts.geoms[row])
        shared = Upserts(upserts) if added else None
        for pid in sorted(set(gone) | set(added)):
            rows = np.array(added.get(pid, []), np.int32)
            delta = PartitionDelta(self.seq, shared if len(rows) else None, rows,
                                   np.array(sorted(gone.get(pid, [])), np.int64))
            out.partitions[pid] = delta
            self.pending.setdefault(pid, []).append(delta)
        if self.has_router_index and (len(index) or router_gone):
            out.router = RouterDelta(self.seq, upserts.ids[index], envelopes.bounds[index],
                                     pids.astype(np.int32),
                                     np.array(sorted(set(router_gone)), np.int64))
            self.router_pending.append(out.router)
        return out

    def router(self):
        """A new replicated router over the live set (RIhPS / RIsPS), all changes included."""
        from geops.strategies.routers import CandidateRouter

        ids = np.array(sorted(self._places), np.int64)
        pids = np.array([self._places[i][0] for i in ids.tolist()], np.int32)
        rows = np.array([self._row[i] for i in ids.tolist()], np.int64)
        return CandidateRouter(ids, self._bounds[rows].reshape(-1, 4), pids,
                               self.strategy.num_partitions)

    def pending_bytes(self) -> int:
        return sum(d.nbytes for deltas in self.pending.values() for d in deltas)

    def rebase(self, upto: int | None = None) -> dict[int, tuple[PartitionDelta, ...]]:
        """The pending deltas up to change ``upto`` (default: all) of every partition that has
        some, to fold into its payload where the payload lives (``fold_deltas``); they are
        dropped here, newer ones stay pending."""
        upto = self.seq if upto is None else upto
        out: dict[int, tuple[PartitionDelta, ...]] = {}
        for pid in sorted(self.pending):
            deltas = self.pending[pid]
            folded = tuple(d for d in deltas if d.seq <= upto)
            if folded:
                out[pid] = folded
            rest = [d for d in deltas if d.seq > upto]
            if rest:
                self.pending[pid] = rest
            else:
                del self.pending[pid]
        return out

    def fold_point(self, keep_changes: int, keep_bytes: int) -> int:
        """The change up to which to rebase so that the newest ``keep_changes`` changes stay
        pending, as long as they hold at most ``keep_bytes``: resident matchers that applied
        them stay current instead of rebuilding from the rebased payload."""
        by_seq: dict[int, int] = {}
        for deltas in self.pending.values():
            for d in deltas:
                by_seq[d.seq] = by_seq.get(d.seq, 0) + d.nbytes
        upto, kept = self.seq, 0
        for seq in sorted(by_seq, reverse=True)[:keep_changes]:
            kept += by_seq[seq]
            if kept > keep_bytes:
                break
            upto = seq - 1
        return upto

    def payload(self, pid: int) -> bytes:
        """Partition ``pid``'s payload as of now (all changes included)."""
        cell = (payload.WHOLE_PLANE if self.strategy.partitioner is None
                else self.strategy.partitioner.cells[pid])
        return payload.encode(self.partition_subscriptions(pid), cell)


def apply_deltas(matcher, deltas: tuple[PartitionDelta, ...] | list[PartitionDelta],
                 applied: int) -> int:
    """Bring a partition matcher from change ``applied`` up to the newest of ``deltas``;
    returns the sequence number it is now at.

    The deltas it has not applied yet are merged first (per id, the last change wins), so a
    matcher that missed batches catches up with one delete and one insert, as cheaply as with
    one batch's change: a worker's tasks do not always run in the same Python process."""
    todo = [d for d in deltas if d.seq > applied]
    if not todo:
        return applied
    ids, rows, upserts = [], [], []
    count = 0
    for delta in todo:  # in order: a delta's deletes, then its upserts (row -1: a delete)
        ids.append(np.asarray(delta.deletes, np.int64))
        rows.append(np.full(len(delta.deletes), -1, np.int64))
        subs = delta.subscriptions()
        if subs is not None:
            ids.append(subs.ids)
            rows.append(np.arange(count, count + len(subs), dtype=np.int64))
            upserts.append(subs)
            count += len(subs)
    all_ids, all_rows = np.concatenate(ids), np.concatenate(rows)
    unique, first_of_reversed = np.unique(all_ids[::-1], return_index=True)
    last = all_rows[len(all_ids) - 1 - first_of_reversed]  # each id's last event
    keep = np.sort(last[last >= 0])
    matcher.update(unique[last < 0],
                   Subscriptions.concat(upserts).take(keep) if len(keep) else None)
    return todo[-1].seq


def fold_deltas(data: bytes, deltas: tuple[PartitionDelta, ...] | list[PartitionDelta]
                ) -> bytes:
    """A partition payload with ``deltas`` applied (deletes, then upserts replacing their id),
    its subscriptions sorted by id: the bytes ``LiveSubscriptions.payload`` gives after them."""
    subs, cell = payload.decode(data)
    ids, geoms, rels = subs.ids, subs.geoms, subs.relations
    for delta in deltas:
        gone = np.asarray(delta.deletes, np.int64)
        upserts = delta.subscriptions()
        if upserts is not None:
            gone = np.union1d(gone, upserts.ids)
        keep = ~np.isin(ids, gone)
        ids, geoms, rels = ids[keep], geoms[keep], rels[keep]
        if upserts is not None:
            ids = np.concatenate([ids, upserts.ids])
            geoms = np.concatenate([geoms, upserts.geoms])
            rels = np.concatenate([rels, upserts.relations])
    order = np.argsort(ids, kind="stable")
    return payload.encode(Subscriptions(ids[order], geoms[order], rels[order]), cell)


def apply_router_deltas(index, deltas: tuple[RouterDelta, ...] | list[RouterDelta],
                        applied: int, partitions: np.ndarray | None = None) -> int:
    """Bring a replicated global index from change ``applied`` up to the newest delta; an
    index of some ``partitions`` only takes the entries of those (a subscription that changed
    to another partition leaves it)."""
    for delta in deltas:
        if delta.seq <= applied:
            continue
        if len(delta.deletes):
            index.delete(delta.deletes)
        if len(delta.ids):
            inside = (np.ones(len(delta.ids), bool) if partitions is None
                      else np.isin(delta.partitions, partitions))
            if not inside.all():
                index.delete(delta.ids[~inside])
            if inside.any():
                index.insert(delta.ids[inside], delta.bounds[inside], delta.partitions[inside])
        applied = delta.seq
    return applied


def _last_per_id(subs: Subscriptions) -> Subscriptions:
    """One row per id, the last one given (a later record of an id wins)."""
    if len(subs) == 0:
        return subs
    _, last = np.unique(subs.ids[::-1], return_index=True)
    keep = np.sort(len(subs) - 1 - last)
    return subs.take(keep)
