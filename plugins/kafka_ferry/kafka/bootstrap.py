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
    return {_address(host, port): reason for (host, port), reason in zip(addresses, reasons, strict=True)}


def _address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
