"""Per dynamic run at skew 0.9: when epoch 1 starts, mean batch ms before and after it, and
the Static run of the same repeat. Usage: python3 epochs.py ../scale-1.8
"""
import csv, collections, sys
d = sys.argv[1]
b = collections.defaultdict(list)
for r in csv.DictReader(open(f'{d}/batches.csv')):
    b[r['run_id']].append(r)
runs = {r['run_id']: r for r in csv.DictReader(open(f'{d}/runs.csv'))}
for rid, rows in sorted(b.items()):
    r = runs[rid]
    if r['skew'] != '0.9' or 'Dynamic' not in r['mode']:
        continue
    rows.sort(key=lambda x: int(x['batch_id']))
    t0 = int(rows[0]['start_ms']); tend = int(rows[-1]['end_ms'])
    e1 = [x for x in rows if x['epoch'] != '0']
    e0 = [x for x in rows if x['epoch'] == '0']
    srid = rid.replace('DynamicLBSTAL', 'StaticSTAL')
    s = b.get(srid, [])
    smean = sum(float(x['duration_ms']) for x in s) / max(len(s), 1)
    before = sum(float(x['duration_ms']) for x in e0) / max(len(e0), 1)
    after = sum(float(x['duration_ms']) for x in e1) / max(len(e1), 1)
    at = (int(e1[0]['start_ms']) - t0) / 1000 if e1 else float('nan')
    print(f"{rid:32s} epoch1 at {at:5.1f} s of {(tend-t0)/1000:5.1f} s; batches before {len(e0)} of {len(rows)}; "
          f"mean ms {before:,.0f} -> {after:,.0f}; static {smean:,.0f}; static/after {smean/after:.2f}; "
          f"thr ratio {float(r['throughput'])/float(runs[srid]['throughput']):.2f}")
