"""Per-task metrics of the read and join stages from a Spark event log (decompressed JSON
lines), means over the two-stage jobs after the first two (warm-up).

Usage: zstd -dc <eventlog dir>/events_1_* > ev.json && python3 eventlog_tasks.py ev.json
"""
import collections
import json
import statistics as st
import sys

with open(sys.argv[1]) as fh:
    events = [json.loads(line) for line in fh]
jobs, stages, tasks = {}, {}, collections.defaultdict(list)
for e in events:
    if e["Event"] == "SparkListenerJobStart":
        jobs[e["Job ID"]] = {"start": e["Submission Time"], "stages": e["Stage IDs"]}
    elif e["Event"] == "SparkListenerStageCompleted":
        stages[e["Stage Info"]["Stage ID"]] = e["Stage Info"]
    elif e["Event"] == "SparkListenerTaskEnd":
        tasks[e["Stage ID"]].append(e)
agg = collections.defaultdict(list)
for _, job in sorted(jobs.items())[2:]:
    done = [stages[s] for s in job["stages"] if s in stages and "Submission Time" in stages[s]]
    if len(done) != 2:
        continue
    done.sort(key=lambda s: s["Submission Time"])
    for name, s in zip(("read", "join"), done, strict=True):
        for t in tasks[s["Stage ID"]]:
            m, i = t["Task Metrics"], t["Task Info"]
            agg[name, "launch_delay"].append(i["Launch Time"] - s["Submission Time"])
            agg[name, "duration"].append(i["Finish Time"] - i["Launch Time"])
            agg[name, "deser"].append(m["Executor Deserialize Time"])
            agg[name, "run"].append(m["Executor Run Time"])
            agg[name, "cpu_ms"].append(m["Executor CPU Time"] / 1e6)
            agg[name, "gc"].append(m["JVM GC Time"])
            agg[name, "result_ser"].append(m["Result Serialization Time"])
            agg[name, "end_to_stage_end"].append(s["Completion Time"] - i["Finish Time"])
            agg[name, "records_read_input"].append(m["Input Metrics"]["Records Read"])
            agg[name, "shuffle_read_ms"].append(m["Shuffle Read Metrics"]["Fetch Wait Time"])
for k, v in sorted(agg.items()):
    print(k, round(st.mean(v), 1), "max", max(v))
