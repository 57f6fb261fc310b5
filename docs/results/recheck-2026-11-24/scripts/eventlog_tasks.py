"""Per-task metrics of the read and join stages from a Spark event log (decompressed JSON
lines), means over the two-stage jobs after the first two (warm-up).

Usage: zstd -dc <eventlog dir>/events_1_* > ev.json && python3 eventlog_tasks.py ev.json
"""
import collections
import json
import statistics as st
import sys
ev = [json.loads(l) for l in open(sys.argv[1])]
jobs, stages, tasks = {}, {}, collections.defaultdict(list)
for e in ev:
    if e["Event"] == "SparkListenerJobStart":
        jobs[e["Job ID"]] = {"start": e["Submission Time"], "stages": e["Stage IDs"]}
    elif e["Event"] == "SparkListenerStageCompleted":
        stages[e["Stage Info"]["Stage ID"]] = e["Stage Info"]
    elif e["Event"] == "SparkListenerTaskEnd":
        tasks[e["Stage ID"]].append(e)
agg = collections.defaultdict(list)
for jid, j in sorted(jobs.items())[2:]:
    ss = sorted((stages[s] for s in j["stages"] if s in stages and "Submission Time" in stages[s]), key=lambda s: s["Submission Time"])
    if len(ss) != 2: continue
    for name, s in zip(("read", "join"), ss):
        for t in tasks[s["Stage ID"]]:
            m = t["Task Metrics"]; i = t["Task Info"]
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
