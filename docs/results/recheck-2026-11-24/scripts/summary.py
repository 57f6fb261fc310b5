"""Throughput ratios per repeat and the mean batch split, for one results directory.

Usage: python3 summary.py ../scale-1.8
"""
import collections
import csv
import statistics as st
import sys

d = sys.argv[1]
runs = {r["run_id"]: r for r in csv.DictReader(open(f"{d}/runs.csv"))}


def thr(p, m, s, k):
    return float(runs[f"{p}-{m.replace(' ', '')}-s{s}-r{k}"]["throughput"])


for p in ("sPS", "sPIS"):
    st9 = [thr(p, "Static STAL", 90, k) for k in range(3)]
    dy9 = [thr(p, "Dynamic LB STAL", 90, k) for k in range(3)]
    dy5 = [thr(p, "Dynamic LB STAL", 50, k) for k in range(3)]
    print(p, "Static 0.9", [round(x) for x in st9], "Dynamic 0.9", [round(x) for x in dy9],
          "pair ratios", [round(a / b, 2) for a, b in zip(dy9, st9)],
          "ratio of means %.2f" % (st.mean(dy9) / st.mean(st9)),
          "kept %.2f" % (st.mean(dy9) / st.mean(dy5)))
# mean batch split per (pipeline, mode, skew, epoch); batch 0 (warm-up) and Fig. 8 runs left out
b = collections.defaultdict(list)
for r in csv.DictReader(open(f"{d}/batches.csv")):
    if r["batch_id"] != "0" and r["skew"] in ("0.5", "0.9"):
        b[(r["pipeline"], r["mode"], r["skew"], r["epoch"])].append(r)
for k, rows in sorted(b.items()):
    def f(c):
        return st.mean(float(x[c]) for x in rows)
    print(k, "records %d dur %d job %d join %d job-join %d write %d" % (
        f("records"), f("duration_ms"), f("job_ms"), f("join_stage_ms"),
        f("job_ms") - f("join_stage_ms"), f("write_ms")))
