"""Per dynamic run at skew 0.9 and epoch: item and CPU-time share of the busier worker.
Usage: python3 shares.py ../scale-1.8
"""
import csv, collections, sys
agg = collections.defaultdict(lambda: collections.defaultdict(lambda: [0, 0]))
for r in csv.DictReader(open(f'{sys.argv[1]}/loads.csv')):
    if r['skew'] != '0.9' or 'Dynamic' not in r['mode']:
        continue
    w = agg[(r['run_id'], r['epoch'])][r['worker']]
    w[0] += int(r['items']); w[1] += float(r['processing_ns'])
for k, ws in sorted(agg.items()):
    ti = sum(v[0] for v in ws.values()); tt = sum(v[1] for v in ws.values())
    print(k, 'busier worker: items %.2f time %.2f' % (max(v[0] for v in ws.values())/ti, max(v[1] for v in ws.values())/tt))
