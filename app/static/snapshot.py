"""A snapshot of the micro-batch app's static side in its checkpoint, so a restart need not
scan the subscriptions topic and build the partitions again.

A restart from the topic reads every subscription record, decodes and checks it, places it
and builds each partition's payload; from a snapshot it reads the payloads as they were and
only the subscription changes after the offsets the snapshot reflects. What is kept is the
payloads (``geops.strategies.payload``), not the built indexes: an R-tree and the prepared
geometries of a partition are rebuilt from its payload by the warm-up, which the app runs
either way (``docs/results/restart``).

On disk, under ``<checkpoint>/geops-static/``::

    CURRENT          the name of the snapshot in force (written to a file beside it, renamed)
    <name>/meta.json what it reflects and depends on, and the size and CRC-32 of every file
    <name>/set.npz   the live subscriptions' envelopes and fence masks, and the partitioner
    <name>/p<N>.bin  static partition N's payload (none for an empty partition)

A snapshot is written whole in a directory of its own (``.stage-*``), renamed to its name and
only then named in ``CURRENT``: a crash at any point leaves the previous one in force. It is
used only if it matches: the same format, app id, subscriptions topic (name and Kafka topic
id: a topic created again is another workload), strategy, partitioner and partition count;
offsets no further than the ones the checkpoint starts the subscriptions from; every file of
the size and checksum recorded. Otherwise ``verify`` names the first thing that differs and
the app builds from the topic.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
import zlib
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from geops.model import Envelopes
from geops.partitioning.tree import SpatialPartitioner

FORMAT = 1                 # the layout of the files above; another one is not read
DIRECTORY = "geops-static"
CURRENT = "CURRENT"
META = "meta.json"
SET = "set.npz"
STAGE = ".stage-"
_TREE = ("axis", "value", "left", "right", "leaf_pid")  # a SpatialPartitioner's arrays
_CHUNK = 1 << 22


def root_of(checkpoint: str | Path) -> Path:
    """Where the snapshots of the app with this checkpoint live."""
    return Path(checkpoint) / DIRECTORY


def payload_name(pid: int) -> str:
    return f"p{pid}.bin"


@dataclass(frozen=True)
class Identity:
    """What a snapshot depends on: another value of any field makes it another static side."""

    app_id: str
    topic: str
    topic_id: str          # Kafka's id of the subscriptions topic ("" when it cannot be read:
    #                        the app then uses no snapshot)
    strategy: str
    partitioner: str
    partitions: int        # as configured (a quadtree makes 1 + 3k of them)

    def differences(self, other: Mapping[str, Any]) -> list[str]:
        """What differs from a recorded identity, one phrase each ("strategy sPS, not sPIS")."""
        out = []
        for key, value in asdict(self).items():
            theirs = other.get(key)
            if key == "topic_id" and not (value and theirs):
                continue  # an id that could not be read is not compared
            if theirs != value:
                out.append(f"{key.replace('_', ' ')} {theirs!r}, not {value!r}")
        return out


@dataclass
class Snapshot:
    """A snapshot found and verified: what the static side is rebuilt from."""

    name: str
    dir: Path
    identity: Identity
    offsets: dict[int, int]                 # the subscriptions topic's, {partition: end}
    envelopes: Envelopes                    # the live subscriptions, sorted by id
    detect: np.ndarray                      # row for row: ``DetectKind`` masks (0: no fence)
    partitioner: SpatialPartitioner | None  # None: hashed ids (RIhPS)
    num_partitions: int
    files: dict[int, tuple[int, int]] = field(default_factory=dict)  # pid -> (bytes, crc)

    def path(self, pid: int) -> Path:
        return self.dir / payload_name(pid)

    @property
    def total_bytes(self) -> int:
        return sum(size for size, _ in self.files.values())


def checksum(path: Path) -> tuple[int, int]:
    """(bytes, CRC-32) of a file."""
    crc, size = 0, 0
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            crc = zlib.crc32(chunk, crc)
            size += len(chunk)
    return size, crc


def keep_payload(directory: str, pid: int, data: bytes) -> None:
    """Write partition ``pid``'s payload into a snapshot being made (on the executor that
    merged it, during a build from the topic). Best effort: a directory this process cannot
    see (an executor on another machine) or a failed write leaves the file out, and the
    snapshot is then not completed (``Stage.complete``)."""
    if not directory or not os.path.isdir(directory):
        return
    final = os.path.join(directory, payload_name(pid))
    tmp = f"{final}.{os.getpid()}.{uuid.uuid4().hex[:6]}"
    try:
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, final)
    except OSError:
        Path(tmp).unlink(missing_ok=True)


def new_stage(root: Path) -> Path:
    """An empty directory to write a snapshot into."""
    root.mkdir(parents=True, exist_ok=True)
    stage = root / f"{STAGE}{uuid.uuid4().hex[:12]}"
    stage.mkdir()
    return stage


def publish(stage: Path, identity: Identity, offsets: Mapping[int, int], envelopes: Envelopes,
            detect: np.ndarray, partitioner: SpatialPartitioner | None, num_partitions: int,
            files: Mapping[int, tuple[int, int]], keep: frozenset[str] = frozenset()) -> str:
    """Complete a snapshot whose payload files are in ``stage`` (``files``: their sizes and
    checksums), put it in force and remove the older ones but those named in ``keep`` (one
    the running static side was read from, which Spark reads again to recompute a lost
    block); returns its name."""
    arrays = {"ids": envelopes.ids, "bounds": envelopes.bounds, "points": envelopes.points,
              "relations": envelopes.relations, "detect": np.asarray(detect, np.uint8)}
    if partitioner is not None:
        arrays.update({f"tree_{k}": getattr(partitioner, k) for k in _TREE})
    with open(stage / SET, "wb") as f:
        np.savez(f, **arrays)
    meta = {"format": FORMAT, "identity": asdict(identity),
            "offsets": {str(p): int(e) for p, e in sorted(offsets.items())},
            "subscriptions": len(envelopes), "num_partitions": num_partitions,
            "partitioner_kind": None if partitioner is None else partitioner.kind,
            "set": list(checksum(stage / SET)),
            "payloads": {str(p): [int(s), int(c)] for p, (s, c) in sorted(files.items())}}
    (stage / META).write_text(json.dumps(meta))
    root = stage.parent
    old = current_name(root)
    name = f"s-{uuid.uuid4().hex[:12]}"
    os.replace(stage, root / name)
    tmp = root / f".{CURRENT}.tmp"
    tmp.write_text(name + "\n")
    os.replace(tmp, root / CURRENT)
    for other in root.iterdir():
        if (other.is_dir() and other.name not in keep | {name}
                and (other.name == old or other.name.startswith("s-"))):
            shutil.rmtree(other, ignore_errors=True)
    return name


def current_name(root: Path) -> str | None:
    try:
        return (root / CURRENT).read_text().strip() or None
    except (FileNotFoundError, NotADirectoryError):
        return None


def clear_stages(root: Path) -> None:
    """Remove snapshots left half-written by an earlier process."""
    if root.is_dir():
        for other in root.iterdir():
            if other.is_dir() and other.name.startswith(STAGE):
                shutil.rmtree(other, ignore_errors=True)


def verify(root: Path, identity: Identity, ends: Mapping[int, int]
           ) -> tuple[Snapshot | None, str | None]:
    """The snapshot in force, if it can stand for the static side as of offsets up to
    ``ends`` (where the checkpoint starts the subscriptions from): (snapshot, None); else
    (None, why not), or (None, None) when there is none."""
    name = current_name(root)
    if name is None:
        return None, None
    where = root / name
    try:
        meta = json.loads((where / META).read_text())
    except (OSError, ValueError) as exc:
        return None, f"its description {where / META} cannot be read ({type(exc).__name__})"
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        found = meta.get("format") if isinstance(meta, dict) else None
        return None, f"it is of format {found!r}, written by another version (this one " \
                     f"reads {FORMAT})"
    try:
        return _verified(where, name, meta, identity, ends)
    except (KeyError, TypeError, ValueError) as exc:  # a description of the wrong shape
        return None, f"its description is damaged ({type(exc).__name__}: {exc})"


def _verified(where: Path, name: str, meta: dict, identity: Identity, ends: Mapping[int, int]
              ) -> tuple[Snapshot | None, str | None]:
    differ = identity.differences(meta["identity"])
    if differ:
        return None, f"it was written for {', '.join(differ)}"
    offsets = {int(p): int(e) for p, e in meta["offsets"].items()}
    ahead = [f"partition {p}: {e} > {ends.get(p, 0)}" for p, e in sorted(offsets.items())
             if e > ends.get(p, 0)]
    if ahead:
        return None, (f"it reflects subscription offsets past those the checkpoint starts "
                      f"from ({'; '.join(ahead)})")
    files = {int(p): (int(s), int(c)) for p, (s, c) in meta["payloads"].items()}
    for label, path, want in ([(SET, where / SET, tuple(meta["set"]))]
                              + [(payload_name(p), where / payload_name(p), files[p])
                                 for p in sorted(files)]):
        problem = _file_problem(path, want)
        if problem:
            return None, f"{label} {problem}"
    with np.load(where / SET, allow_pickle=False) as data:
        envelopes = Envelopes(data["ids"], data["bounds"], data["points"], data["relations"])
        detect = data["detect"].astype(np.uint8)
        partitioner = (None if meta["partitioner_kind"] is None else SpatialPartitioner(
            meta["partitioner_kind"], *(data[f"tree_{k}"] for k in _TREE)))
    if len(envelopes) != meta["subscriptions"] or len(detect) != len(envelopes):
        return None, f"{SET} holds {len(envelopes)} subscriptions, not {meta['subscriptions']}"
    if not len(envelopes):
        return None, "it holds no subscriptions"
    p = int(meta["num_partitions"])
    if (partitioner is not None and partitioner.num_partitions != p) or any(
            not 0 <= pid < p for pid in files):
        return None, f"its partitions do not fit its {p} partitions"
    return Snapshot(name, where, identity, offsets, envelopes, detect, partitioner, p,
                    files), None


def _file_problem(path: Path, want: tuple[int, int]) -> str | None:
    """What is wrong with a file against its recorded (bytes, CRC-32), or None."""
    try:
        size, crc = checksum(path)
    except OSError:
        return "is missing"
    if size != want[0]:
        return f"is truncated or grown ({size} bytes, {want[0]} recorded)"
    if crc != want[1]:
        return f"is damaged (CRC-32 {crc:08x}, {want[1]:08x} recorded)"
    return None


def topic_id(conf: Mapping[str, str], topic: str, timeout: float = 10.0) -> str:
    """Kafka's id of ``topic`` (a topic deleted and created again gets a new one), or "" when
    the broker does not say."""
    from confluent_kafka import TopicCollection

    from kafkaio.clients import admin

    client = admin(conf)  # held until the answer came: a client dropped cancels its requests
    try:
        found = client.describe_topics(TopicCollection([topic]), request_timeout=timeout)
        return str(found[topic].result(timeout=timeout + 5).topic_id)
    except Exception:  # an older broker, a denied Describe: no snapshot is used
        return ""


def cross_shapes(snapshot: Snapshot) -> dict[int, bytes]:
    """Id -> WKB of the shape of every fence that asks for cross, from the snapshot's payloads
    (read here, on the driver, only when there is one): what the start-up scan gives the
    events query (``Scan.cross_shapes``)."""
    import shapely

    from geops.model import DetectKind
    from geops.strategies import payload

    asks = snapshot.envelopes.ids[(snapshot.detect & int(DetectKind.CROSS)) > 0]
    out: dict[int, bytes] = {}
    for pid in sorted(snapshot.files):
        if len(out) == len(asks):
            break
        subs = payload.decode(snapshot.path(pid).read_bytes())[0]
        keep = np.isin(subs.ids, asks)
        out.update(zip(subs.ids[keep].tolist(), shapely.to_wkb(subs.geoms[keep]).tolist(),
                       strict=True))
    return out
