"""Per dynamic run at skew 0.9: how long after the app's batch 0 ended the distributor's first
command was decided (its status time), against when the app started batch 1 (where it polls
the control topic), and which batch ran the new epoch first. Usage:
python3 command_race.py ../read-whole
"""
import csv, collections, sys
d = sys.argv[1]
batches = collections.defaultdict(list)
for r in csv.DictReader(open(f'{d}/batches.csv')):
    batches[r['run_id']].append(r)
decided = {}
for r in csv.DictReader(open(f'{d}/status.csv')):
    if r['decision'] == 'rebalance':
        decided.setdefault(r['run_id'], int(r['time_ms']))
for rid, rows in sorted(batches.items()):
    if 'Dynamic' not in rid or '-s90-' not in rid or rid not in decided:
        continue
    rows.sort(key=lambda x: int(x['batch_id']))
    end0 = int(rows[0]['end_ms'])
    first = next(int(x['batch_id']) for x in rows if x['epoch'] != '0')
    print(f"{rid:28s} command +{decided[rid] - end0:4d} ms, batch 1 starts "
          f"+{int(rows[1]['start_ms']) - end0:4d} ms after batch 0 ends; new epoch from batch "
          f"{first}; batch 1 {float(rows[1]['duration_ms']):,.0f} ms, batch 2 "
          f"{float(rows[2]['duration_ms']):,.0f} ms")
