"""The dashboard's HTTP server (standard library): the page, its JSON documents, server-sent
events and the Prometheus text at /metrics. Read-only: GET (and HEAD) only.

The feed publishes the view once a period (``Hub.publish``): the documents are serialised
then, once, and every request and event stream is served from that copy. An event stream
(``/api/events``) starts with a ``snapshot`` event (state, map and the whole series) and then
sends an ``update`` event (state, map and the new period's row, if any) each period, a fresh
``snapshot`` when it fell behind, and a comment line every 15 s while nothing happens.

Requests whose Host header names no loopback address are refused while the server listens on
one (a web page elsewhere cannot reach it through a DNS name that resolves to 127.0.0.1).
"""

from __future__ import annotations

import ipaddress
import json
import logging
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from importlib.resources.abc import Traversable
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from dashboard.prometheus import ViewCollector
from dashboard.state import View

log = logging.getLogger("geops.dashboard")

STATIC: Traversable = resources.files(__package__) / "static"
TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
         ".css": "text/css; charset=utf-8", ".png": "image/png", ".svg": "image/svg+xml",
         ".txt": "text/plain; charset=utf-8", "": "text/plain; charset=utf-8"}
KEEPALIVE_S = 15.0
SECURITY_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Content-Security-Policy": ("default-src 'self'; script-src 'self'; connect-src 'self'; "
                                "img-src 'self' data:; style-src 'self' 'unsafe-inline'; "
                                "frame-ancestors 'none'"),
}


@dataclass(frozen=True)
class Published:
    """One period's documents, serialised."""

    version: int
    state: dict[str, Any]
    map: dict[str, Any]
    state_json: bytes
    map_json: bytes
    series_json: bytes
    snapshot_event: bytes
    update_event: bytes


def _event(name: str, doc: dict[str, Any]) -> bytes:
    return f"event: {name}\ndata: {json.dumps(doc, separators=(',', ':'))}\n\n".encode()


def _dumps(doc: dict[str, Any]) -> bytes:
    return json.dumps(doc, separators=(",", ":")).encode()


class Hub:
    """The newest published documents, and a condition event streams wait on."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._latest: Published | None = None
        self._last_row_ms: int | None = None
        self.closed = False

    def publish(self, view: View) -> None:
        """Serialise the view's documents as the newest version and wake the streams."""
        state, map_doc, series = view.state(), view.map(), view.series()
        latest = state["latest"]
        row = latest if latest is not None and latest["time_ms"] != self._last_row_ms else None
        if row is not None:
            self._last_row_ms = row["time_ms"]
        with self._cond:
            version = 1 if self._latest is None else self._latest.version + 1
        published = Published(
            version, state, map_doc, _dumps(state), _dumps(map_doc), _dumps(series),
            _event("snapshot", {"version": version, "state": state, "map": map_doc,
                                "series": series}),
            _event("update", {"version": version, "state": state, "map": map_doc,
                              "row": row}))
        with self._cond:
            self._latest = published
            self._cond.notify_all()

    def latest(self) -> Published | None:
        return self._latest

    def wait_newer(self, version: int, timeout: float) -> Published | None:
        """The newest documents once newer than ``version``; None after ``timeout`` or when
        the hub closed."""
        with self._cond:
            self._cond.wait_for(lambda: self.closed or (
                self._latest is not None and self._latest.version > version), timeout)
            if self.closed or self._latest is None or self._latest.version <= version:
                return None
            return self._latest

    def close(self) -> None:
        with self._cond:
            self.closed = True
            self._cond.notify_all()


def static_files(root: Traversable = STATIC) -> dict[str, tuple[bytes, str]]:
    """URL path (``/static/...``) -> (content, type) of every file under ``root``."""
    out: dict[str, tuple[bytes, str]] = {}

    def walk(node: Traversable, prefix: str) -> Iterator[tuple[str, Traversable]]:
        for child in node.iterdir():
            if child.is_dir():
                yield from walk(child, f"{prefix}{child.name}/")
            else:
                yield f"{prefix}{child.name}", child

    for rel, node in walk(root, ""):
        suffix = "." + rel.rsplit(".", 1)[1] if "." in rel.rsplit("/", 1)[-1] else ""
        out[f"/static/{rel}"] = (node.read_bytes(), TYPES.get(suffix, "application/octet-stream"))
    return out


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return host == "localhost"


class DashboardServer(ThreadingHTTPServer):
    """Serves ``hub``'s documents and the page; ``url`` says where."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, host: str, port: int, hub: Hub):
        self.hub = hub
        self.files = static_files()
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(ViewCollector(hub.latest))
        super().__init__((host, port), Handler)
        self.host = host
        self.port = self.server_address[1]
        self.loopback_only = _loopback(host)
        self.allowed_hosts = {f"{name}:{self.port}" for name in
                              ("localhost", "127.0.0.1", "[::1]", host)}

    @property
    def url(self) -> str:
        shown = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{shown}:{self.port}/"


class Handler(BaseHTTPRequestHandler):
    """GET routes of the dashboard; everything else is refused."""

    server: DashboardServer
    server_version = "geops-dashboard"

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s %s", self.address_string(), format % args)

    def do_HEAD(self) -> None:
        self._route(body=False)

    def do_GET(self) -> None:
        self._route(body=True)

    def _read_only(self) -> None:
        self.send_response(HTTPStatus.METHOD_NOT_ALLOWED)
        self.send_header("Allow", "GET, HEAD")
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_POST = do_PUT = do_PATCH = do_DELETE = _read_only

    def _refuse(self, status: HTTPStatus, text: str, body: bool = True) -> None:
        self._send(status, text.encode() + b"\n", "text/plain; charset=utf-8", body)

    def _send(self, status: HTTPStatus, data: bytes, kind: str, body: bool = True,
              cache: str = "no-cache") -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", cache)
        for name, value in SECURITY_HEADERS.items():
            self.send_header(name, value)
        self.end_headers()
        if body:
            self.wfile.write(data)

    def _route(self, body: bool) -> None:
        srv = self.server
        host = self.headers.get("Host", "")
        if srv.loopback_only and host not in srv.allowed_hosts:
            self._refuse(HTTPStatus.FORBIDDEN, f"unexpected Host header {host!r}", body)
            return
        path = self.path.split("?", 1)[0]
        if path in ("/", "/index.html"):
            data, kind = srv.files["/static/index.html"]
            self._send(HTTPStatus.OK, data, kind, body)
        elif path in srv.files:
            data, kind = srv.files[path]
            self._send(HTTPStatus.OK, data, kind, body)
        elif path == "/metrics":
            self._send(HTTPStatus.OK, generate_latest(srv.registry), CONTENT_TYPE_LATEST, body)
        elif path == "/api/events" and body:
            self._events()
        elif path in ("/api/state", "/api/map", "/api/series"):
            latest = srv.hub.latest()
            if latest is None:
                self._refuse(HTTPStatus.SERVICE_UNAVAILABLE, "starting; try again", body)
                return
            doc = {"/api/state": latest.state_json, "/api/map": latest.map_json,
                   "/api/series": latest.series_json}[path]
            self._send(HTTPStatus.OK, doc, "application/json", body)
        else:
            self._refuse(HTTPStatus.NOT_FOUND, f"no {path} here", body)

    def _events(self) -> None:
        hub = self.server.hub
        self.send_response(HTTPStatus.OK)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        for name, value in SECURITY_HEADERS.items():
            self.send_header(name, value)
        self.end_headers()
        self.close_connection = True
        try:
            self.wfile.write(b"retry: 2000\n\n")
            seen = 0
            latest = hub.latest()
            if latest is not None:
                self.wfile.write(latest.snapshot_event)
                seen = latest.version
            self.wfile.flush()
            while not hub.closed:
                newer = hub.wait_newer(seen, KEEPALIVE_S)
                if newer is None:
                    if hub.closed:
                        break
                    self.wfile.write(b": keep-alive\n\n")
                else:
                    event = newer.update_event if newer.version == seen + 1 and seen else \
                        newer.snapshot_event
                    self.wfile.write(event)
                    seen = newer.version
                self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass  # the page went away
