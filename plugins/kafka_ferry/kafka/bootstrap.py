"""Can anything be reached at a cluster's bootstrap addresses? A plain TCP connect, before any Kafka client.

Why at pre-flight: a wrong address or port gives "Connection refused" at once, but a Kafka client retries
it until its request times out (30 s), and the task's retries repeat that three times. When no bootstrap
address accepts a TCP connection, no wait inside the run will change that, so the pre-flight fails once,
naming the connection and the addresses. Once a connection was made, later failures keep their retries.
"""

from __future__ import annotations

import socket
from concurrent.futures import ThreadPoolExecutor

DEFAULT_PORT = 9092
PROBE_TIMEOUT_S = 5.0


def parse_addresses(servers: str | None) -> list[tuple[str, int]]:
    """(host, port) of each bootstrap.servers entry: ``[proto://][user@]host[:port]``, IPv6 in brackets."""
    addresses = []
    for entry in (servers or "").split(","):
        entry = entry.strip().split("://", 1)[-1].rsplit("@", 1)[-1]
        if not entry:
            continue
        if entry.startswith("["):
            host, _, rest = entry[1:].partition("]")
            port = rest.lstrip(":")
        else:
            host, sep, port = entry.rpartition(":")
            if not sep:
                host, port = entry, ""
        addresses.append((host, int(port) if port.isdigit() else DEFAULT_PORT))
    return addresses


def _connect(address: tuple[str, int], timeout_s: float) -> str | None:
    """None when the address accepts a TCP connection, else why not."""
    try:
        with socket.create_connection(address, timeout=timeout_s):
            return None
    except socket.gaierror as exc:
        return f"name not resolved ({exc.strerror or exc})"
    except TimeoutError:
        return f"no answer in {timeout_s:g} s"
    except OSError as exc:
        return exc.strerror or str(exc)


def unreachable(servers: str | None, timeout_s: float = PROBE_TIMEOUT_S) -> dict[str, str] | None:
    """Why each address refused, when none accepts a connection; None as soon as one does (or none is given:
    the client's own config check names that)."""
    addresses = parse_addresses(servers)
    if not addresses:
        return None
    with ThreadPoolExecutor(max_workers=min(8, len(addresses))) as pool:
        reasons = list(pool.map(lambda a: _connect(a, timeout_s), addresses))
    if any(reason is None for reason in reasons):
        return None
    return {_address(host, port): reason for (host, port), reason in zip(addresses, reasons, strict=True)
            if reason is not None}  # every one is, checked above


def _address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


# --- what a listener speaks ------------------------------------------------------------------------------------
# Why: a client configured for PLAINTEXT that reaches a TLS or SASL listener gets no useful error from librdkafka:
# it reconnects until its request times out and says "timed out" (47 s in the field, no hint). Two requests on a
# raw socket tell the cases apart in milliseconds: a TLS listener answers the first bytes with a TLS alert record;
# a SASL listener answers ApiVersions (allowed before authentication, KIP-35) but closes the connection on any
# other request until the client authenticates.
TLS = "TLS"
SASL = "SASL"
_CLIENT_ID = b"kafka-ferry-probe"
_TLS_RECORD_TYPES = (0x15, 0x16)  # alert, handshake


def _request(api_key: int, correlation_id: int, body: bytes = b"") -> bytes:
    """A version-0 Kafka request frame (header v1: api key, version, correlation id, client id)."""
    frame = (api_key.to_bytes(2, "big", signed=True) + (0).to_bytes(2, "big") +
             correlation_id.to_bytes(4, "big", signed=True) + len(_CLIENT_ID).to_bytes(2, "big") + _CLIENT_ID + body)
    return len(frame).to_bytes(4, "big") + frame


def _read_response(sock: socket.socket) -> bytes | None:
    """One response frame's first bytes, or None when the peer closed the connection first."""
    data = b""
    while len(data) < 8:
        chunk = sock.recv(4096)
        if not chunk:
            return data or None
        data += chunk
    return data


def classify_listener(api_versions_answer: bytes | None, metadata_answered: bool | None) -> str | None:
    """TLS, SASL, or None (a plaintext Kafka listener, or nothing conclusive) from what a plaintext client saw."""
    if api_versions_answer and len(api_versions_answer) >= 2 and api_versions_answer[0] in _TLS_RECORD_TYPES \
            and api_versions_answer[1] == 0x03:
        return TLS
    if api_versions_answer and metadata_answered is False:
        return SASL
    return None


def listener_speaks(address: tuple[str, int], timeout_s: float = PROBE_TIMEOUT_S) -> str | None:
    """TLS or SASL when the listener at ``address`` needs it from a plaintext client; None when it speaks plain
    Kafka or the probe cannot tell (a timeout, a reset: the client's own errors then say what they say)."""
    try:
        with socket.create_connection(address, timeout=timeout_s) as sock:
            sock.sendall(_request(18, 1))  # ApiVersions v0
            first = _read_response(sock)
            if classify_listener(first, None) or not first:
                return classify_listener(first, None)
            sock.sendall(_request(3, 2, (0).to_bytes(4, "big")))  # Metadata v0, no topics
            try:
                answered = _read_response(sock) is not None
            except ConnectionResetError:
                answered = False
            return classify_listener(first, answered)
    except OSError:
        return None
