"""The dashboard's view model folded from hand-made records, without Kafka."""

from __future__ import annotations

import numpy as np
import shapely

from dashboard.periods import Period
from dashboard.points import publication_points
from dashboard.state import MAX_POINTS, View
from schemas import codec

APP = "a"


def layout(partitions=4, workers=2, time=1_000, app=APP, cells=True):
    # 2 x 2 unit squares over [0, 2] x [0, 2], partition q at column q % 2, row q // 2
    grid = [[q % 2, q // 2, q % 2 + 1, q // 2 + 1] for q in range(partitions)]
    return ("PartitionLayout", {
        "app_id": app, "strategy": "sPIS", "partitioner": "kdbtree" if cells else "hash",
        "partitions": partitions, "workers": workers, "extent": [0.0, 0.0, 2.0, 2.0],
        "cells": [float(v) for c in grid for v in c] if cells else [],
        "subscriptions": [10 * (q + 1) for q in range(partitions)], "time": time})


def summary(batch, epoch, records=100, ends=None, app=APP, workers=2, partitions=4):
    return ("BatchSummary", {
        "app_id": app, "batch_id": batch, "epoch": epoch, "strategy": "sPIS", "join": "STAL",
        "workers": workers, "partitions": partitions, "records": records, "dead_letters": 0,
        "items": records, "matched_publications": 0, "start_time": 0, "end_time": 5,
        "duration_ms": 5.0, "latency_p50_ms": 40.0, "latency_p99_ms": 90.0,
        "source_end_offsets": ends or {}})


def load(partition, worker, ms, items=10, epoch=0, app=APP):
    return ("PartitionLoad", {"app_id": app, "batch_id": 0, "epoch": epoch,
                              "partition": partition, "worker": worker, "items": items,
                              "processing_ns": int(ms * 1e6), "time": 0})


def command(epoch, assignment, replicas=(), time=2_000, app=APP):
    return {"epoch": epoch, "assignment": list(assignment),
            "moves": [{"partition": 1, "from_worker": 0, "to_worker": 1}],
            "mldc_before": 0.8, "mldc_predicted": 0.1, "metric": "LB", "reason": "skewed",
            "time": time, "app_id": app,
            "replicas": [{"partition": p, "workers": list(w)} for p, w in replicas]}


def status(decision="none", threshold=0.5, period=3):
    return {"time": 3_000, "period": period, "epoch": 0, "metric": "LB", "mode": "dynamic",
            "worker_loads": [2e6, 1e6], "items": 10, "total_items": 100, "mldc": 0.33,
            "mldc_predicted": None, "threshold": threshold, "over_threshold": False,
            "enough_items": True, "cooled_down": True, "improves_enough": None,
            "decision": decision, "reason": f"{decision}: because"}


def period(t_ms, metrics=(), seconds=1.0, ends=None, matches=(), events=None):
    return Period(seconds, ends, list(metrics), list(matches), t_ms, events)


def test_map_cells_owners_and_load_over_the_window():
    v = View(APP, period_s=1.0, window_s=2.0)
    v.step(period(1_000, [layout(), summary(0, 0), load(0, 0, 40), load(3, 1, 10)]))
    v.step(period(2_000, [summary(1, 0), load(0, 0, 20), load(1, 0, 2)]))
    m = v.map()
    assert m["layout"]["partitioner"] == "kdbtree" and m["epoch"] == 0
    cells = m["partitions"]
    assert [c["bounds"] for c in cells] == [[0, 0, 1, 1], [1, 0, 2, 1], [0, 1, 1, 2],
                                           [1, 1, 2, 2]]
    assert [c["owners"] for c in cells] == [[0], [0], [1], [1]]  # initial: p * W // P
    assert [c["subscriptions"] for c in cells] == [10, 20, 30, 40]
    # load per second over the 2 s window: (40 + 20) ms / 2 s on partition 0
    assert [c["load_ms_per_s"] for c in cells] == [30.0, 1.0, 0.0, 5.0]
    assert [c["items"] for c in cells] == [20, 10, 0, 10]
    # a period later, the first one has left the window
    v.step(period(3_000, [summary(2, 0)]))
    assert [c["load_ms_per_s"] for c in v.map()["partitions"]] == [10.0, 1.0, 0.0, 0.0]


def test_owners_follow_the_epoch_in_force_with_replicas():
    v = View(APP)
    v.step(period(1_000, [layout(), summary(0, 0)]))
    v.step(period(2_000, [summary(1, 0)]),
           commands=[command(1, [0, 1, 1, 1], replicas=[(3, (1, 0))]),
                     command(7, [0, 0, 0, 0], app="another")])
    # commanded, but the app still runs epoch 0
    assert [c["owners"] for c in v.map()["partitions"]] == [[0], [0], [1], [1]]
    v.step(period(3_000, [summary(2, 1)]))
    assert v.epoch == 1
    assert [c["owners"] for c in v.map()["partitions"]] == [[0], [1], [1], [1, 0]]
    (r,) = v.state()["rebalances"]
    assert (r["epoch"], r["moves"], r["replicas"], r["applied"]) == (
        1, [[1, 0, 1]], [[3, [1, 0]]], None)
    v.step(period(4_000, [("MoveReport", {"app_id": APP, "batch_id": 2, "epoch": 1,
                                          "partitions_moved": [1], "bytes": 2048,
                                          "duration_ms": 12.5, "time": 2_500})]))
    assert v.state()["rebalances"][0]["applied"] == {
        "batch_id": 2, "time_ms": 2_500, "partitions_moved": [1], "bytes": 2048,
        "duration_ms": 12.5}


def test_owners_without_the_command_come_from_the_loads():
    v = View(APP, window_s=10.0)
    v.step(period(1_000, [layout(), summary(5, 3), load(0, 1, 1), load(0, 0, 1),
                          load(2, 0, 1)]))
    assert [c["owners"] for c in v.map()["partitions"]] == [[1, 0], [], [0], []]


def test_hash_partitions_have_no_bounds_and_other_apps_are_ignored():
    v = View(APP)
    v.step(period(1_000, [layout(cells=False), layout(partitions=9, app="b", time=5_000),
                          summary(0, 0), summary(0, 4, app="b"), load(1, 1, 5, app="b")]))
    m = v.map()
    assert m["layout"]["partitioner"] == "hash" and m["epoch"] == 0
    assert len(m["partitions"]) == 4 and all(c["bounds"] is None for c in m["partitions"])
    assert all(c["load_ms_per_s"] == 0 for c in m["partitions"])


def test_series_columns_figures_and_threshold():
    v = View(APP, period_s=2.0, history_s=10.0)
    v.follower.resume({0: 0})
    v.step(period(2_000, [summary(0, 0, 300, {"0": 100}), load(0, 0, 30), load(2, 1, 10)],
                  seconds=2.0, ends={0: 500}, events=90), statuses=[status(threshold=0.7)])
    v.step(period(4_000, seconds=2.0, ends={0: 900}))
    s = v.series()
    assert s["events_per_s"] == [45.0, None]   # 90 in 2 s; then the topic not followed
    assert s["time_ms"] == [2_000, 4_000]
    assert s["input_rate"] == [250.0, 200.0] and s["output_rate"] == [150.0, 0.0]
    assert s["lag"] == [400, 800]
    assert s["mldc"] == [0.5, None]            # (30 - 20) / 20; no load in the second
    assert s["threshold"] == [0.7, 0.7]
    assert s["worker_load_ms_per_s"] == [[15.0, None], [5.0, None]]  # ms per s of period
    assert s["p50_ms"] == [40.0, None] and s["latency_from_batches"] == [True, False]
    assert len({len(s[k]) for k in s if isinstance(s[k], list) and k != "worker_load_ms_per_s"}
               ) == 1
    st = v.state()
    assert st["latest"]["time_ms"] == 4_000 and st["decision"]["threshold"] == 0.7
    assert st["decision"]["reason"] == "none: because"
    # history: periods older than 10 s are dropped
    for t in range(6_000, 20_001, 2_000):
        v.step(period(t, seconds=2.0))
    assert v.series()["time_ms"][0] == 12_000


def test_replay_bins_records_into_periods_and_keeps_older_ones_as_state():
    v = View(APP, period_s=1.0, history_s=10.0)
    now = 100_500
    timed = [
        (50_000, "control", "RebalanceCommand", command(1, [0, 1, 1, 1], time=50_000)),
        (50_500, "metrics", *layout()),
        (60_000, "metrics", *summary(0, 0)),            # older than the history: state only
        (92_300, "metrics", *summary(1, 1, records=50)),
        (92_300, "metrics", *load(1, 1, 4, epoch=1)),
        (92_900, "status", "DistributorStatus", status("rebalance")),
        (95_000, "metrics", *summary(2, 1, records=70)),  # on a boundary: in (94 s, 95 s]
        (100_200, "metrics", *summary(3, 1, records=10)),  # in the last half period
    ]
    v.replay(timed, now)
    s = v.series()
    # periods end on whole seconds from the first recent record on, the last one at now
    assert s["time_ms"] == [*range(93_000, 100_001, 1_000), 100_500]
    assert s["output_rate"][:3] == [50.0, 0.0, 70.0]
    assert s["output_rate"][-2:] == [0.0, 20.0]       # 10 records in 0.5 s
    assert all(x is None for x in s["input_rate"] + s["lag"])
    assert v.epoch == 1 and v.status["decision"] == "rebalance"
    assert [c["owners"] for c in v.map()["partitions"]] == [[0], [1], [1], [1]]
    assert v.state()["rebalances"][0]["epoch"] == 1
    assert v.now_ms == now


def test_replay_with_past_topic_ends_gives_input_rate_and_lag():
    v = View(APP, period_s=1.0, history_s=60.0)
    timed = [(10_200, "metrics", *summary(0, 0, records=100, ends={"0": 100})),
             (13_500, "metrics", *summary(1, 0, records=300, ends={"0": 400}))]
    now = 16_000
    # at most 3 sampling points over the 6 periods: every 2nd period end
    assert v.replay_ends(timed, now, most=3) == [12_000, 14_000, 16_000]
    assert v.replay_ends(timed, now) == list(range(11_000, 16_001, 1_000))
    v.replay(timed, now, {12_000: {0: 300}, 14_000: {0: 700}, 16_000: {0: 900}})
    s = v.series()
    assert s["time_ms"] == list(range(11_000, 16_001, 1_000))
    # the rate over the 2 s between two samples; the first sample has none before it
    assert s["input_rate"] == [None, None, None, 200.0, None, 100.0]
    assert s["lag"] == [None, 200, None, 300, None, 500]


def test_replay_samples_the_topic_at_now_when_the_last_period_is_partial():
    """A batch summary in the period that ends now counts for the lag shown now."""
    v = View(APP, period_s=1.0, history_s=60.0)
    timed = [(10_200, "metrics", *summary(0, 0, records=10, ends={"0": 10})),
             (12_700, "metrics", *summary(1, 0, records=10, ends={"0": 20}))]
    now = 12_800
    assert v.replay_ends(timed, now) == [11_000, 12_000, 12_800]
    v.replay(timed, now, {11_000: {0: 300}, 12_000: {0: 600}, 12_800: {0: 600}})
    assert v.series()["lag"] == [290, 590, 580]


def test_replay_of_nothing_recent_leaves_no_periods():
    v = View(APP, history_s=10.0)
    v.replay([(1_000, "metrics", *layout())], 100_000)
    assert v.series()["time_ms"] == [] and v.layout is not None and v.latest() is None


def test_points_are_sampled_and_leave_with_the_window():
    v = View(APP, period_s=1.0, window_s=2.0)
    v.step(period(1_000), points=np.ones((MAX_POINTS, 2)), publications=5_000)
    v.step(period(2_000), points=np.zeros((10, 2)))
    m = v.map()
    assert len(m["points"]) == MAX_POINTS and m["publications"] == 5_010
    assert [0.0, 0.0] in m["points"] and [1.0, 1.0] in m["points"]
    v.step(period(3_000))
    m = v.map()
    assert m["points"] == [[0.0, 0.0]] * 10 and m["publications"] == 10


def test_problem_shows_in_the_state():
    v = View(APP)
    v.kafka_problem("cannot reach Kafka at x:1")
    v.tick(5_000)
    st = v.state()
    assert st["problem"] == "cannot reach Kafka at x:1" and st["time_ms"] == 5_000
    assert st["latest"] is None and v.map()["partitions"] == []


def test_publication_points_are_envelope_centres():
    c = codec()
    geoms = [shapely.Point(1, 2), shapely.box(0, 0, 4, 2)]
    values = [c.encode("Publication", {"id": i, "geometry": shapely.to_wkb(g),
                                       "event_time": 0}) for i, g in enumerate(geoms)]
    values.append(b"not a record")
    assert publication_points(values).tolist() == [[1.0, 2.0], [2.0, 1.0]]
    assert publication_points([]).shape == (0, 2)


def test_an_app_and_a_distributor_that_restart_are_followed_on():
    v = View(APP)
    v.step(period(1_000, [layout(partitions=4, time=1_000), summary(0, 0)]),
           statuses=[status(period=40)], commands=[command(1, [0, 1, 1, 1])])
    v.step(period(2_000, [summary(1, 1)]))
    assert len(v.map()["partitions"]) == 4
    # the app restarts with another P (its epoch recovered from the control topic)
    v.step(period(3_000, [layout(partitions=2, workers=2, time=2_500), summary(2, 1,
                                                                               partitions=2)]))
    m = v.map()
    assert [c["bounds"] for c in m["partitions"]] == [[0, 0, 1, 1], [1, 0, 2, 1]]
    # epoch 1's command was for 4 partitions: the owners of the new layout come from elsewhere
    assert [c["owners"] for c in m["partitions"]] == [[0], [1]]
    # the distributor restarts: its periods count from 0 again, the newest status is shown
    v.step(period(4_000), statuses=[status("waiting", period=0)])
    assert v.state()["decision"]["period"] == 0 and v.state()["decision"]["decision"] == "waiting"
    # an older layout read late does not replace the newer one
    v.remember([layout(partitions=4, time=1_000)])
    assert len(v.map()["partitions"]) == 2
