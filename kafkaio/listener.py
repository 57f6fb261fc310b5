"""What a Kafka listener does when spoken to, told apart by its answer rather than guessed.

A client that gets no metadata may face four different things, and each wants a different
reaction: nothing listening (a wrong address, a broker not started), a listener that answers in
another protocol than the client's (a plaintext client at a TLS listener gets a TLS alert; a TLS
client at a plaintext listener has its handshake closed), a broker that speaks the client's
protocol (so the failure is elsewhere), and a broker that accepts the connection and then says
nothing at all: a paused JVM (a long garbage collection, SIGSTOP), a network partition, a VM
migration, a broker still loading its logs. The kernel completes a TCP handshake on a listening
socket whether or not the process behind it runs, so only the silence tells the last case apart;
it is an outage, to be waited out, never a wrong protocol.

``probe`` opens one connection in the client's framing (a Kafka ApiVersions request for
PLAINTEXT and SASL_PLAINTEXT, a TLS handshake for SSL and SASL_SSL) and reports which of these it
met within ``timeout`` seconds.
"""

from __future__ import annotations

import enum
import socket
import ssl
import struct

# Kafka's ApiVersions request (key 18) at version 0: every broker answers it, whatever versions
# it supports, and a SASL listener answers it before authentication too.
_API_VERSIONS = 18
_CORRELATION_ID = 0x6765_6F70  # any number: the answer must carry it back
_CLIENT_ID = b"geops-probe"
# The first byte of a TLS record: an alert or a handshake message, as a TLS listener sends to
# bytes that are not TLS.
_TLS_RECORD_TYPES = (0x15, 0x16)


class Listener(enum.Enum):
    """What the probe met at the bootstrap server."""

    REFUSED = "nothing accepts connections"
    SILENT = "accepts connections but does not answer"
    FOREIGN = "answers in another protocol"
    ANSWERS = "answers in the client's protocol"


def probe(servers: str, protocol: str, timeout: float = 1.0) -> Listener:
    """Speak to the first of the bootstrap ``servers`` as a client of ``protocol``
    (``security.protocol``, any case) would, and say what answered."""
    host, _, port = servers.split(",")[0].strip().rpartition(":")
    try:
        sock = socket.create_connection((host.strip("[]") or "127.0.0.1", int(port)),
                                        timeout=timeout)
    except TimeoutError:  # a partition drops the handshake; so does a paused broker's full
        return Listener.SILENT  # backlog of connections it has not accepted
    except (OSError, ValueError):
        return Listener.REFUSED
    with sock:
        if protocol.lower() in ("ssl", "sasl_ssl"):
            return _tls(sock, host)
        return _kafka(sock)


def _kafka(sock: socket.socket) -> Listener:
    """An ApiVersions request in Kafka's plaintext framing; its answer, if any."""
    body = struct.pack(">hhih", _API_VERSIONS, 0, _CORRELATION_ID, len(_CLIENT_ID)) + _CLIENT_ID
    try:
        sock.sendall(struct.pack(">i", len(body)) + body)
        head = _read(sock, 8)
    except TimeoutError:
        return Listener.SILENT
    except OSError:  # reset: the listener closed on what it read
        return Listener.FOREIGN
    if len(head) == 8 and struct.unpack(">i", head[4:])[0] == _CORRELATION_ID:
        return Listener.ANSWERS
    return Listener.FOREIGN  # closed, or bytes that are not Kafka's answer (a TLS alert)


def _read(sock: socket.socket, n: int) -> bytes:
    """Up to ``n`` bytes: fewer when the peer closes or the first bytes are a TLS record."""
    got = b""
    while len(got) < n:
        chunk = sock.recv(n - len(got))
        if not chunk or (not got and chunk[0] in _TLS_RECORD_TYPES):
            return got + chunk
        got += chunk
    return got


def _tls(sock: socket.socket, host: str) -> Listener:
    """A TLS handshake that trusts any certificate: only whether TLS answers matters here
    (librdkafka's own handshake checks the certificate and reports a failure itself)."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    try:
        with context.wrap_socket(sock, server_hostname=host or None):
            return Listener.ANSWERS
    except TimeoutError:
        return Listener.SILENT
    except ssl.SSLError as exc:
        # an alert is TLS speaking (e.g. a listener that wants a client certificate); a record
        # that is no TLS at all, or a close, is a listener of another protocol
        return Listener.ANSWERS if "ALERT" in str(exc.reason or "").upper() else Listener.FOREIGN
    except OSError:
        return Listener.FOREIGN
