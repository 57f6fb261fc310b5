"""Reading a Spark event log (decompressed JSON lines) for the scripts here: jobs, completed
stages and finished tasks, and a micro-batch's two stages (read/decode/route, then join)."""
import collections
import json


def load(path: str) -> tuple[dict, dict, dict]:
    """Jobs by id ({start, end, stages}), completed stages by id, finished tasks by stage id."""
    jobs, stages, tasks = {}, {}, collections.defaultdict(list)
    with open(path) as fh:
        for line in fh:
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


def stage_pair(job: dict, stages: dict) -> tuple[dict, dict] | None:
    """The job's (read, join) stages in submission order, or None unless it ran exactly two."""
    ran = sorted((stages[s] for s in job["stages"]
                  if s in stages and "Submission Time" in stages[s]),
                 key=lambda s: s["Submission Time"])
    return (ran[0], ran[1]) if len(ran) == 2 else None
