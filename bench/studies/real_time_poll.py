"""What a real-time task's poll costs, one tree against another, interleaved poll by poll.

A real-time task at 1,000 positions/s mostly takes polls of one record: it decodes the poll,
matches it against every subscription, produces its ``Match`` and, for a position of a moving
object, its geofence events (``app.realtime.task.answer``). This study runs that function, as
each tree (a checkout of geops) has it, in a process of its own per tree (``PYTHONPATH`` at the
tree, the same interpreter and packages), and feeds both the same one-record polls of
``geops bench events``' workload (``--subscriptions`` of which a fifth are fences, one in 50 of
them asking for cross; ``--objects`` moving objects, each already held), alternately poll by
poll, the tree that goes first alternating too, so the machine's load falls on both alike.
Each process times its own poll (``answer`` and the producer's ``poll``: the task's work
between two reads) and, every ``--period`` polls, the period's end apart: the object-state
records of the objects that changed (what a commit writes). The producer queues to a broker
that is not there: ``produce`` costs what it costs the task, nothing is delivered.

Usage::

    python -m bench.studies.real_time_poll --tree A=/path/to/old --tree B=/path/to/new \\
        [--polls 6000] [--objects 100000] [--subscriptions 50000] [--period 100]

Prints per tree the p50, p99 and mean of a poll and of a period's end, and B/A.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

SEED = 5           # geops bench events' seed
FILL = 5_000       # records per untimed poll while every object's first position is taken
PARTS = 4          # the publications partitions of ``geops topics create``


def main() -> None:
    """Run the A/B over the trees given and print it."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tree", action="append", required=True, help="NAME=DIR, twice")
    ap.add_argument("--polls", type=int, default=6_000)
    ap.add_argument("--objects", type=int, default=100_000)
    ap.add_argument("--subscriptions", type=int, default=50_000)
    ap.add_argument("--period", type=int, default=100)
    ap.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve:
        _serve(args)
        return
    trees = [(n, Path(d).resolve()) for n, d in (t.split("=", 1) for t in args.tree)]
    procs = {}
    for name, tree in trees:
        env = {**os.environ, "PYTHONPATH": str(tree)}
        procs[name] = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "--serve", "--tree", args.tree[0],
             "--objects", str(args.objects), "--subscriptions", str(args.subscriptions),
             "--polls", str(args.polls), "--period", str(args.period)],
            cwd=tree, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    for name, p in procs.items():
        assert p.stdout.readline().strip() == "ready", name
    polls: dict[str, list[float]] = {n: [] for n in procs}
    ends: dict[str, list[float]] = {n: [] for n in procs}
    names = list(procs)
    for k in range(args.polls):
        # alternate the first also between period ends, which fall on every period-th poll
        for name in (names if (k + k // args.period) % 2 else names[::-1]):
            p = procs[name]
            p.stdin.write(f"{k}\n")
            p.stdin.flush()
            took, end = (float(x) for x in p.stdout.readline().split())
            polls[name].append(took)
            if end >= 0:
                ends[name].append(end)
    for p in procs.values():
        p.stdin.close()
        p.wait(60)
    print(f"{args.polls:,} one-record polls each, alternating; {args.objects:,} objects held, "
          f"{args.subscriptions:,} subscriptions; a period's end every {args.period} polls")
    for what, table in (("poll", polls), ("period end", ends)):
        ms = {n: np.array(v) * 1e3 for n, v in table.items()}
        for name, x in ms.items():
            print(f"{what} {name}: p50 {np.median(x):.3f} ms, p99 {np.percentile(x, 99):.3f} "
                  f"ms, mean {x.mean():.3f} ms")
        a, b = (ms[n] for n in names)
        print(f"{what} {names[1]}/{names[0]}: p50 {np.median(b) / np.median(a):.3f}, "
              f"mean {b.mean() / a.mean():.3f}")


class _Msg:
    """A consumed record as ``answer`` reads it."""

    __slots__ = ("_offset", "_part", "_value")

    def __init__(self, value: bytes, part: int, offset: int):
        self._value, self._part, self._offset = value, part, offset

    def value(self) -> bytes:
        return self._value

    def partition(self) -> int:
        return self._part

    def offset(self) -> int:
        return self._offset

    def topic(self) -> str:
        return "publications"

    def key(self) -> bytes | None:
        return None

    def error(self) -> None:
        return None


class _Static:
    """The task's static side (``WholeStatic``) without the subscriptions topic."""

    def __init__(self, subs, detect, distance):
        from app.realtime.static_side import PARTITIONS, STRATEGY, _cross_shapes
        from geops.offline import matched_as
        from geops.strategies import LocalRunner, build_strategy

        fenced, _ = matched_as(subs, detect, distance, list(range(len(subs))))
        self.fences = {i: m for i, m in zip(subs.ids.tolist(), detect.tolist(), strict=True)
                       if m}
        self.cross_shapes = _cross_shapes(subs.ids, detect, fenced)
        self.runner = LocalRunner(build_strategy(STRATEGY, fenced, PARTITIONS))

    def match(self, geoms):
        return self.runner.match(np.arange(len(geoms), dtype=np.int64), geoms)


def _serve(args: argparse.Namespace) -> None:
    """In a tree's process: build the task, then answer each poll number read from stdin with
    the seconds the poll took and the period's end took (-1 when none ended)."""
    import zlib

    from app.realtime.changelog import Changelog
    from app.realtime.events import TaskEvents
    from app.realtime.period import Period
    from app.realtime.task import NO_BATCH, TaskContext, answer
    from geops.workload import generate_workload
    from kafkaio.sender import Sender
    from schemas import codec
    from schemas.records import publication_records

    w = generate_workload(seed=SEED, subscriptions=args.subscriptions, objects=args.objects,
                          publications=args.objects + args.polls)
    static = _Static(w.subscriptions, w.detect, np.round(w.distance_m, 1))
    c = codec()
    objects = list(w.object_ids)
    msgs = [_Msg(c.encode("Publication", r), zlib.crc32(r["object_id"].encode()) % PARTS, k)
            for k, r in enumerate(publication_records(w.publications, objects))]
    conf = {"bootstrap.servers": "127.0.0.1:9"}   # nothing listens: records stay queued
    out = Sender(conf, outage_limit=3_600, **{"linger.ms": 1,
                                              "queue.buffering.max.messages": 10_000_000})
    ctx = TaskContext(conf, "app", "group", "publications", "subscriptions", "matches",
                      "dead-letter", "metrics", "events", "object-state", 600_000, 2,
                      "earliest", 0.2, 60.0, "at-least-once")
    events = TaskEvents(static.fences, ctx.object_ttl_ms, NO_BATCH, static.cross_shapes)
    changelog = Changelog(conf, "object-state", "app", 60.0, partitions=PARTS)
    for lo in range(0, args.objects, FILL):   # every object's first position: all held
        answer(msgs[lo:lo + FILL], static, out, ctx, Period(), c, events)
    events.changed(changelog)
    period = Period()
    print("ready", flush=True)
    for line in sys.stdin:
        k = args.objects + int(line)
        began = time.perf_counter()
        answer(msgs[k:k + 1], static, out, ctx, period, c, events)
        out.poll()
        took = time.perf_counter() - began
        end = -1.0
        if (k + 1) % args.period == 0:
            began = time.perf_counter()
            events.changed(changelog)
            end = time.perf_counter() - began
            period = Period()
        print(f"{took} {end}", flush=True)


if __name__ == "__main__":
    main()
