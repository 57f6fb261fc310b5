"""The dashboard's HTTP server on a free port, fed a hand-made view (no Kafka)."""

from __future__ import annotations

import http.client
import json
import re
import threading
from collections.abc import Iterator

import pytest
from prometheus_client.parser import text_string_to_metric_families

from dashboard.server import DashboardServer, Hub
from dashboard.state import View
from tests.dashboard.test_state import command, layout, load, period, status, summary

APP = "a"


@pytest.fixture
def served() -> Iterator[tuple[DashboardServer, Hub, View]]:
    hub = Hub()
    server = DashboardServer("127.0.0.1", 0, hub)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                              daemon=True)
    thread.start()
    view = View(APP, period_s=1.0)
    try:
        yield server, hub, view
    finally:
        hub.close()
        server.shutdown()
        server.server_close()
        thread.join(5)


def get(server: DashboardServer, path: str, host: str | None = None, method: str = "GET"
        ) -> tuple[int, dict[str, str], bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
    headers = {} if host is None else {"Host": host}
    conn.request(method, path, headers=headers)
    resp = conn.getresponse()
    body = resp.read()
    conn.close()
    return resp.status, dict(resp.getheaders()), body


def feed(view: View, hub: Hub) -> None:
    view.follower.resume({0: 0})
    view.step(period(1_000, [layout(), summary(0, 0, 200, {"0": 150}), load(0, 0, 30),
                             load(3, 1, 10)], ends={0: 400}, events=12),
              statuses=[status()], commands=[command(1, [0, 0, 1, 1])])
    hub.publish(view)


def test_documents_page_and_vendored_libraries(served):
    server, hub, view = served
    assert server.url == f"http://127.0.0.1:{server.port}/"
    code, _, _ = get(server, "/api/state")
    assert code == 503  # nothing published yet
    feed(view, hub)
    code, headers, body = get(server, "/api/state")
    state = json.loads(body)
    assert code == 200 and headers["Content-Type"] == "application/json"
    assert state["latest"]["output_rate"] == 200.0 and state["latest"]["lag"] == 250
    assert state["decision"]["decision"] == "none" and state["rebalances"][0]["epoch"] == 1
    m = json.loads(get(server, "/api/map")[2])
    assert [p["load_ms_per_s"] for p in m["partitions"]] == [6.0, 0.0, 0.0, 2.0]
    s = json.loads(get(server, "/api/series")[2])
    assert s["time_ms"] == [1_000] and s["input_rate"] == [400.0]

    code, headers, page = get(server, "/")
    assert code == 200 and headers["Content-Type"].startswith("text/html")
    assert "default-src 'self'" in headers["Content-Security-Policy"]
    # every script and stylesheet comes from this server: no CDN, works offline
    refs = re.findall(r'(?:src|href)="([^"]+)"', page.decode())
    assert refs and all(r.startswith("/static/") or r.startswith("data:") for r in refs), refs
    for ref in refs:
        if ref.startswith("/static/"):
            assert get(server, ref)[0] == 200, ref
    for lib in ("leaflet", "uplot"):
        code, _, text = get(server, f"/static/vendor/{lib}/LICENSE")
        assert code == 200 and b"Copyright" in text


def test_read_only_and_loopback_hosts_only(served):
    server, hub, view = served
    feed(view, hub)
    assert get(server, "/api/state", method="POST")[0] == 405
    assert get(server, "/api/state", method="DELETE")[0] == 405
    assert get(server, "/api/state", host=f"localhost:{server.port}")[0] == 200
    code, _, body = get(server, "/api/state", host=f"attacker.example:{server.port}")
    assert code == 403 and b"Host" in body
    assert get(server, "/static/../feed.py")[0] == 404
    assert get(server, "/nothing")[0] == 404


def test_prometheus_text(served):
    server, hub, view = served
    feed(view, hub)
    code, headers, body = get(server, "/metrics")
    assert code == 200 and headers["Content-Type"].startswith("text/plain")
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for family in text_string_to_metric_families(body.decode())
               for s in family.samples}
    app = (("app_id", APP),)
    assert samples[("geops_dashboard_kafka_up", app)] == 1.0
    assert samples[("geops_output_publications_per_second", app)] == 200.0
    assert samples[("geops_input_publications_per_second", app)] == 400.0
    assert samples[("geops_consumer_lag_records", app)] == 250.0
    assert samples[("geops_mldc", app)] == 0.5
    assert samples[("geops_events_per_second", app)] == 12.0
    assert samples[("geops_worker_load_ms_per_second", (*app, ("worker", "0")))] == 30.0
    assert samples[("geops_partition_load_ms_per_second", (*app, ("partition", "3")))] == 2.0
    assert samples[("geops_partition_subscriptions", (*app, ("partition", "3")))] == 40.0
    assert samples[("geops_distributor_decision",
                    (*app, ("decision", "none"), ("mode", "dynamic")))] == 1.0
    assert ("geops_latency_p50_milliseconds", app) in samples
    view.kafka_problem("cannot reach Kafka")
    hub.publish(view)
    text = get(server, "/metrics")[2].decode()
    assert 'geops_dashboard_kafka_up{app_id="a"} 0.0' in text


def events(resp: http.client.HTTPResponse) -> Iterator[tuple[str, dict]]:
    """(event name, data) of a server-sent event stream."""
    name, data = None, []
    while True:
        line = resp.readline().decode()
        if not line:
            return
        line = line.rstrip("\n")
        if line.startswith("event: "):
            name = line[len("event: "):]
        elif line.startswith("data: "):
            data.append(line[len("data: "):])
        elif not line and name:
            yield name, json.loads("\n".join(data))
            name, data = None, []


def test_event_stream_snapshot_then_updates(served):
    server, hub, view = served
    feed(view, hub)
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
    conn.request("GET", "/api/events")
    resp = conn.getresponse()
    assert resp.status == 200 and resp.getheader("Content-Type") == "text/event-stream"
    stream = events(resp)
    name, doc = next(stream)
    assert name == "snapshot" and doc["series"]["time_ms"] == [1_000]
    assert doc["map"]["partitions"][0]["owners"] == [0]
    view.step(period(2_000, [summary(1, 1, 50)], ends={0: 500}))
    hub.publish(view)
    name, doc = next(stream)
    assert name == "update" and doc["version"] == 2
    assert doc["row"]["time_ms"] == 2_000 and doc["row"]["output_rate"] == 50.0
    assert doc["map"]["epoch"] == 1 and doc["map"]["partitions"][1]["owners"] == [0]
    view.tick(2_500)  # no new period: the update carries no row
    hub.publish(view)
    name, doc = next(stream)
    assert name == "update" and doc["row"] is None
    conn.close()
