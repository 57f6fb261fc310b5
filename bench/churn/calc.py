"""Pure computations of `geops bench churn`: the mix of subscription changes, a fast
Subscription encoder, the order of the levels, the CPU a level used, time-to-effect, and the
ratios against the level without changes.

Nothing here touches Kafka, processes or the clock (tests/bench/test_churn_bench.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from bench.harness.encoding import zigzag_varint
from bench.harness.latency import latency_summary

NEW, UPDATE, TOMBSTONE = 0, 1, 2
OPS = ("new", "update", "tombstone")
BLOCK = 4096  # random draws made at a time


# -- the changes -----------------------------------------------------------------------------

class ChangeMix:
    """The next subscription change: a new id, an update of a live id (a new geometry and a
    different relation) or a tombstone of a live id, drawn with ``shares`` (new, update,
    tombstone). It follows the live set it creates, so updates and tombstones always name a
    live id; with equal new and tombstone shares the set keeps its size. With no live id left
    an update or tombstone becomes a new subscription.

    ``next()`` gives (op, id, geometry index in [0, n_geoms), relation code or -1 for a
    tombstone).
    """

    def __init__(self, live: Mapping[int, int], n_geoms: int, relations: Sequence[int],
                 shares: tuple[float, float, float] = (0.25, 0.5, 0.25), seed: int = 0):
        total = float(sum(shares))
        if total <= 0 or min(shares) < 0 or len(shares) != 3:
            raise ValueError(f"shares must be three non-negative numbers, got {shares}")
        if n_geoms < 1 or len(relations) < 2:
            raise ValueError("need at least one geometry and two relations")
        self.cum = np.cumsum(np.asarray(shares, float) / total)
        self.n_geoms = n_geoms
        self.relations = tuple(int(r) for r in relations)
        self._rel_index = {r: i for i, r in enumerate(self.relations)}
        self.ids: list[int] = list(live)           # live ids, for a choice in O(1)
        self.pos = {sid: i for i, sid in enumerate(self.ids)}
        self.relation = dict(live)                 # id -> relation code
        self.next_id = max(self.ids, default=-1) + 1
        self.rng = np.random.default_rng(seed)
        self.counts = [0, 0, 0]
        self._geom = 0
        self._k = BLOCK

    def _draws(self) -> None:
        self._ops = np.searchsorted(self.cum, self.rng.random(BLOCK), side="right").tolist()
        self._picks = self.rng.random(BLOCK).tolist()
        self._rels = self.rng.integers(0, len(self.relations), BLOCK).tolist()
        self._k = 0

    def __len__(self) -> int:
        return len(self.ids)

    def next(self) -> tuple[int, int, int, int]:
        if self._k >= BLOCK:
            self._draws()
        k = self._k
        self._k += 1
        op = min(self._ops[k], TOMBSTONE)
        if op != NEW and not self.ids:
            op = NEW
        self.counts[op] += 1
        if op == TOMBSTONE:
            sid = self.ids[int(self._picks[k] * len(self.ids))]
            self._remove(sid)
            return op, sid, -1, -1
        geom = self._geom
        self._geom = (geom + 1) % self.n_geoms
        if op == NEW:
            sid = self.next_id
            self.next_id += 1
            rel = self.relations[self._rels[k]]
            self.pos[sid] = len(self.ids)
            self.ids.append(sid)
        else:
            sid = self.ids[int(self._picks[k] * len(self.ids))]
            # a relation other than the current one
            cur = self._rel_index.get(self.relation[sid], 0)
            step = 1 + self._rels[k] % (len(self.relations) - 1)
            rel = self.relations[(cur + step) % len(self.relations)]
        self.relation[sid] = rel
        return op, sid, geom, rel

    def _remove(self, sid: int) -> None:
        i = self.pos.pop(sid)
        last = self.ids.pop()
        if last != sid:
            self.ids[i] = last
            self.pos[last] = i
        del self.relation[sid]


def subscription_bytes(header: bytes, sid: int, geometry_field: bytes, relation: int) -> bytes:
    """A single-object-encoded Subscription, as ``codec().encode("Subscription", ...)`` makes
    it, from the schema header, the pre-encoded geometry field and the relation's code (the
    Avro enum's index); a plain subscription (an empty ``detect`` array, a null
    ``distance_m`` and a null ``roam``)."""
    return (header + zigzag_varint(sid) + geometry_field + zigzag_varint(relation)
            + b"\x00\x00\x00")


# -- the plan --------------------------------------------------------------------------------

def level_order(levels: Sequence[float], rounds: int) -> list[tuple[int, float]]:
    """(round, change rate) in the order they run: even rounds as given, odd rounds reversed,
    so a drift over the run (heat, other load) does not favour any level."""
    out = []
    for r in range(rounds):
        seq = list(levels) if r % 2 == 0 else list(reversed(levels))
        out.extend((r, lv) for lv in seq)
    return out


# -- CPU -------------------------------------------------------------------------------------

def cpu_use(publications: int, app_cpu_s: float, broker_cpu_s: float) -> dict:
    """CPU the app's processes and the broker used over a level (offer and drain), and the
    app's publications per CPU second: a cost measure that other work on the machine
    disturbs much less than wall-clock time does."""
    return {"app_cpu_s": app_cpu_s, "broker_cpu_s": broker_cpu_s,
            "app_cpu_ms_per_1k": app_cpu_s * 1e6 / publications if publications else None,
            "pub_per_cpu_s": publications / app_cpu_s if app_cpu_s > 0 else None}


# -- time to effect --------------------------------------------------------------------------

@dataclass
class Effect:
    """Per change: the start time of the first batch that used it (NaN: none did, censored)
    and how many batches started after the write up to and including that one (1 = the next
    batch; 0 = a batch that had started already but read the subscriptions after the write)."""

    effect_ms: np.ndarray    # float64, epoch ms or NaN
    batches: np.ndarray      # float64, or NaN

    @property
    def censored(self) -> int:
        return int(np.isnan(self.effect_ms).sum())


def batch_table(batches: Iterable[Mapping]) -> list[Mapping]:
    """BatchSummaries in batch order, one per batch id (the earliest start of a replay)."""
    first: dict[int, Mapping] = {}
    for b in batches:
        bid = int(b["batch_id"])
        if bid not in first or b["start_time"] < first[bid]["start_time"]:
            first[bid] = b
    return [first[k] for k in sorted(first)]


def time_to_effect(written_ms: np.ndarray, partitions: np.ndarray, offsets: np.ndarray,
                   batches: Iterable[Mapping]) -> Effect:
    """A change written at ``written_ms`` to (partition, offset) of the subscriptions topic
    takes effect in the first batch whose ``subscription_offsets[partition]`` (the next offset
    after what the batch was matched against) exceeds the offset; its effect time is that
    batch's ``start_time``."""
    written_ms = np.asarray(written_ms, np.float64)
    partitions = np.asarray(partitions, np.int64)
    offsets = np.asarray(offsets, np.int64)
    table = batch_table(batches)
    effect = np.full(len(offsets), np.nan)
    waited = np.full(len(offsets), np.nan)
    if not table or not len(offsets):
        return Effect(effect, waited)
    starts = np.array([b["start_time"] for b in table], np.float64)
    started = np.maximum.accumulate(starts)  # batches run one after another
    for p in np.unique(partitions).tolist():
        ends = np.array([int((b.get("subscription_offsets") or {}).get(str(p), 0))
                         for b in table], np.int64)
        ends = np.maximum.accumulate(ends)
        sel = partitions == p
        idx = np.searchsorted(ends, offsets[sel], side="right")
        ok = idx < len(table)
        rows = np.flatnonzero(sel)[ok]
        effect[rows] = starts[idx[ok]]
        before = np.searchsorted(started, written_ms[rows], side="right")
        waited[rows] = np.maximum(idx[ok] - before + 1, 0)
    return Effect(effect, waited)


def effect_summary(written_ms: np.ndarray, effect: Effect, trigger_ms: float) -> dict:
    """p50/p99/max of the time to effect in ms, in triggers (ms / trigger interval) and in
    batches, over the changes that took effect; how many did not (censored)."""
    ok = ~np.isnan(effect.effect_ms)
    ms = effect.effect_ms[ok] - np.asarray(written_ms, np.float64)[ok]
    s = latency_summary(ms)
    b = latency_summary(effect.batches[ok])
    return {"changes": len(ok), "effective": int(ok.sum()), "censored": effect.censored,
            "tte_p50_ms": s["p50"], "tte_p99_ms": s["p99"], "tte_max_ms": s["max"],
            "tte_p50_triggers": _div(s["p50"], trigger_ms),
            "tte_p99_triggers": _div(s["p99"], trigger_ms),
            "tte_max_triggers": _div(s["max"], trigger_ms),
            "tte_p50_batches": b["p50"], "tte_p99_batches": b["p99"], "tte_max_batches": b["max"]}


def _div(v: float | None, d: float) -> float | None:
    return None if v is None or d <= 0 else v / d


# -- against the level without changes -------------------------------------------------------

RATIO_KEYS = (("processed_rate", "throughput_ratio"), ("per_busy_s", "capacity_ratio"),
              ("pub_per_cpu_s", "cpu_ratio"))


def with_ratios(rows: Sequence[dict], keys: Sequence[str],
                group: Sequence[str] = ("strategy", "join")) -> list[dict]:
    """Rows (one per round and level) reduced to one per group and change rate: the mean over
    rounds of each of ``keys``, and the ratio of the means of ``processed_rate``
    (``throughput_ratio``), ``per_busy_s`` (``capacity_ratio``) and ``pub_per_cpu_s``
    (``cpu_ratio``) to the same group's at 0 changes/s."""
    cells: dict[tuple, dict[float, list[dict]]] = {}
    for r in rows:
        key = tuple(r[g] for g in group)
        cells.setdefault(key, {}).setdefault(float(r["change_rate"]), []).append(r)
    out = []
    for key, levels in cells.items():
        means = {lv: {k: _mean([r.get(k) for r in rs]) for k in keys}
                 for lv, rs in sorted(levels.items())}
        base = means.get(0.0, {})
        for lv, m in means.items():
            for src, dst in RATIO_KEYS:
                b, v = base.get(src), m.get(src)
                m[dst] = v / b if b and v is not None else None
            out.append({**dict(zip(group, key, strict=True)), "change_rate": lv,
                        "rounds": len(levels[lv]), **m})
    return out


def _mean(values: Iterable[float | None]) -> float | None:
    vals = [float(v) for v in values if v is not None and np.isfinite(v)]
    return float(np.mean(vals)) if vals else None
