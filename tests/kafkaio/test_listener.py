"""What ``kafkaio.listener.probe`` tells apart, against listeners on loopback that behave as a
frozen broker, a TLS listener, a plaintext Kafka broker and a closed port do; and what
``check_reachable`` makes of a silent listener and of one that answers in another protocol."""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator

import pytest

from kafkaio.clients import check_reachable
from kafkaio.errors import KafkaOutage, KafkaUnavailable
from kafkaio.listener import Listener, probe

# What a TLS 1.2 listener sends to bytes that are not TLS: a fatal alert record.
TLS_ALERT = bytes([0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x50])


def _kafka_answer(conn: socket.socket) -> None:
    """Answers one request as a Kafka broker frames it: size, then the request's correlation
    id (ApiVersions' body left out: the probe reads no further)."""
    size = struct.unpack(">i", conn.recv(4))[0]
    request = conn.recv(size)
    correlation = request[4:8]
    conn.sendall(struct.pack(">i", 6) + correlation + b"\x00\x00")


def _alert(conn: socket.socket) -> None:
    conn.recv(64)
    conn.sendall(TLS_ALERT)


def _close(conn: socket.socket) -> None:
    conn.recv(64)


@pytest.fixture
def serve() -> Iterator[Callable[[Callable[[socket.socket], None] | None], str]]:
    """A loopback listener, given what it does with each connection it accepts (None: it never
    accepts, as a stopped process's listening socket, whose handshakes the kernel completes)."""
    socks: list[socket.socket] = []
    done = threading.Event()

    def start(handle: Callable[[socket.socket], None] | None) -> str:
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        sock.listen(16)
        socks.append(sock)
        if handle is not None:
            def loop() -> None:
                sock.settimeout(0.2)
                while not done.is_set():
                    try:
                        conn, _ = sock.accept()
                    except OSError:
                        continue
                    with conn:
                        handle(conn)
            threading.Thread(target=loop, daemon=True).start()
        return f"127.0.0.1:{sock.getsockname()[1]}"

    yield start
    done.set()
    for sock in socks:
        sock.close()


def _closed_port() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{sock.getsockname()[1]}"


@pytest.mark.parametrize("protocol", ["plaintext", "SASL_PLAINTEXT", "ssl", "SASL_SSL"])
def test_a_listener_that_accepts_but_never_answers_is_silent(serve, protocol):
    assert probe(serve(None), protocol, timeout=0.3) is Listener.SILENT


@pytest.mark.parametrize("protocol", ["plaintext", "ssl"])
def test_nothing_listening_is_refused(protocol):
    assert probe(_closed_port(), protocol, timeout=0.3) is Listener.REFUSED


def test_a_kafka_answer_in_plaintext_framing_answers(serve):
    assert probe(serve(_kafka_answer), "plaintext") is Listener.ANSWERS


@pytest.mark.parametrize("handle", [_alert, _close], ids=["tls-alert", "closed"])
def test_a_plaintext_client_at_a_listener_that_is_not_plaintext_kafka_meets_another_protocol(
        serve, handle):
    assert probe(serve(handle), "plaintext") is Listener.FOREIGN


@pytest.mark.parametrize("handle", [_kafka_answer, _close], ids=["kafka-bytes", "closed"])
def test_a_tls_client_at_a_plaintext_listener_meets_another_protocol(serve, handle):
    assert probe(serve(handle), "SASL_SSL") is Listener.FOREIGN


def test_a_silent_listener_at_start_is_an_outage_up_to_the_limit(serve, caplog):
    address = serve(None)
    with pytest.raises(KafkaOutage, match=rf"Kafka at {address} did not answer for \d+ s "
                                          r"\(connecting: it accepts connections but does not "
                                          r"answer\); giving up after the outage limit of 2 s"):
        check_reachable({"bootstrap.servers": address}, timeout=0.5, outage_limit=2.0)
    assert any("accepts connections but does not answer; waiting for it up to the outage "
               "limit of 2 s" in r.getMessage() for r in caplog.records)


def test_a_silent_listener_without_an_outage_limit_is_named_as_silent(serve):
    address = serve(None)
    with pytest.raises(KafkaUnavailable, match="accepts connections but has not answered") as got:
        check_reachable({"bootstrap.servers": address}, timeout=1.0)
    assert not isinstance(got.value, KafkaOutage)
    assert "security protocol" not in str(got.value)


def test_a_listener_in_another_protocol_is_named_at_once_also_with_an_outage_limit(serve):
    address = serve(_alert)
    started = time.monotonic()
    with pytest.raises(KafkaUnavailable, match=f"Kafka at {address} answers in another security "
                                               "protocol than this client's "
                                               "security.protocol=plaintext") as got:
        check_reachable({"bootstrap.servers": address}, timeout=60.0, outage_limit=60.0)
    assert not isinstance(got.value, KafkaOutage)
    assert time.monotonic() - started < 30  # told apart by its answer, not by a wait


def test_a_listener_whose_backlog_is_full_is_silent_not_refused(serve):
    """A paused broker accepts no connection: once its backlog is full the kernel drops new
    handshakes, as a network partition does; that is silence too, never 'nothing listens'."""
    address = serve(None)
    host, port = address.rsplit(":", 1)
    held: list[socket.socket] = []
    try:
        for _ in range(200):  # until the kernel drops a handshake: the backlog is full
            held.append(socket.create_connection((host, int(port)), timeout=0.3))
        pytest.fail("200 connections queued on a listen backlog of 16")
    except TimeoutError:
        pass
    finally:
        for sock in held:
            sock.close()
    assert probe(address, "plaintext", timeout=0.3) is Listener.SILENT


def test_a_listener_that_answers_again_after_silence_gets_its_time(serve):
    """A paused broker thawed: the time a listener that answers may take to serve the client's
    requests counts from the end of the silence, not from the start of the wait (which would
    name another security protocol the moment it answers)."""
    thawed = threading.Event()
    at: list[float] = []

    def frozen_then_answers(conn: socket.socket) -> None:
        thawed.wait()
        # framed as Kafka, but not an answer a client can use; a connection the client gave up
        # while it waited fails
        with contextlib.suppress(OSError, struct.error):
            _kafka_answer(conn)

    address = serve(frozen_then_answers)
    thaw = threading.Timer(3.0, lambda: (at.append(time.monotonic()), thawed.set()))
    thaw.start()
    with pytest.raises(KafkaUnavailable, match="answers but closed this client's requests"):
        check_reachable({"bootstrap.servers": address}, timeout=3.0, outage_limit=60.0)
    assert at, "gave up before the listener answered"
    # at least the timeout less one probe's wait (1 s) after the silence ended
    assert time.monotonic() - at[0] >= 1.5
