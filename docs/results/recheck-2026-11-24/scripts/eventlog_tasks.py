"""Per-task metrics of the read and join stages from a Spark event log (decompressed JSON
lines), means over the two-stage jobs after the first two (warm-up).

Usage: zstd -dc <eventlog dir>/events_1_* > ev.json && python3 eventlog_tasks.py ev.json
"""
import collections
import statistics as st
import sys

from eventlog import load, stage_pair

jobs, stages, tasks = load(sys.argv[1])
agg = collections.defaultdict(list)
for _, job in sorted(jobs.items())[2:]:
    pair = stage_pair(job, stages)
    if pair is None:
        continue
    for name, s in zip(("read", "join"), pair, strict=True):
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
