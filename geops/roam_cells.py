"""Roaming fences spread over space: the candidates found in cells, the pair rule after them.

The model of what the stream is to run (docs/architecture.md, *Roaming fences*), pure and
in one process so that it can be held equal to ``geops.roam.RoamEngine`` exactly:

- ``CellGrid`` cuts the world into lon/lat cells whose side is at least the reach (the
  largest roaming distance) and routes each position to its *home* cell and a copy to every
  other cell the disk of the reach around it meets (its bounding box in degrees, taken wide
  enough on the ellipsoid: a degree of latitude is at least 110,574 m and one of longitude at
  least 111,319 m times the cosine of the latitude; columns wrap at the antimeridian).
- ``RoamCell`` keeps the latest position of every object it is sent (home or copy) and the
  positions held for the lateness, and evaluates them in the one order: a copy only moves its
  object, a home position gives its candidates (``PositionTable.within`` the reach). Every
  object whose latest position not after it is within the reach was sent to its cell, so the
  candidates hold the single engine's; a cell also keeps the older position of an object that
  has since gone beyond its reach, which the pair rule leaves out (``Candidates``).
- ``CellEngine`` is the driver and the pair stage: it admits a batch (``Arrivals``: the one
  clock), routes it, lets every cell evaluate up to the same bound, and runs the candidates
  of all cells through one ``PairRule`` in the one order.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence

import numpy as np

from geops.roam import Arrivals, Candidates, PairEvent, PairRule, PositionTable, RoamFences

_LAT_M = 110_000.0          # fewer metres than any degree of latitude has
_LON_M = 110_000.0          # fewer than a degree of longitude has at the equator (111,319)
_POLE_LAT = 89.0            # the cosine is taken no nearer a pole than this

Cell = tuple[int, int]      # (row, column)
Candidate = tuple[int, str, int, float, float, Candidates]  # a home position, its candidates


class CellGrid:
    """Cells of at least ``reach_m`` a side (in degrees of latitude; as many columns of
    equal width as fit in 360 degrees, so they wrap at the antimeridian)."""

    def __init__(self, reach_m: float) -> None:
        if not reach_m > 0:
            raise ValueError(f"the reach must be above zero, got {reach_m}")
        self.reach_m = reach_m
        self.columns = max(1, math.floor(360.0 / (reach_m / _LAT_M)))
        self.side = 360.0 / self.columns

    def route(self, points: np.ndarray) -> tuple[list[Cell], list[tuple[int, Cell]]]:
        """The home cell of each point ((n, 2) lon/lat), and (point index, cell) of every
        copy: the other cells the disk of the reach around the point meets."""
        points = np.asarray(points, float).reshape(-1, 2)
        lon, lat = points[:, 0], points[:, 1]
        row = np.floor(lat / self.side).astype(np.int64)
        col = np.floor((lon + 180.0) / self.side).astype(np.int64) % self.columns
        dlat = self.reach_m / _LAT_M
        edge = np.minimum(np.abs(lat) + dlat, _POLE_LAT)
        dlon = self.reach_m / (_LON_M * np.cos(np.radians(edge)))
        r0 = np.floor((lat - dlat) / self.side).astype(np.int64)
        r1 = np.floor((lat + dlat) / self.side).astype(np.int64)
        c0 = np.floor((lon - dlon + 180.0) / self.side).astype(np.int64)
        c1 = np.floor((lon + dlon + 180.0) / self.side).astype(np.int64)
        home = list(zip(row.tolist(), col.tolist(), strict=True))
        copies = []
        for k in range(len(points)):
            span = range(int(c0[k]), int(c1[k]) + 1)
            cols = {c % self.columns for c in span} if len(span) < self.columns else set(
                range(self.columns))
            copies += [(k, (r, c)) for r in range(int(r0[k]), int(r1[k]) + 1)
                       for c in sorted(cols) if (r, c) != home[k]]
        return home, copies


class RoamCell:
    """One cell: the latest position of every object sent to it, and the positions held."""

    def __init__(self, reach_m: float, ttl_ms: int | None = None) -> None:
        self.reach_m = reach_m
        self.ttl_ms = ttl_ms
        self.table = PositionTable()
        self.pending: list[tuple[int, str, int, float, float, bool]] = []

    def take(self, t: int, name: str, pid: int, x: float, y: float, home: bool) -> None:
        """Hold a position (``home``: of this cell; else a copy from a neighbour)."""
        heapq.heappush(self.pending, (t, name, pid, x, y, home))

    def evaluate(self, before: int | None) -> list[Candidate]:
        """The held positions with a time before ``before`` (None: all) in the one order:
        the candidates of each home one; every one moves its object. Objects a TTL behind
        the last are forgotten (no later position can pair with them)."""
        out: list[Candidate] = []
        last = None
        while self.pending and (before is None or self.pending[0][0] < before):
            t, name, pid, x, y, home = heapq.heappop(self.pending)
            xy = np.array([x, y])
            if home:
                out.append((t, name, pid, x, y, self.table.within(name, xy, self.reach_m)))
            self.table.put(name, t, xy)
            last = t
        if self.ttl_ms is not None and last is not None:
            self.table.drop_before(last - self.ttl_ms)
        return out


class CellEngine:
    """``RoamEngine``'s events with the candidates found in cells (module docstring)."""

    def __init__(self, fences: RoamFences, ttl_ms: int | None = None,
                 lateness_ms: int = 0) -> None:
        self.fences = fences
        self.rule = PairRule(fences, ttl_ms)
        self.arrivals = Arrivals(lateness_ms)
        reach = float(fences.distance_m.max()) if len(fences) else 1.0
        self.grid = CellGrid(reach)
        self.cells: dict[Cell, RoamCell] = {}
        self.ttl_ms = ttl_ms
        self.home_positions: dict[Cell, int] = {}   # per cell, the home positions it took

    @property
    def late(self) -> int:
        return self.arrivals.late

    def process(self, object_ids: Sequence[str], publication_ids: np.ndarray,
                event_times: np.ndarray, geoms: np.ndarray) -> list[PairEvent]:
        """As ``RoamEngine.process``: route a batch to the cells, evaluate every cell up to
        the clock's bound, and run the candidates through the pair rule."""
        at = self.arrivals.take(self.fences, object_ids, publication_ids, event_times, geoms)
        if not at:
            return self._pairs(self.arrivals.bound)
        home, copies = self.grid.route(np.array([p[3:] for p in at]))
        for j, cell in enumerate(home):
            self._cell(cell).take(*at[j], True)
            self.home_positions[cell] = self.home_positions.get(cell, 0) + 1
        for j, cell in copies:
            self._cell(cell).take(*at[j], False)
        return self._pairs(self.arrivals.bound)

    def finish(self) -> list[PairEvent]:
        """As ``RoamEngine.finish``."""
        events = self._pairs(None)
        if self.arrivals.clock is not None:
            events += self.rule.expire(self.arrivals.clock)[0]
        return events

    def _cell(self, cell: Cell) -> RoamCell:
        found = self.cells.get(cell)
        if found is None:
            found = self.cells[cell] = RoamCell(self.grid.reach_m, self.ttl_ms)
        return found

    def _pairs(self, before: int | None) -> list[PairEvent]:
        """Every cell's candidates up to ``before``, through the pair rule in the one order."""
        candidates = sorted((c for cell in self.cells.values() for c in cell.evaluate(before)),
                            key=lambda c: (c[0], c[1], c[2]))
        events: list[PairEvent] = []
        for t, name, pid, x, y, found in candidates:
            events += self.rule.expire(t)[0]
            events += self.rule.position(name, pid, t, np.array([x, y]), found)
        return events
