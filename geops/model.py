"""Publications, subscriptions and the 10 spatial relations, held column-wise for vectorised work.

A publication p matches a subscription s iff ``relation(s.geometry, p.geometry)`` holds:
the subscription geometry is the first operand, as in GeoPS (CONTAINS = s contains p).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum, IntFlag

import numpy as np
import shapely


class Relation(IntEnum):
    """The 10 relations, numbered in the order of the Avro enum ``io.geops.Relation``."""

    COVERED_BY = 0
    COVERS = 1
    CONTAINS = 2
    CROSSES = 3
    EQUALS = 4
    INTERSECTS = 5
    OVERLAPS = 6
    TOUCHES = 7
    WITHIN = 8
    DISJOINT = 9

    @classmethod
    def parse(cls, name: str) -> Relation:
        """Case-insensitive name ('within', 'COVERED_BY') to a Relation; ValueError otherwise."""
        try:
            return cls[str(name).strip().upper()]
        except KeyError:
            raise ValueError(
                f"unknown relation {name!r}; expected one of {', '.join(r.name for r in cls)}"
            ) from None


class DetectKind(IntFlag):
    """What a detecting subscription (a fence) reports about a moving object, one bit each;
    bit i is symbol i of the Avro enum ``io.geops.DetectKind``. A fence's ``detect`` is a set
    of them (0: none, a plain subscription). ENTER to CROSS are a fixed fence's (its
    geometry); NEARBY and FARAWAY a roaming fence's (pairs of moving objects, ``geops.roam``:
    they go with a subscription's ``roam``)."""

    ENTER = 1
    EXIT = 2
    INSIDE = 4
    OUTSIDE = 8
    CROSS = 16
    NEARBY = 32
    FARAWAY = 64

    @classmethod
    def parse(cls, value: object) -> int:
        """The bit mask of a list of kind names, or of one comma-separated string of them
        (case-insensitive; ``[]`` and ``""``: none); ValueError naming what is wrong."""
        if isinstance(value, str):
            names = [p.strip() for p in value.split(",")] if value.strip() else []
        elif isinstance(value, list | tuple):
            names = list(value)
        else:
            raise ValueError(f"expected a list of kinds or a comma-separated string, got "
                             f"{value!r}")
        mask = 0
        for name in names:
            kind = cls.__members__.get(name.strip().upper()) if isinstance(name, str) else None
            if kind is None:
                raise ValueError(f"unknown kind {name!r}; expected any of {cls.choices()}")
            mask |= int(kind)
        return mask

    @classmethod
    def choices(cls) -> str:
        """The kind names as a user writes them, for messages and help texts."""
        return ", ".join(k.lower() for k in cls.__members__)

    @classmethod
    def fixed(cls, mask: np.ndarray | int) -> np.ndarray | int:
        """The kinds of ``mask`` (one or an array) that a fixed fence reports (enter, exit,
        inside, outside, cross): a subscription is a fixed fence where they are not 0."""
        return mask & FIXED_KINDS

    @classmethod
    def names(cls, mask: int) -> list[str]:
        """The kind names of a bit mask, in the enum's order (upper case, as in Avro)."""
        return [name for name, kind in cls.__members__.items() if mask & kind]


# the kinds of fixed fences (its geometry) and of roaming fences (``geops.roam``: pairs of
# moving objects)
FIXED_KINDS = int(DetectKind.ENTER | DetectKind.EXIT | DetectKind.INSIDE | DetectKind.OUTSIDE
                  | DetectKind.CROSS)
ROAMING_KINDS = int(DetectKind.NEARBY | DetectKind.FARAWAY)

# GeoPS's "mixed" workload draws relations uniformly from all but DISJOINT.
MIXED_RELATIONS: tuple[Relation, ...] = tuple(r for r in Relation if r is not Relation.DISJOINT)


@dataclass
class Subscriptions:
    """Column-wise subscriptions: ids (int64), shapely geometries (object), relations (int8)."""

    ids: np.ndarray
    geoms: np.ndarray
    relations: np.ndarray

    def __post_init__(self) -> None:
        self.ids = np.asarray(self.ids, dtype=np.int64)
        self.geoms = np.asarray(self.geoms, dtype=object)
        self.relations = np.asarray(self.relations, dtype=np.int8)
        if not len(self.ids) == len(self.geoms) == len(self.relations):
            raise ValueError("ids, geoms and relations must have the same length")

    def __len__(self) -> int:
        return len(self.ids)

    def take(self, index: np.ndarray) -> Subscriptions:
        return Subscriptions(self.ids[index], self.geoms[index], self.relations[index])

    @classmethod
    def empty(cls) -> Subscriptions:
        return cls(np.empty(0, np.int64), np.empty(0, object), np.empty(0, np.int8))

    @classmethod
    def concat(cls, parts: list[Subscriptions]) -> Subscriptions:
        """The rows of ``parts``, one after another."""
        if not parts:
            return cls.empty()
        return cls(np.concatenate([p.ids for p in parts]),
                   np.concatenate([p.geoms for p in parts]),
                   np.concatenate([p.relations for p in parts]))


@dataclass
class Envelopes:
    """What placing and routing subscriptions needs of them, without their geometries: ids
    (int64), envelopes (n × 4 float64: xmin, ymin, xmax, ymax), whether each is a point, and
    relations (int8). The app's driver keeps this of a million subscriptions, not the shapes."""

    ids: np.ndarray
    bounds: np.ndarray
    points: np.ndarray
    relations: np.ndarray

    def __post_init__(self) -> None:
        self.ids = np.asarray(self.ids, dtype=np.int64)
        self.bounds = np.asarray(self.bounds, dtype=np.float64).reshape(-1, 4)
        self.points = np.asarray(self.points, dtype=bool)
        self.relations = np.asarray(self.relations, dtype=np.int8)
        if not len(self.ids) == len(self.bounds) == len(self.points) == len(self.relations):
            raise ValueError("ids, bounds, points and relations must have the same length")

    def __len__(self) -> int:
        return len(self.ids)

    def take(self, index: np.ndarray) -> Envelopes:
        return Envelopes(self.ids[index], self.bounds[index], self.points[index],
                         self.relations[index])

    @classmethod
    def of(cls, subs: Subscriptions) -> Envelopes:
        """The envelopes of ``subs`` (row for row)."""
        return cls(subs.ids, shapely.bounds(subs.geoms) if len(subs) else np.empty((0, 4)),
                   shapely.get_type_id(subs.geoms) == 0, subs.relations)


@dataclass
class Publications:
    """Column-wise publications: ids (int64), geometries (object), event times (int64 ms)."""

    ids: np.ndarray
    geoms: np.ndarray
    event_time: np.ndarray

    def __post_init__(self) -> None:
        self.ids = np.asarray(self.ids, dtype=np.int64)
        self.geoms = np.asarray(self.geoms, dtype=object)
        self.event_time = np.asarray(self.event_time, dtype=np.int64)
        if not len(self.ids) == len(self.geoms) == len(self.event_time):
            raise ValueError("ids, geoms and event_time must have the same length")

    def __len__(self) -> int:
        return len(self.ids)

    def take(self, index: np.ndarray) -> Publications:
        return Publications(self.ids[index], self.geoms[index], self.event_time[index])

    @classmethod
    def empty(cls) -> Publications:
        return cls(np.empty(0, np.int64), np.empty(0, object), np.empty(0, np.int64))


def geometry_problems(geoms: np.ndarray, finite_known: np.ndarray | None = None
                      ) -> list[str | None]:
    """Per geometry, why it cannot be used (missing, empty, non-finite, invalid) or None.

    ``finite_known`` marks geometries whose coordinates are already known to be finite (built
    from checked arrays), whose coordinates are then not read again."""
    geoms = np.asarray(geoms, dtype=object)
    missing = shapely.is_missing(geoms)
    present = ~missing
    empty = np.zeros(len(geoms), bool)
    empty[present] = shapely.is_empty(geoms[present])
    usable = present & ~empty
    finite = np.ones(len(geoms), bool)
    if usable.any():
        idx = np.flatnonzero(usable if finite_known is None else usable & ~finite_known)
        # x/y of every geometry; z only where a geometry has one (2-D ones report NaN z).
        for sel in (idx, idx[shapely.has_z(geoms[idx])]):
            if not len(sel):
                continue
            coords, owner = shapely.get_coordinates(geoms[sel], include_z=sel is not idx,
                                                    return_index=True)
            bad = ~np.isfinite(coords).all(axis=1)
            finite[sel[np.unique(owner[bad])]] = False
    valid = np.ones(len(geoms), bool)
    check = usable & finite
    valid[check] = shapely.is_valid(geoms[check])
    out: list[str | None] = [None] * len(geoms)
    for i in np.flatnonzero(~(present & ~empty & finite & valid)):
        if missing[i]:
            out[i] = "missing geometry"
        elif empty[i]:
            out[i] = "empty geometry"
        elif not finite[i]:
            out[i] = "non-finite coordinate (NaN or infinity)"
        else:
            out[i] = f"invalid geometry: {shapely.is_valid_reason(geoms[i])}"
    return out


def geometries_from_wkb(wkbs: list[bytes]) -> tuple[np.ndarray, list[str | None]]:
    """Geometries of WKB records (None where unreadable) and each one's problem
    (``geometry_problems``), read and checked once per distinct WKB: records of one geometry
    (subscribers of one area) share one geometry object."""
    first: dict[bytes, int] = {}
    number = np.fromiter((first.setdefault(wkb, len(first)) for wkb in wkbs), np.intp,
                         len(wkbs))
    distinct = shapely.from_wkb(np.array(list(first), object), on_invalid="ignore")
    problems = geometry_problems(distinct)
    return distinct[number], [problems[i] for i in number.tolist()]
