"""The dashboard's view of one app, folded from its records period by period, without Kafka.

``View.step`` takes what one period brought (the metrics, the distributor's statuses, the
control topic's commands, a sample of publication points) and keeps:

- the time series: one ``dashboard.periods.Row`` per period (the figures of
  `geops stats --follow`) plus each worker's load, for ``history_s``;
- the map: the newest ``PartitionLayout`` (the cells), the owners of each partition under the
  epoch in force (the newest command of that epoch, or the initial assignment for epoch 0), the
  load of each partition over the last ``window_s`` and the publications of that window;
- the rebalances (commands, with the app's MoveReport once it applied one), the distributor's
  last status, and what is wrong with Kafka, if anything (a banner, not a crash).

``state()``, ``map()`` and ``series()`` give the JSON documents the server publishes; their
fields are described in docs/dashboard.md.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from dashboard.periods import Follower, Period, Row
from schemas.assignment import initial_assignment, owners_of

MAX_POINTS = 3000      # publication points on the map at most (sampled evenly beyond)
MAX_REBALANCES = 50    # rebalances listed at most (the newest)


@dataclass
class Window:
    """The loads and points of one period, kept while it is within the map's window."""

    time_ms: int
    loads: dict[tuple[int, int], tuple[float, int]]  # (partition, worker) -> (ns, items)
    points: np.ndarray                                # (n, 2) x, y: a sample
    publications: int                                 # publications that arrived


def _split(timed: Sequence[tuple[int, str, str, dict]]
           ) -> tuple[list[tuple[str, dict]], list[dict], list[dict]]:
    """(metrics as (name, record), DistributorStatus records, RebalanceCommand records)."""
    metrics = [(n, r) for _, kind, n, r in timed if kind == "metrics"]
    statuses = [r for _, kind, n, r in timed if kind == "status" and n == "DistributorStatus"]
    commands = [r for _, kind, n, r in timed if kind == "control" and n == "RebalanceCommand"]
    return metrics, statuses, commands


def _num(value: float | None, digits: int = 3) -> float | None:
    """A float for JSON: rounded, None stays None (NaN too)."""
    if value is None or value != value:
        return None
    return round(float(value), digits)


class View:
    """What the dashboard shows of app ``app_id``; see the module docstring."""

    def __init__(self, app_id: str, *, period_s: float = 1.0, history_s: float = 600.0,
                 window_s: float = 5.0):
        self.app_id = app_id
        self.period_s = period_s
        self.history_s = history_s
        self.window_s = window_s
        self.follower = Follower(app_id)
        self.rows: deque[Row] = deque()
        self.thresholds: deque[float | None] = deque()
        self.windows: deque[Window] = deque()
        self.layout: dict[str, Any] | None = None
        self.commands: dict[int, dict[str, Any]] = {}   # epoch -> newest command of the app
        self.moves: dict[int, dict[str, Any]] = {}      # epoch -> the app's MoveReport
        self.status: dict[str, Any] | None = None       # the distributor's newest
        self.batch: dict[str, Any] | None = None        # the app's newest BatchSummary
        self.epoch: int | None = None
        self.workers: int | None = None
        self.problem: str | None = None                 # Kafka unreachable, topic missing, ...
        self.now_ms = 0

    # -- folding --------------------------------------------------------------------------

    def remember(self, metrics: Iterable[tuple[str, dict]] = (),
                 statuses: Iterable[dict] = (), commands: Iterable[dict] = ()) -> None:
        """Fold records into the state (layout, epoch, commands, status) without a period:
        for records older than the series, e.g. the control topic's history at start."""
        for name, r in metrics:
            if r.get("app_id") != self.app_id:
                continue
            if name == "PartitionLayout":
                if self.layout is None or r["time"] >= self.layout["time"]:
                    self.layout = r
                    self.workers = self.workers or r["workers"]
            elif name == "BatchSummary":
                self.batch = r
                self.epoch, self.workers = r["epoch"], r["workers"]
            elif name == "MoveReport":
                self.moves[r["epoch"]] = r
        for r in statuses:
            self.status = r
        for r in commands:
            if r.get("app_id", "") in (self.app_id, ""):
                self.commands[r["epoch"]] = r

    def step(self, period: Period, statuses: Sequence[dict] = (),
             commands: Sequence[dict] = (), points: np.ndarray | None = None,
             publications: int | None = None) -> Row:
        """Fold one period: its figures (``Follower.step``), loads, records, and where its
        ``publications`` (default: as many as ``points``) lay, ``points`` being a sample."""
        self.remember(period.metrics, statuses, commands)
        row = self.follower.step(period)
        if row.epoch is not None:
            self.epoch = row.epoch
        self.now_ms = period.time_ms
        self.rows.append(row)
        self.thresholds.append(None if self.status is None else self.status["threshold"])
        loads: dict[tuple[int, int], tuple[float, int]] = {}
        for name, r in period.metrics:
            if name == "PartitionLoad" and r["app_id"] == self.app_id:
                ns, items = loads.get((r["partition"], r["worker"]), (0.0, 0))
                loads[(r["partition"], r["worker"])] = (ns + r["processing_ns"],
                                                         items + r["items"])
        pts = np.empty((0, 2)) if points is None else np.asarray(points, float).reshape(-1, 2)
        self.windows.append(Window(period.time_ms, loads, pts,
                                   len(pts) if publications is None else publications))
        self._forget(period.time_ms)
        return row

    def replay(self, timed: Iterable[tuple[int, str, str, dict]], now_ms: int,
               topic_ends: Mapping[int, Mapping[int, int]] | None = None) -> None:
        """Fold records read back from Kafka, ``(timestamp ms, topic kind, schema name,
        record)`` with the kind ``metrics``, ``status`` or ``control``, into periods ending at
        multiples of the period (the last one at ``now_ms``), from the first record within the
        history on; older records only into the state (``remember``). ``topic_ends``: the
        publications topic's end offsets at some of those period ends (``replay_ends``), from
        which the input rate and lag of the past periods follow; elsewhere they are unknown."""
        ordered = sorted(timed, key=lambda t: t[0])
        since = now_ms - self.history_s * 1000
        old = [t for t in ordered if t[0] < since]
        recent = [t for t in ordered if t[0] >= since]
        self.remember(*_split(old))
        if not recent:
            self.now_ms = max(self.now_ms, now_ms)
            return
        step_ms = self.period_s * 1000
        first = recent[0][0] // step_ms * step_ms
        begin, n, i = first, 1, 0
        while begin < now_ms:
            end = min(first + n * step_ms, now_ms)
            j = i
            while j < len(recent) and recent[j][0] <= end:
                j += 1
            metrics, statuses, commands = _split(recent[i:j])
            ends = (topic_ends or {}).get(round(end))
            self.step(Period((end - begin) / 1000, ends, metrics, (), int(end)), statuses,
                      commands)
            i, begin, n = j, end, n + 1
        self.remember(*_split(recent[i:]))  # stamped after now: another host's clock
        self.now_ms = max(self.now_ms, now_ms)

    def replay_ends(self, timed: Iterable[tuple[int, str, str, dict]], now_ms: int,
                    most: int = 120) -> list[int]:
        """The period ends of ``replay(timed, now_ms)`` worth reading the publications topic's
        end offsets at: every k-th, at most ``most`` of them."""
        since = now_ms - self.history_s * 1000
        recent = [t[0] for t in timed if since <= t[0]]
        if not recent:
            return []
        step_ms = self.period_s * 1000
        first = min(recent) // step_ms * step_ms
        count = int((now_ms - first) // step_ms)
        k = max(1, math.ceil(count / most))
        ends = [round(first + n * step_ms) for n in range(k, count + 1, k)]
        if not ends or ends[-1] != now_ms:  # the last period, which ends now
            ends.append(now_ms)
        return ends

    def tick(self, now_ms: int) -> None:
        """Move the clock on without a period (no figures while Kafka cannot be read)."""
        self.now_ms = now_ms

    def kafka_problem(self, problem: str | None) -> None:
        """What keeps the dashboard from Kafka now (shown as a banner), or None: all is well."""
        self.problem = problem

    def _forget(self, now_ms: int) -> None:
        oldest = now_ms - self.history_s * 1000
        while self.rows and self.rows[0].time_ms <= oldest:
            self.rows.popleft()
            self.thresholds.popleft()
        while self.windows and self.windows[0].time_ms <= now_ms - self.window_s * 1000:
            self.windows.popleft()

    # -- what the map needs ---------------------------------------------------------------

    def partitions(self) -> int | None:
        if self.layout is not None:
            return self.layout["partitions"]
        return None if self.batch is None else self.batch["partitions"]

    def owners(self) -> list[tuple[int, ...]] | None:
        """Every partition's owners under the epoch in force (the primary first)."""
        p, w = self.partitions(), self.workers
        if not p or not w:
            return None
        command = self.commands.get(self.epoch or 0)
        if command is not None and len(command["assignment"]) == p:
            try:
                return owners_of(command["assignment"], command.get("replicas") or ())
            except ValueError:
                pass
        if self.epoch:  # a command not (yet) seen: the owners that reported loads
            seen: dict[int, list[int]] = {}
            for win in self.windows:
                for part, worker in win.loads:
                    if worker not in seen.setdefault(part, []):
                        seen[part].append(worker)
            if seen:
                return [tuple(seen.get(q, [])) for q in range(p)]
        return [(o,) for o in initial_assignment(p, w)]

    def map(self) -> dict[str, Any]:
        """The map document: layout, one entry per partition, publication points."""
        p = self.partitions()
        owners = self.owners() or []
        ns = np.zeros(p or 0)
        items = np.zeros(p or 0, np.int64)
        by_owner: dict[int, dict[int, float]] = {}
        for win in self.windows:
            for (part, worker), (n, k) in win.loads.items():
                if part < len(ns):
                    ns[part] += n
                    items[part] += k
                    share = by_owner.setdefault(part, {})
                    share[worker] = share.get(worker, 0.0) + n
        span_s = max(self.window_s, 1e-9)
        layout = self.layout
        cells = layout["cells"] if layout is not None else []
        subs = layout["subscriptions"] if layout is not None else []
        out = []
        for q in range(p or 0):
            bounds = cells[4 * q:4 * q + 4] if len(cells) >= 4 * (q + 1) else None
            out.append({
                "id": q, "bounds": None if bounds is None else [_num(v, 6) for v in bounds],
                "owners": list(owners[q]) if q < len(owners) else [],
                "load_ms_per_s": _num(ns[q] / 1e6 / span_s),
                "load_by_owner_ms_per_s": {str(w): _num(v / 1e6 / span_s)
                                           for w, v in sorted(by_owner.get(q, {}).items())},
                "items": int(items[q]),
                "subscriptions": int(subs[q]) if q < len(subs) else None})
        pts = (np.concatenate([w.points for w in self.windows]) if self.windows
               else np.empty((0, 2)))
        if len(pts) > MAX_POINTS:
            pts = pts[np.linspace(0, len(pts) - 1, MAX_POINTS).astype(int)]
        return {
            "app_id": self.app_id, "time_ms": self.now_ms, "window_s": self.window_s,
            "layout": None if layout is None else {
                k: layout[k] for k in ("strategy", "partitioner", "partitions", "workers",
                                       "extent", "time")},
            "epoch": self.epoch, "workers": self.workers, "partitions": out,
            "publications": sum(w.publications for w in self.windows),
            "points": np.round(pts, 6).tolist()}

    # -- series and state -----------------------------------------------------------------

    def _worker_loads(self, row: Row) -> list[float | None]:
        """Each worker's processing time per second of the period (ms/s); None: no load."""
        w = max(self.workers or 0, len(row.worker_loads_ns or ()))
        if row.worker_loads_ns is None:
            return [None] * w
        loads = list(row.worker_loads_ns) + [0.0] * (w - len(row.worker_loads_ns))
        return [_num(v / 1e6 / self.period_s) for v in loads]

    def row_json(self, row: Row, threshold: float | None) -> dict[str, Any]:
        """One period as the series and the SSE updates carry it."""
        return {"time_ms": row.time_ms, "input_rate": _num(row.input_rate, 1),
                "output_rate": _num(row.output_rate, 1), "lag": row.lag,
                "batches": row.batches, "p50_ms": _num(row.p50_ms, 1),
                "p99_ms": _num(row.p99_ms, 1), "latency_from_batches": row.latency_from_batches,
                "mldc": _num(row.mldc), "threshold": threshold, "epoch": row.epoch,
                "matches": row.matches, "events_per_s": _num(row.events_rate, 1),
                "worker_load_ms_per_s": self._worker_loads(row)}

    def series(self) -> dict[str, Any]:
        """The time series, one entry per period, oldest first (columns of equal length)."""
        rows = [self.row_json(r, t) for r, t in zip(self.rows, self.thresholds, strict=True)]
        keys = ("time_ms", "input_rate", "output_rate", "lag", "batches", "p50_ms", "p99_ms",
                "latency_from_batches", "mldc", "threshold", "epoch", "matches",
                "events_per_s")
        out: dict[str, Any] = {"app_id": self.app_id, "period_s": self.period_s}
        out.update({k: [r[k] for r in rows] for k in keys})
        workers = max((len(r["worker_load_ms_per_s"]) for r in rows), default=0)
        out["worker_load_ms_per_s"] = [
            [r["worker_load_ms_per_s"][w] if w < len(r["worker_load_ms_per_s"]) else None
             for r in rows] for w in range(workers)]
        return out

    def latest(self) -> dict[str, Any] | None:
        """The newest period as ``row_json``, or None before the first."""
        if not self.rows:
            return None
        return self.row_json(self.rows[-1], self.thresholds[-1])

    def rebalances(self) -> list[dict[str, Any]]:
        """The app's rebalance commands, oldest first, with what the app reported moving."""
        out = []
        for epoch in sorted(self.commands)[-MAX_REBALANCES:]:
            c = self.commands[epoch]
            move = self.moves.get(epoch)
            out.append({
                "epoch": epoch, "time_ms": c["time"], "metric": c["metric"],
                "mldc_before": _num(c["mldc_before"]),
                "mldc_predicted": _num(c["mldc_predicted"]),
                "moves": [[m["partition"], m["from_worker"], m["to_worker"]]
                          for m in c["moves"]],
                "replicas": [[r["partition"], list(r["workers"])]
                             for r in c.get("replicas") or ()],
                "reason": c["reason"],
                "applied": None if move is None else {
                    "batch_id": move["batch_id"], "time_ms": move["time"],
                    "partitions_moved": list(move["partitions_moved"]),
                    "bytes": move["bytes"], "duration_ms": _num(move["duration_ms"], 1)}})
        return out

    def state(self) -> dict[str, Any]:
        """The state document: the newest figures, the app, the distributor, the banner."""
        s, b = self.status, self.batch
        return {
            "app_id": self.app_id, "time_ms": self.now_ms, "period_s": self.period_s,
            "history_s": self.history_s, "window_s": self.window_s, "problem": self.problem,
            "latest": self.latest(), "epoch": self.epoch, "workers": self.workers,
            "partitions": self.partitions(),
            "app": None if b is None else {
                "batch_id": b["batch_id"], "time_ms": b["end_time"], "strategy": b["strategy"],
                "join": b["join"], "records": b["records"],
                "duration_ms": _num(b["duration_ms"], 1)},
            "decision": None if s is None else {
                "time_ms": s["time"], "period": s["period"], "epoch": s["epoch"],
                "mode": s["mode"], "metric": s["metric"], "decision": s["decision"],
                "reason": s["reason"], "mldc": _num(s["mldc"]),
                "mldc_predicted": _num(s["mldc_predicted"]), "threshold": s["threshold"],
                "worker_loads": [_num(v) for v in s["worker_loads"]]},
            "rebalances": self.rebalances()}
