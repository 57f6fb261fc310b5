"""Turning decoded geops records into one line of text or one JSON object."""

from __future__ import annotations

import base64
import datetime as dt
import json
from typing import Any

import shapely

from schemas import codec

WKT_TEXT_LIMIT = 80
# GEOS writes the shortest round-tripping digits up to this many decimals; its "full
# precision" (-1) keeps only 16 significant digits, which does not round-trip a double.
WKT_DECIMALS = 25


def iso(ms: int) -> str:
    """Epoch milliseconds as ISO 8601 UTC with milliseconds."""
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).isoformat(timespec="milliseconds") \
        .replace("+00:00", "Z")


def _field_kinds(name: str) -> dict[str, str]:
    """Which fields of a schema are timestamps or geometries (read from the .avsc source)."""
    kinds = {}
    for field in codec().current[name].source["fields"]:
        t = field["type"]
        if isinstance(t, dict) and t.get("logicalType") == "timestamp-millis":
            kinds[field["name"]] = "time"
        elif field["name"] == "geometry":
            kinds[field["name"]] = "geometry"
        elif t == "bytes" or t == ["null", "bytes"]:
            kinds[field["name"]] = "bytes"
        elif isinstance(t, dict) and t.get("type") == "array" and t.get("items") == "bytes":
            kinds[field["name"]] = "bytes array"
    return kinds


def _wkt(data: bytes) -> str:
    try:
        return shapely.to_wkt(shapely.from_wkb(data), rounding_precision=WKT_DECIMALS)
    except Exception as exc:  # GEOS raises on malformed WKB
        return f"<unreadable WKB: {exc}>"


def to_json(name: str, record: dict[str, Any]) -> dict[str, Any]:
    """The record with its schema's field names; geometries as WKT, times ISO, bytes base64.
    A ``GeofenceEvent`` is the line ``geops match --events`` writes for it (kind lower case,
    times in epoch ms, ``reason``, ``other_object_id`` and ``distance_m`` only when there is
    one), so the two compare line by line."""
    if name == "GeofenceEvent":
        from geops.events import Event, PairEvent

        fields = (record["object_id"], record["subscription_id"], record["kind"].lower(),
                  record["publication_id"], record["event_time"], record["reason"])
        if record.get("other_object_id") is None:
            return json.loads(Event(*fields).to_json())
        return json.loads(PairEvent(*fields, record["other_object_id"],
                                    record.get("distance_m")).to_json())
    out: dict[str, Any] = {"_schema": name}
    kinds = _field_kinds(name)
    for key, value in record.items():
        kind = kinds.get(key)
        if value is None:
            out[key] = None
        elif kind == "time":
            out[key] = iso(value)
        elif kind == "geometry":
            out[key] = _wkt(value)
        elif kind == "bytes":
            out[key] = _base64(value)
        elif kind == "bytes array":
            out[key] = [_base64(v) for v in value]
        else:
            out[key] = value
    return out


def _base64(value: bytes | str) -> str:
    """Bytes as base64 text; a field a record's older schema lacks reads as its default,
    which Avro writes as a string of code points 0-255."""
    raw = value.encode("latin-1") if isinstance(value, str) else value
    return base64.b64encode(raw).decode()


def _short(wkt: str) -> str:
    return wkt if len(wkt) <= WKT_TEXT_LIMIT else wkt[:WKT_TEXT_LIMIT - 1] + "…"


def _ms(ns: float) -> str:
    return f"{ns / 1e6:.1f} ms"


def _opt(value: float | None, fmt: str = "{:.0f}") -> str:
    return "-" if value is None else fmt.format(value)


def _replicas(replicas: list[dict[str, Any]] | None) -> str:
    """``; replicated p3 on [0, 1], p7 on [1, 0]`` (every owner, the primary first), or ''."""
    if not replicas:
        return ""
    return "; replicated " + ", ".join(f"p{r['partition']} on {list(r['workers'])}"
                                        for r in replicas)


def to_text(name: str, r: dict[str, Any]) -> str:
    """One human-readable line per record."""
    if name == "Publication":
        obj = f" object {r['object_id']}" if r.get("object_id") is not None else ""
        return (f"publication {r['id']}{obj} at {iso(r['event_time'])} "
                f"{_short(_wkt(r['geometry']))}")
    if name == "Subscription":
        fence = f" detect {','.join(r['detect'])}" if r.get("detect") else ""
        if r.get("distance_m") is not None:
            fence += f" within {r['distance_m']:g} m of"
        return f"subscription {r['id']} {r['relation']}{fence} {_short(_wkt(r['geometry']))}"
    if name == "GeofenceEvent":
        what = (f"publication {r['publication_id']}" if r["publication_id"] is not None
                else r["reason"] or "no publication")
        if r.get("other_object_id") is not None:  # a roaming fence's: the pair
            what += f", other {r['other_object_id']}" + (
                f" {r['distance_m']:,.1f} m away" if r.get("distance_m") is not None else "")
        return (f"event {r['kind']} object {r['object_id']} subscription "
                f"{r['subscription_id']} at {iso(r['event_time'])} ({what}), batch "
                f"{r['batch_id']}")
    if name == "Match":
        ids = r["subscription_ids"]
        shown = ", ".join(map(str, ids[:12])) + (f", … ({len(ids)} in all)" if len(ids) > 12
                                                  else "")
        return (f"match publication {r['publication_id']} -> [{shown}] "
                f"latency {r['match_time'] - r['event_time']} ms, batch {r['batch_id']}")
    if name == "PartitionLoad":
        return (f"load batch {r['batch_id']} epoch {r['epoch']} partition {r['partition']} "
                f"worker {r['worker']}: {r['items']} items, {_ms(r['processing_ns'])}, "
                f"{r['matches']} matches, {r['index_builds']} index builds")
    if name == "BatchSummary":
        return (f"batch {r['batch_id']} epoch {r['epoch']}: {r['records']} records, "
                f"{r['items']} items, {r['matched_publications']} matched, "
                f"{r['dead_letters']} dead letters in {r['duration_ms']:.0f} ms; latency "
                f"p50 {_opt(r['latency_p50_ms'])} ms p99 {_opt(r['latency_p99_ms'])} ms"
                f"{_replicas(r.get('replicas'))}")
    if name == "MoveReport":
        return (f"move epoch {r['epoch']}: partitions {r['partitions_moved']} moved or "
                f"replicated, "
                f"{r['bytes'] / 1024:.1f} KiB in {r['duration_ms']:.0f} ms")
    if name == "RebalanceCommand":
        moves = ", ".join(f"p{m['partition']} {m['from_worker']}->{m['to_worker']}"
                          for m in r["moves"])
        return (f"rebalance epoch {r['epoch']}: MLDC {r['mldc_before']:.2f} -> "
                f"{r['mldc_predicted']:.2f} ({r['metric']}), {len(r['moves'])} moves: "
                f"{moves or 'none'}{_replicas(r.get('replicas'))} - {r['reason']}")
    if name == "DistributorStatus":
        if r["metric"] == "LB":
            loads = ", ".join(f"{v / 1e6:,.0f} ms" for v in r["worker_loads"])
        else:
            loads = ", ".join(f"{v:,.0f} items" for v in r["worker_loads"])
        return (f"period {r['period']} epoch {r['epoch']}: MLDC {_opt(r['mldc'], '{:.2f}')} "
                f"(threshold {r['threshold']}) loads [{loads}] -> {r['decision']}: "
                f"{r['reason']}")
    if name == "PartitionLayout":
        spread = ", ".join(f"{n:,}" for n in r["subscriptions"][:12])
        more = f", … ({len(r['subscriptions'])} in all)" if len(r["subscriptions"]) > 12 else ""
        return (f"layout of app {r['app_id']}: {r['partitions']} {r['partitioner']} partitions "
                f"({r['strategy']}, {r['workers']} workers) over "
                f"[{', '.join(f'{v:g}' for v in r['extent'])}]; subscriptions [{spread}{more}]")
    if name == "ObjectPositions":
        return (f"positions of app {r['app_id']} batch {r['batch_id']} bucket {r['bucket']}: "
                f"{len(r['object_ids'])} positions, {sum(r['hit_counts'])} in fences; fences "
                f"{'all ' if r['fences_complete'] else ''}{len(r['fence_ids'])}")
    if name == "DeadLetter":
        size = len(r["payload"]) if r["payload"] is not None else 0
        return (f"dead letter {r['topic']}[{r['partition']}]@{r['offset']}: {r['reason']} "
                f"({size} bytes)")
    return f"{name} {json.dumps(to_json(name, r))}"
