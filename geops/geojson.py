"""Reading and writing GeoJSON FeatureCollections of publications and subscriptions.

Input rules (shared by `geops publish`, `geops subscribe` and `geops match`): every feature needs
an integer ``properties.id`` and a usable geometry (present, non-empty, finite, valid);
subscriptions also need ``properties.relation`` (case-insensitive relation name) and may carry
``properties.detect`` (the geofence events they report: a list, or a comma-separated string,
of enter, exit, inside, outside, cross, nearby, faraway, case-insensitive),
``properties.distance_m`` (a fence of that many metres around the geometry; only with
``detect``) and ``properties.roam`` (a roaming fence, ``geops.roam_spec``: ``{"distance_m":
metres, "match": glob of object ids}``; nearby and faraway only with it); publications may carry
``properties.event_time`` (epoch milliseconds) and an object id (``properties.object_id`` or
the property named by ``--object-id-field``: a non-empty string or an integer). A feature that
breaks a rule is rejected with its index and the reason; the others are kept.
"""

from __future__ import annotations

import contextlib
import gc
import json
import math
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import shapely

from geops.errors import GeoJSONError
from geops.geojson_geoms import geometries
from geops.model import DetectKind, Publications, Relation, Subscriptions, geometry_problems
from geops.roam_spec import parse_roam, roam_detect

try:  # about three times faster than json on coordinates (geops bench load)
    import orjson
except ImportError:  # pragma: no cover - a pinned dependency; json reads the same files
    orjson = None


@dataclass(frozen=True)
class Rejected:
    """A feature that was not used: its position in the file and why."""

    index: int
    reason: str
    what: str = "feature"  # or "record" (of an Avro file)

    def __str__(self) -> str:
        return f"{self.what} {self.index}: {self.reason}"


def _features(path: str | os.PathLike[str], bulk: bool = True) -> list[Any]:
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
    except FileNotFoundError:
        raise GeoJSONError(f"{path}: file not found") from None
    try:
        doc = _loads(raw, bulk)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise GeoJSONError(f"{path}: not valid JSON: {exc}") from None
    if not isinstance(doc, dict) or doc.get("type") != "FeatureCollection":
        raise GeoJSONError(f"{path}: expected a GeoJSON FeatureCollection")
    features = doc.get("features")
    if not isinstance(features, list):
        raise GeoJSONError(f"{path}: 'features' must be a list")
    return features


@contextlib.contextmanager
def _no_cycle_collection(bulk: bool) -> Iterator[None]:
    """Millions of coordinate lists stay alive while a file is read: the cyclic garbage
    collector would scan them again and again as objects are made (most of the time of
    building the geometries went to those scans), and none of them are cycles."""
    enabled = gc.isenabled()
    if bulk:
        gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _loads(raw: bytes, bulk: bool) -> Any:
    """The document; orjson when it can read it (it refuses NaN, Infinity and integers beyond
    64 bits, which json reads), json otherwise and for the messages of invalid JSON."""
    if bulk and orjson is not None:
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            pass
    return json.loads(raw.decode("utf-8"))


def _int_id(props: dict[str, Any]) -> int:
    value = props.get("id")
    if type(value) is int and -(2**63) <= value < 2**63:  # the common case, quickly
        return value
    if value is None:
        raise ValueError("missing properties.id")
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"properties.id must be an integer, got {value!r}")
    if isinstance(value, float) and not (math.isfinite(value) and value.is_integer()):
        raise ValueError(f"properties.id must be an integer, got {value!r}")
    value = int(value)
    if not -(2**63) <= value < 2**63:
        raise ValueError(f"properties.id {value} does not fit in 64 bits")
    return value


_RELATIONS = {name: int(r) for r in Relation for name in (r.name, r.name.lower())}


def _relation(name: Any) -> int:
    """The code of a relation name (case-insensitive); ValueError naming the choices."""
    code = _RELATIONS.get(name) if type(name) is str else None
    return int(Relation.parse(name)) if code is None else code


def _detect(props: dict[str, Any]) -> int:
    """``properties.detect`` as a ``DetectKind`` bit mask (0: absent or empty)."""
    value = props.get("detect")
    if value is None:
        return 0
    try:
        return DetectKind.parse(value)
    except ValueError:
        raise ValueError(f"properties.detect must be a list or a comma-separated string of "
                         f"{DetectKind.choices()}, got {value!r}") from None


def _distance(props: dict[str, Any]) -> float:
    """``properties.distance_m`` in metres (NaN: absent); a distance without detect kinds is
    refused, since plain matching uses the geometry itself."""
    value = props.get("distance_m")
    if value is None:
        return math.nan
    if (isinstance(value, bool) or not isinstance(value, int | float)
            or not math.isfinite(value) or value <= 0):
        raise ValueError(f"properties.distance_m must be a finite number of metres above "
                         f"zero, got {value!r}")
    if not DetectKind.fixed(_detect(props)):
        raise ValueError(f"properties.distance_m ({value!r}) needs properties.detect: a "
                         f"distance makes a fence for geofence events, plain matching uses "
                         f"the geometry itself")
    return float(value)


def _roam(props: dict[str, Any]) -> tuple[float, str] | None:
    """``properties.roam`` as (distance, glob), None when absent; ValueError naming it."""
    value = props.get("roam")
    return None if value is None else parse_roam(value)


def _fence_detect(props: dict[str, Any]) -> int:
    """The detect kinds of a subscription with those its roam adds (``roam_detect``)."""
    return roam_detect(_detect(props), _roam(props))


def _object_id(props: dict[str, Any], name: str) -> str | None:
    """The object id of a publication from ``properties[name]`` (None: absent)."""
    value = props.get(name)
    if value is None:
        return None
    if type(value) is int:
        return str(value)
    if not isinstance(value, str) or not value:
        raise ValueError(f"properties.{name} must be a non-empty string or an integer (an "
                         f"object id), got {value!r}")
    return value


def _parse(
    features: list[Any], kind: str, bulk: bool = True, defaults: dict[str, Any] | None = None
) -> tuple[list[int], list[Any], list[dict], list[Rejected]]:
    """Common checks; returns kept positions, geometries and properties, and rejections.

    The geometries are built after the properties were checked, all at once
    (``geops.geojson_geoms``); ``bulk=False`` reads each through GEOS's GeoJSON reader.
    ``defaults`` are properties a feature without them gets (command-line flags).
    """
    keep: list[int] = []
    objects: list[Any] = []
    props_out: list[dict] = []
    rejected: list[Rejected] = []
    for i, feat in enumerate(features):
        try:
            if not isinstance(feat, dict) or feat.get("type") != "Feature":
                raise ValueError("not a GeoJSON Feature")
            props = feat.get("properties") or {}
            if not isinstance(props, dict):
                raise ValueError("properties must be an object")
            if defaults:
                props = {**defaults, **{k: v for k, v in props.items() if v is not None}}
            _int_id(props)
            if kind == "subscription":
                if props.get("relation") is None:
                    raise ValueError("missing properties.relation")
                _relation(props["relation"])
                _fence_detect(props)
                _distance(props)
            gj = feat.get("geometry")
            if gj is None:
                raise ValueError("missing geometry")
        except ValueError as exc:
            rejected.append(Rejected(i, str(exc)))
            continue
        keep.append(i)
        objects.append(gj)
        props_out.append(props)
    built, unreadable, finite = geometries(objects, bulk)
    if unreadable:
        rejected.extend(Rejected(keep[k], reason) for k, reason in unreadable.items())
        good = [k for k in range(len(keep)) if k not in unreadable]
        keep = [keep[k] for k in good]
        built = [built[k] for k in good]
        props_out = [props_out[k] for k in good]
        finite = finite[good]
    geoms = built
    problems = geometry_problems(np.array(geoms, dtype=object), finite) if geoms else []
    k2, g2, p2 = [], [], []
    for i, g, p, problem in zip(keep, geoms, props_out, problems, strict=True):
        if problem:
            rejected.append(Rejected(i, problem))
        else:
            k2.append(i)
            g2.append(g)
            p2.append(p)
    rejected.sort(key=lambda r: r.index)
    return k2, g2, p2, rejected


def read_publications(
    path: str | os.PathLike[str], default_event_time: int = 0, bulk: bool = True
) -> tuple[Publications, list[int], list[Rejected]]:
    """Publications of a file, the feature index of each, and the rejected features."""
    pubs, _, keep, rejected = _read_publications(path, default_event_time, bulk, None)
    return pubs, keep, rejected


def read_positions(
    path: str | os.PathLike[str], object_id_field: str = "object_id",
    default_event_time: int | None = None, bulk: bool = True
) -> tuple[Publications, np.ndarray, list[int], list[Rejected]]:
    """Publications of a file with the object id of each (``properties[object_id_field]``;
    an object array of str, None where absent), the feature index of each, and the rejected
    features. ``default_event_time`` None: a publication with an object id and no
    ``properties.event_time`` is rejected (a position needs a time)."""
    return _read_publications(path, default_event_time, bulk, object_id_field)


def _read_publications(
    path: str | os.PathLike[str], default_event_time: int | None, bulk: bool,
    object_id_field: str | None
) -> tuple[Publications, np.ndarray, list[int], list[Rejected]]:
    with _no_cycle_collection(bulk):
        keep, geoms, props, rejected = _parse(_features(path, bulk), "publication", bulk)
    times = []
    good_keep, good_geoms, good_ids, objects = [], [], [], []
    for i, g, p in zip(keep, geoms, props, strict=True):
        try:
            obj = None if object_id_field is None else _object_id(p, object_id_field)
        except ValueError as exc:
            rejected.append(Rejected(i, str(exc)))
            continue
        if "event_time" in p:
            t = p["event_time"]
        elif default_event_time is not None:
            t = default_event_time
        elif obj is not None:
            rejected.append(Rejected(i, "missing properties.event_time (a position of an "
                                        "object needs one)"))
            continue
        else:
            t = 0
        if isinstance(t, bool) or not isinstance(t, int | float) or not math.isfinite(t):
            rejected.append(
                Rejected(i, f"properties.event_time must be epoch milliseconds, got {t!r}"))
            continue
        good_keep.append(i)
        good_geoms.append(g)
        good_ids.append(_int_id(p))
        times.append(int(t))
        objects.append(obj)
    rejected.sort(key=lambda r: r.index)
    object_ids = np.empty(len(objects), object)
    object_ids[:] = objects
    return Publications(good_ids, good_geoms, times), object_ids, good_keep, rejected


def read_subscriptions(
    path: str | os.PathLike[str], bulk: bool = True
) -> tuple[Subscriptions, list[int], list[Rejected]]:
    """Subscriptions of a file, the feature index of each, and the rejected features.

    ``bulk=False`` reads it as before the bulk path (json, each geometry through GEOS's
    GeoJSON reader), for ``geops bench load``.
    """
    subs, _, _, keep, rejected, _ = _read_subscriptions(path, bulk)
    return subs, keep, rejected


def read_fence_subscriptions(
    path: str | os.PathLike[str], bulk: bool = True, defaults: dict[str, Any] | None = None
) -> tuple[Subscriptions, np.ndarray, np.ndarray, list[int], list[Rejected]]:
    """Subscriptions of a file with what makes them fences: ``detect`` (uint8
    ``DetectKind`` bit masks, 0: a plain subscription; with the kinds a roam adds) and
    ``distance_m`` (float64, NaN: none) of each; the feature index of each, and the rejected
    features. ``defaults`` (``detect``, ``distance_m``) apply to the features that do not set
    them. ``read_fences`` also gives the roams."""
    return read_fences(path, bulk, defaults)[:5]


def read_fences(
    path: str | os.PathLike[str], bulk: bool = True, defaults: dict[str, Any] | None = None
) -> tuple[Subscriptions, np.ndarray, np.ndarray, list[int], list[Rejected],
           list[tuple[float, str] | None]]:
    """``read_fence_subscriptions`` and the roam (distance, glob; None: none) of each."""
    return _read_subscriptions(path, bulk, defaults)


def _read_subscriptions(
    path: str | os.PathLike[str], bulk: bool, defaults: dict[str, Any] | None = None
) -> tuple[Subscriptions, np.ndarray, np.ndarray, list[int], list[Rejected],
           list[tuple[float, str] | None]]:
    with _no_cycle_collection(bulk):
        keep, geoms, props, rejected = _parse(_features(path, bulk), "subscription", bulk,
                                              defaults)
    ids = [_int_id(p) for p in props]
    rels = [_relation(p["relation"]) for p in props]
    detect = np.fromiter((_fence_detect(p) for p in props), np.uint8, len(props))
    distance = np.fromiter((_distance(p) for p in props), np.float64, len(props))
    roams = [_roam(p) for p in props]
    return Subscriptions(ids, geoms, rels), detect, distance, keep, rejected, roams


def read_ids(path: str | os.PathLike[str]) -> tuple[list[int], list[Rejected]]:
    """The ``properties.id`` of every feature of a file (geometries are not looked at), and
    the features whose id is missing or not an integer."""
    ids, rejected = [], []
    for i, feature in enumerate(_features(path)):
        props = feature.get("properties") if isinstance(feature, dict) else None
        try:
            ids.append(_int_id(props if isinstance(props, dict) else {}))
        except ValueError as exc:
            rejected.append(Rejected(i, str(exc)))
    return ids, rejected


def write_feature_collection(path: str | os.PathLike[str], geoms: np.ndarray,
                             properties: Iterable[dict[str, Any]]) -> None:
    """Write geometries with their properties; geometries are serialised in one GEOS call."""
    texts = shapely.to_geojson(np.asarray(geoms, dtype=object)) if len(geoms) else []
    with open(path, "w", encoding="utf-8") as fh:
        fh.write('{"type": "FeatureCollection", "features": [\n')
        for n, (text, props) in enumerate(zip(texts, properties, strict=True)):
            fh.write(",\n" if n else "")
            fh.write(f'{{"type":"Feature","properties":{json.dumps(props, separators=(",", ":"))}'
                     f',"geometry":{text}}}')
        fh.write("\n]}\n")


def write_publications(path: str | os.PathLike[str], pubs: Publications,
                       extra: dict[str, np.ndarray] | None = None) -> None:
    """Write publications as GeoJSON; ``extra`` adds per-feature properties (e.g. layer;
    None: the feature has no such property)."""
    extra = extra or {}
    props = ({"id": int(pubs.ids[k]), "event_time": int(pubs.event_time[k]),
              **{name: _plain(col[k]) for name, col in extra.items() if col[k] is not None}}
             for k in range(len(pubs)))
    write_feature_collection(path, pubs.geoms, props)


def write_subscriptions(path: str | os.PathLike[str], subs: Subscriptions,
                        extra: dict[str, np.ndarray] | None = None) -> None:
    """Write subscriptions as GeoJSON with ``properties.relation`` as the relation name."""
    extra = extra or {}
    props = ({"id": int(subs.ids[k]), "relation": Relation(int(subs.relations[k])).name,
              **{name: _plain(col[k]) for name, col in extra.items() if col[k] is not None}}
             for k in range(len(subs)))
    write_feature_collection(path, subs.geoms, props)


def _plain(value: Any) -> Any:
    return value.item() if isinstance(value, np.generic) else value
