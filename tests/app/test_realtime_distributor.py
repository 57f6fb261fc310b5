"""The distributor beside a real-time app, live on Apache Kafka and a real Spark session.

The app (``--mode real-time``, W = 2) and ``geops distributor`` (its default mode, adaptive) run
as processes of their own while a producer writes a stream skewed to task 0: nine in ten
publications go to the publications partitions 0 and 2, which task 0 reads (p % 2 == 0). The
distributor must read the tasks' loads from the metrics topic and report their MLDC (task 0 the
busier) in its status every period, say once in its log why it commands nothing, and write no
command; the app's answers equal the brute-force oracle's.
"""

from __future__ import annotations

import pytest

from distributor.decisions import REAL_TIME_WHY
from geops.workload import generate_workload
from kafkaio.dump import by_schema
from kafkaio.topics import create_topics
from tests.app.test_realtime import FLAGS, _change
from tests.faults import stack
from tests.faults.stack import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.slow]

# nine of ten publications to task 0's partitions (0 and 2), one to task 1's (1)
SKEWED = [0, 2] * 4 + [0, 1]
PERIOD_S = 2
STEADY = 1_500      # items in a period of the stream at 1,000/s: most of PERIOD_S of it


def _statuses(cfg) -> list[dict]:
    return by_schema(cfg.kafka_client(), cfg.topic("status")).get("DistributorStatus", [])


def _judged(cfg) -> list[dict]:
    """The statuses of periods that judged the real-time app's loads."""
    return [s for s in _statuses(cfg)
            if s["reason"].startswith("real-time app:") and s["items"] > 0]


def test_the_distributor_reports_a_real_time_apps_skew_and_commands_nothing(
        broker, tmp_path, monkeypatch):
    env, cfg = stack.live_env(broker, tmp_path, "rtd-", monkeypatch)
    w = generate_workload(seed=66, subscriptions=400, publications=8_000)
    create_topics(cfg)
    _change(cfg, w.subscriptions, [])
    procs = stack.Procs(tmp_path / "logs")
    try:
        distributor = procs.geops("distributor", env, "distributor", "--period", f"{PERIOD_S}s")
        wait_for("the distributor to follow the metrics topic",
                 lambda: "balancing app" in distributor.logs(), 120, [distributor])
        app = procs.app(env, *FLAGS)
        stack.wait_ready(cfg, app)
        running = [app, distributor]
        publisher = stack.Publisher(cfg, w.publications, rate=1_000)
        publisher.publish(len(w.publications), SKEWED)
        publisher.close()
        wait_for("a whole period of the stream judged", lambda: any(
            s["items"] >= STEADY for s in _judged(cfg)), 180, running)
        oracle = stack.oracle_of(w.subscriptions, w.publications)
        stack.wait_answered(cfg, oracle, running)
        stack.assert_matches_oracle(cfg, oracle)

        for status in _judged(cfg):
            loads = status["worker_loads"]
            assert status["decision"] == "none" and status["mldc_predicted"] is None, status
            # the MLDC of the time each task reported (LB), not of even shares
            assert len(loads) == 2 and status["mldc"] == pytest.approx(
                (max(loads) - min(loads)) / sum(loads)), status
        # a whole period of the stream (~2,000 items): task 0 the busier by far (a task's time
        # holds a fixed cost per poll too, so nine tenths of the items are less of the time)
        steady = [s for s in _judged(cfg) if s["items"] >= STEADY]
        assert steady, _judged(cfg)
        for status in steady:
            assert status["worker_loads"][0] > status["worker_loads"][1], status
            assert status["mldc"] > 0.1, status
        busiest = max(s["mldc"] for s in _judged(cfg))
        assert f"real-time app: MLDC {busiest:.3f} over its 2 tasks" in distributor.logs()
        assert distributor.logs().count(REAL_TIME_WHY) == 1, distributor.logs()[-3000:]
        control = by_schema(cfg.kafka_client(), cfg.topic("control"))
        assert not control.get("RebalanceCommand"), control
        assert app.stop() == 0, app.logs()[-3000:]
        assert distributor.stop() == 0, distributor.logs()[-3000:]
        assert "Traceback" not in distributor.logs()
    finally:
        procs.reap()
