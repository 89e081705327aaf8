"""Many groups' committed offsets in one OffsetFetch per coordinator: the one call the client lacks, wrapped.

Why: librdkafka's ``list_consumer_group_offsets`` sends one OffsetFetch per group, so a sensor's poke, a translation
or a commit check over 200 groups is 200 requests. Kafka answers many groups in one OffsetFetch since v8 (KIP-709,
Kafka 3.0) and finds many coordinators in one FindCoordinator since v4 (KIP-699). One call here is: ApiVersions on a
bootstrap broker (a broker without those versions, such as a ZooKeeper-era 2.x, is answered by the client's path),
FindCoordinator v4 for every group, then one OffsetFetch v8 per coordinator and ``GROUPS_PER_REQUEST`` groups,
coordinators in parallel. The bytes are declared in ``core.offsets.offset_fetch_wire``.

Only what this module can reach exactly as librdkafka would is tried: ``unsupported`` names any setting that
changes how a connection is made or authenticated beyond PLAINTEXT / SSL / SASL_PLAINTEXT / SASL_SSL with PLAIN or
SCRAM-SHA-256/512, a CA file, a client certificate and key, and host-name checking; the caller then keeps the
client's path. Connections are opened per call and closed at its end (nothing is cached: a changed password or a
moved coordinator is seen at the next call). Every request is counted in ``call_count`` as ``wire.<Api>``. Secrets
are never in a message: errors name the broker address and what failed.
"""

from __future__ import annotations

import socket
import ssl
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

from kafka_ferry.core.common.failures import Retryable
from kafka_ferry.core.offsets import offset_fetch_wire as wire
from kafka_ferry.kafka import call_count
from kafka_ferry.kafka.bootstrap import parse_addresses

GROUPS_PER_REQUEST = 200
CLIENT_ID = "kafka-ferry-offset-fetch"
PROTOCOLS = frozenset({"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"})
MECHANISMS = frozenset({"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"})
# Settings this module honours exactly as librdkafka does.
HANDLED = frozenset({
    "bootstrap.servers", "security.protocol", "sasl.mechanism", "sasl.mechanisms", "sasl.username", "sasl.password",
    "ssl.ca.location", "ssl.certificate.location", "ssl.key.location", "ssl.key.password",
    "ssl.endpoint.identification.algorithm",
})
# Any other setting starting so changes how a connection is made or authenticated (GSSAPI, OAUTHBEARER, inline PEMs,
# keystores, engines and providers, certificate checks turned off, socket and address options, interceptors): not tried.
CONNECTION_PREFIXES = ("ssl.", "ssl_", "sasl.", "enable.ssl", "enable.sasl", "security.", "socket.", "broker.",
                       "client.dns", "oauthbearer", "https.", "metadata.broker.list", "plugin.", "interceptor",
                       "resolve", "connect")

T = TypeVar("T")


class BatchedUnavailable(Retryable, RuntimeError):
    """The batched read cannot be used for this cluster (its brokers lack the versions): the client's path serves."""


class BatchedFailed(Retryable, RuntimeError):
    """The batched read failed for this call (connection, TLS, authentication, protocol): the client's path serves."""


def unsupported(config: Mapping[str, Any]) -> str | None:
    """Why the batched read is not tried with ``config`` (a librdkafka config), or None when it is. The reason names
    settings and values that are not secret (protocol, mechanism, setting names), never a password."""
    protocol = str(config.get("security.protocol", "PLAINTEXT")).upper()
    if protocol not in PROTOCOLS:
        return f"security.protocol {protocol!r} is not one of {sorted(PROTOCOLS)}"
    if protocol.startswith("SASL_"):
        mechanism = str(config.get("sasl.mechanism", config.get("sasl.mechanisms", "GSSAPI"))).upper()
        if mechanism not in MECHANISMS:
            return f"sasl.mechanism {mechanism!r} is not one of {sorted(MECHANISMS)}"
        if not config.get("sasl.username") or config.get("sasl.password") is None:
            return "sasl.username or sasl.password is not set"
    algorithm = str(config.get("ssl.endpoint.identification.algorithm", "https")).lower()
    if algorithm not in ("https", "none"):
        return f"ssl.endpoint.identification.algorithm {algorithm!r} is not https or none"
    if str(config.get("ssl.ca.location", "")).lower() == "probe":
        return "ssl.ca.location 'probe' (librdkafka's own search for a CA store)"
    if not parse_addresses(config.get("bootstrap.servers")):
        return "bootstrap.servers is not set"
    other = sorted(k for k in config if k not in HANDLED and k.lower().startswith(CONNECTION_PREFIXES)
                   and not (k == "enable.ssl.certificate.verification" and str(config[k]).lower() == "true"))
    if other:
        return f"connection setting(s) {', '.join(other)} are not handled by the batched read"
    return None


@dataclass
class Settings:
    """How to reach and authenticate to a broker, from a config ``unsupported`` accepted."""

    tls: ssl.SSLContext | None
    mechanism: str | None
    username: str = field(default="", repr=False)
    password: str = field(default="", repr=False)

    @classmethod
    def of(cls, config: Mapping[str, Any]) -> Settings:
        protocol = str(config.get("security.protocol", "PLAINTEXT")).upper()
        tls = None
        if protocol in ("SSL", "SASL_SSL"):
            tls = ssl.create_default_context(cafile=config.get("ssl.ca.location") or None)
            tls.check_hostname = str(config.get("ssl.endpoint.identification.algorithm", "https")).lower() == "https"
            if config.get("ssl.certificate.location"):
                tls.load_cert_chain(config["ssl.certificate.location"], config.get("ssl.key.location") or None,
                                    config.get("ssl.key.password") or None)
        mechanism = None
        if protocol.startswith("SASL_"):
            mechanism = str(config.get("sasl.mechanism", config.get("sasl.mechanisms"))).upper()
        return cls(tls, mechanism, str(config.get("sasl.username", "")), str(config.get("sasl.password", "")))


class Connection:
    """One broker connection: TLS and SASL as configured, requests one at a time, each counted."""

    def __init__(self, host: str, port: int, settings: Settings, timeout_s: float) -> None:
        self.address = f"{host}:{port}"
        self._correlation = 0
        raw = socket.create_connection((host, port), timeout=timeout_s)
        try:
            self._sock = settings.tls.wrap_socket(raw, server_hostname=host) if settings.tls else raw
        except BaseException:
            raw.close()
            raise

    def close(self) -> None:
        self._sock.close()

    def request(self, name: str, api_key: int, version: int, body: bytes, read: Callable[[wire.Reader], T], *,
                flexible: bool, flexible_response: bool | None = None) -> T:
        self._correlation += 1
        call_count.record(f"wire.{name}")
        self._sock.sendall(wire.request_message(api_key, version, self._correlation, CLIENT_ID, body,
                                                flexible=flexible))
        size = wire.frame_size(name, self._recv(name, 4))
        reader = wire.response_body(name, self._recv(name, size), self._correlation,
                                    flexible=flexible if flexible_response is None else flexible_response)
        return read(reader)

    def _recv(self, name: str, size: int) -> bytes:
        parts, left = [], size
        while left:
            chunk = self._sock.recv(min(left, 1 << 20))
            if not chunk:
                raise wire.KafkaProtocolError(f"{name}: {self.address} closed the connection ({left} of {size} "
                                              f"bytes unread)")
            parts.append(chunk)
            left -= len(chunk)
        return b"".join(parts)

    def authenticate(self, settings: Settings) -> None:
        """SaslHandshake v1 then SaslAuthenticate v1 rounds (PLAIN: one; SCRAM: two, the server's proof checked)."""
        if settings.mechanism is None:
            return
        shake = self.request("SaslHandshake", wire.API_SASL_HANDSHAKE, 1, wire.sasl_handshake_v1(settings.mechanism),
                             wire.read_sasl_handshake_v1, flexible=False)
        if shake.error_code:
            raise BatchedFailed(f"{self.address} refused SASL mechanism {settings.mechanism} (error "
                                f"{shake.error_code}; it offers {', '.join(shake.mechanisms)})")
        if settings.mechanism == "PLAIN":
            self._sasl_round(wire.plain_message(settings.username, settings.password))
            return
        scram = wire.ScramClient(settings.mechanism, settings.username, settings.password)
        server_first = self._sasl_round(scram.first_message())
        server_final = self._sasl_round(scram.final_message(server_first))
        scram.verify_server_final(server_final)

    def _sasl_round(self, token: bytes) -> bytes:
        answer = self.request("SaslAuthenticate", wire.API_SASL_AUTHENTICATE, 1, wire.sasl_authenticate_v1(token),
                              wire.read_sasl_authenticate_v1, flexible=False)
        if answer.error_code:
            raise BatchedFailed(f"{self.address}: SASL authentication failed (error {answer.error_code}: "
                                f"{answer.error_message})")
        return answer.auth_bytes


@dataclass(frozen=True)
class Answer:
    """Each answered group's committed offsets (errors-free only), and the groups the client's path must read: their
    coordinator was not found, or the group or one of its partitions came back with an error."""

    offsets: dict[str, tuple[wire.CommittedOffset, ...]]
    unresolved: frozenset[str]


def _connect(address: tuple[str, int], settings: Settings, timeout_s: float) -> Connection:
    connection = Connection(*address, settings, timeout_s)
    try:
        connection.authenticate(settings)
    except BaseException:
        connection.close()
        raise
    return connection


def _bootstrap(config: Mapping[str, Any], settings: Settings, timeout_s: float) -> Connection:
    """The first bootstrap address that connects (TLS and all); every address's failure named when none does."""
    failures = []
    for host, port in parse_addresses(config.get("bootstrap.servers")):
        try:
            return Connection(host, port, settings, timeout_s)
        except OSError as exc:
            failures.append(f"{host}:{port}: {exc.strerror or exc}")
    raise BatchedFailed(f"no bootstrap broker connected ({'; '.join(failures)})")


def _offsets_from(connection: Connection, group_ids: Sequence[str]) -> list[wire.GroupOffsets]:
    out: list[wire.GroupOffsets] = []
    for chunk in wire.chunks(group_ids, GROUPS_PER_REQUEST):
        out += connection.request("OffsetFetch", wire.API_OFFSET_FETCH, wire.OFFSET_FETCH_VERSION,
                                  wire.offset_fetch_v8(chunk), wire.read_offset_fetch_v8, flexible=True)
    return out


def read_groups_offsets(config: Mapping[str, Any], group_ids: Sequence[str], timeout_s: float) -> Answer:
    """Committed offsets of ``group_ids`` (see the module's docstring). Raises ``BatchedUnavailable`` when the
    cluster's brokers lack the versions, ``BatchedFailed`` on any connection, TLS, authentication or protocol
    failure; the caller then reads through the client."""
    try:
        return _read(config, group_ids, timeout_s)
    except (OSError, wire.KafkaProtocolError, wire.ScramError) as exc:  # ssl.SSLError and timeouts are OSErrors
        raise BatchedFailed(f"{type(exc).__name__}: {exc}") from exc


def _read(config: Mapping[str, Any], group_ids: Sequence[str], timeout_s: float) -> Answer:
    settings = Settings.of(config)
    bootstrap = _bootstrap(config, settings, timeout_s)
    connections: dict[tuple[str, int], Connection] = {}
    try:
        versions = bootstrap.request("ApiVersions", wire.API_API_VERSIONS, 0, wire.api_versions_v0(),
                                     wire.read_api_versions_v0, flexible=False)
        fetch = versions.max_version(wire.API_OFFSET_FETCH)
        find = versions.max_version(wire.API_FIND_COORDINATOR)
        if versions.error_code or fetch < wire.OFFSET_FETCH_VERSION or find < wire.FIND_COORDINATOR_VERSION:
            raise BatchedUnavailable(f"{bootstrap.address} offers OffsetFetch up to v{fetch} and FindCoordinator up "
                                     f"to v{find} (error {versions.error_code}); batching needs v8 and v4 (Kafka 3.0+)")
        bootstrap.authenticate(settings)
        coordinators = bootstrap.request("FindCoordinator", wire.API_FIND_COORDINATOR, wire.FIND_COORDINATOR_VERSION,
                                         wire.find_coordinator_v4(group_ids), wire.read_find_coordinator_v4,
                                         flexible=True)
        wanted = set(group_ids)
        by_address: dict[tuple[str, int], list[str]] = {}
        for found in coordinators:
            if found.error_code == 0 and found.key in wanted:
                by_address.setdefault((found.host, found.port), []).append(found.key)
        bootstrap_address = _address_of(bootstrap)
        if bootstrap_address in by_address:
            connections[bootstrap_address] = bootstrap

        def read(address: tuple[str, int]) -> list[wire.GroupOffsets]:
            connection = connections.get(address)
            if connection is None:
                connection = connections[address] = _connect(address, settings, timeout_s)
            return _offsets_from(connection, sorted(by_address[address]))

        if len(by_address) > 1:
            with ThreadPoolExecutor(max_workers=min(8, len(by_address))) as pool:
                answers = [g for part in pool.map(read, sorted(by_address)) for g in part]
        else:
            answers = [g for address in by_address for g in read(address)]
    finally:
        bootstrap.close()
        for connection in connections.values():
            if connection is not bootstrap:
                connection.close()
    offsets = {g.group_id: g.partitions for g in answers
               if g.group_id in wanted and not g.error_code and not any(p.error_code for p in g.partitions)}
    return Answer(offsets, frozenset(wanted - set(offsets)))


def _address_of(connection: Connection) -> tuple[str, int]:
    host, _, port = connection.address.rpartition(":")
    return host, int(port)
