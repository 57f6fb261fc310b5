"""A Spark event log (decompressed JSON lines) of one run: its jobs, stages and tasks, and the
stages of a micro-batch's job (read/decode/route, then join).

Spark writes the log with ``spark.eventLog.enabled``; ``zstd -dc <event log dir>/events_1_* >
ev.json`` decompresses it.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

Event = dict[str, Any]


def parse(lines: Iterable[str]) -> tuple[dict, dict, dict]:
    """Jobs by id ({start, end, stages}), completed stages by id, finished tasks by stage id."""
    jobs: dict[int, dict[str, Any]] = {}
    stages: dict[int, Event] = {}
    tasks: dict[int, list[Event]] = defaultdict(list)
    for line in lines:
        e = json.loads(line)
        if e["Event"] == "SparkListenerJobStart":
            jobs[e["Job ID"]] = {"start": e["Submission Time"], "stages": e["Stage IDs"]}
        elif e["Event"] == "SparkListenerJobEnd":
            jobs[e["Job ID"]]["end"] = e["Completion Time"]
        elif e["Event"] == "SparkListenerStageCompleted":
            stages[e["Stage Info"]["Stage ID"]] = e["Stage Info"]
        elif e["Event"] == "SparkListenerTaskEnd":
            tasks[e["Stage ID"]].append(e)
    return jobs, stages, tasks


def load(path: str) -> tuple[dict, dict, dict]:
    with open(path) as fh:
        return parse(fh)


def stage_pair(job: dict, stages: dict) -> tuple[Event, Event] | None:
    """The job's (read, join) stages in submission order, or None unless it ran exactly two."""
    ran = sorted((stages[s] for s in job["stages"]
                  if s in stages and "Submission Time" in stages[s]),
                 key=lambda s: s["Submission Time"])
    return (ran[0], ran[1]) if len(ran) == 2 else None


def batch_stages(job: dict, stages: dict) -> tuple[Event | None, Event] | None:
    """A batch job's (read, join) stages: both of a two-stage job, (None, its stage) of a
    one-stage job (a small batch read in its join tasks); None for any other job."""
    pair = stage_pair(job, stages)
    if pair is not None:
        return pair
    ran = [stages[s] for s in job["stages"] if s in stages and "Submission Time" in stages[s]]
    return (None, ran[0]) if len(ran) == 1 else None
