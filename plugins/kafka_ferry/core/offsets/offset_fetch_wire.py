"""Kafka protocol requests the client lacks: many groups' committed offsets in one OffsetFetch, and what reaching a
broker for it takes (ApiVersions, FindCoordinator, SASL with PLAIN or SCRAM).

Why: librdkafka's ``list_consumer_group_offsets`` takes one group per OffsetFetch request, so reading 200 groups is 200
requests. Kafka answers many groups in one OffsetFetch since v8 (KIP-709, Kafka 3.0) and finds many groups'
coordinators in one FindCoordinator since v4 (KIP-699). Only those calls are wrapped (``kafka.offset_fetch`` does the
I/O); everything else stays with the client.

Each message is declared once, field by field in the order of Kafka's JSON message specs
(``clients/src/main/resources/common/message/*.json``): request header v1 (non-flexible) / v2 (flexible: tagged
fields), response header v0 / v1, compact strings and arrays (length + 1 as an unsigned varint, 0 = null) in flexible
versions. Unknown tagged fields are skipped, as Kafka's readers do. Decoding is strict: a truncated body, a negative
length where none may be, or trailing bytes raise :class:`KafkaProtocolError` naming the message, field and byte.

Pure: no sockets, no client; the SCRAM client messages (RFC 5802, RFC 7677) are here too, computed with hashlib/hmac.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from kafka_ferry.core.common.failures import Retryable

API_OFFSET_FETCH = 9
API_FIND_COORDINATOR = 10
API_SASL_HANDSHAKE = 17
API_API_VERSIONS = 18
API_SASL_AUTHENTICATE = 36

OFFSET_FETCH_VERSION = 8  # the first version with a groups array (KIP-709)
FIND_COORDINATOR_VERSION = 4  # the first version with coordinator keys (KIP-699)
COORDINATOR_KEY_GROUP = 0

_I8, _I16, _I32, _I64 = struct.Struct(">b"), struct.Struct(">h"), struct.Struct(">i"), struct.Struct(">q")
MAX_FRAME_BYTES = 100 * 1024 * 1024  # a response larger than this is not an OffsetFetch answer kafka-ferry asked for


class KafkaProtocolError(Retryable, ValueError):
    """A message cannot be encoded or a broker's answer cannot be decoded; names the message, field and byte."""


# --- writing --------------------------------------------------------------------------------------------------------
def _uvarint(value: int) -> bytes:
    if value < 0:
        raise KafkaProtocolError(f"unsigned varint cannot hold {value}")
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _utf8(where: str, value: str) -> bytes:
    if not isinstance(value, str):
        raise KafkaProtocolError(f"{where} must be a str, got {value!r}")
    try:
        return value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise KafkaProtocolError(f"{where} value {value!r} is not valid UTF-8: {exc}") from exc


def _string(where: str, value: str | None) -> bytes:
    """STRING / NULLABLE_STRING: INT16 length (-1 = null), then UTF-8."""
    if value is None:
        return _I16.pack(-1)
    raw = _utf8(where, value)
    if len(raw) > 32767:
        raise KafkaProtocolError(f"{where} is {len(raw)} UTF-8 bytes, max 32767 (value starts {value[:40]!r})")
    return _I16.pack(len(raw)) + raw


def _compact_string(where: str, value: str | None) -> bytes:
    """COMPACT_STRING / COMPACT_NULLABLE_STRING: unsigned varint length + 1 (0 = null), then UTF-8."""
    if value is None:
        return _uvarint(0)
    raw = _utf8(where, value)
    return _uvarint(len(raw) + 1) + raw


NO_TAGS = _uvarint(0)


def request_message(api_key: int, api_version: int, correlation_id: int, client_id: str | None, body: bytes, *,
                    flexible: bool) -> bytes:
    """A request as sent: INT32 size, then header v1 (or v2 when ``flexible``: an empty tagged-field section after
    the client id, which stays a non-compact NULLABLE_STRING in every header version), then the body."""
    header = _I16.pack(api_key) + _I16.pack(api_version) + _I32.pack(correlation_id) + _string("client_id", client_id)
    if flexible:
        header += NO_TAGS
    message = header + body
    return _I32.pack(len(message)) + message


def api_versions_v0() -> bytes:
    """ApiVersions v0 request body: no fields (answered with every API's version range)."""
    return b""


def find_coordinator_v4(group_ids: Sequence[str]) -> bytes:
    """FindCoordinator v4 request body: KeyType INT8 (0 = group), CoordinatorKeys COMPACT_ARRAY of COMPACT_STRING."""
    body = _I8.pack(COORDINATOR_KEY_GROUP) + _uvarint(len(group_ids) + 1)
    body += b"".join(_compact_string("FindCoordinator coordinator_keys[]", g) for g in group_ids)
    return body + NO_TAGS


def offset_fetch_v8(group_ids: Sequence[str], *, require_stable: bool = False) -> bytes:
    """OffsetFetch v8 request body: Groups COMPACT_ARRAY of (GroupId COMPACT_STRING, Topics null = all partitions,
    tags), RequireStable BOOLEAN, tags."""
    body = _uvarint(len(group_ids) + 1)
    for group in group_ids:
        body += _compact_string("OffsetFetch groups[].group_id", group) + _uvarint(0) + NO_TAGS
    return body + (b"\x01" if require_stable else b"\x00") + NO_TAGS


def sasl_handshake_v1(mechanism: str) -> bytes:
    """SaslHandshake v1 request body (non-flexible): Mechanism STRING."""
    return _string("SaslHandshake mechanism", mechanism)


def sasl_authenticate_v1(auth_bytes: bytes) -> bytes:
    """SaslAuthenticate v1 request body (non-flexible): AuthBytes BYTES (INT32 length)."""
    return _I32.pack(len(auth_bytes)) + auth_bytes


# --- reading --------------------------------------------------------------------------------------------------------
class Reader:
    """Reads one response body front to back; each error names ``message``, the field and the byte position."""

    def __init__(self, message: str, data: bytes) -> None:
        self.message, self.data, self.pos = message, data, 0

    def _take(self, field: str, size: int) -> bytes:
        end = self.pos + size
        if size < 0 or end > len(self.data):
            raise KafkaProtocolError(f"{self.message} field {field!r} truncated: needs {size} bytes at byte "
                                     f"{self.pos}, only {len(self.data) - self.pos} left")
        raw, self.pos = self.data[self.pos:end], end
        return raw

    def int8(self, field: str) -> int:
        return int(_I8.unpack(self._take(field, 1))[0])

    def int16(self, field: str) -> int:
        return int(_I16.unpack(self._take(field, 2))[0])

    def int32(self, field: str) -> int:
        return int(_I32.unpack(self._take(field, 4))[0])

    def int64(self, field: str) -> int:
        return int(_I64.unpack(self._take(field, 8))[0])

    def uvarint(self, field: str) -> int:
        value = shift = 0
        while True:
            byte = self._take(field, 1)[0]
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7
            if shift > 28:  # Kafka's unsigned varints are at most 5 bytes (an int32)
                raise KafkaProtocolError(f"{self.message} field {field!r}: varint longer than 5 bytes at byte "
                                         f"{self.pos}")

    def _text(self, field: str, raw: bytes) -> str:
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise KafkaProtocolError(f"{self.message} field {field!r} is not valid UTF-8: {exc}") from exc

    def string(self, field: str) -> str:
        length = self.int16(field)
        if length < 0:
            raise KafkaProtocolError(f"{self.message} field {field!r} is null (length {length}); it may not be")
        return self._text(field, self._take(field, length))

    def nullable_string(self, field: str) -> str | None:
        length = self.int16(field)
        return None if length < 0 else self._text(field, self._take(field, length))

    def bytes_(self, field: str) -> bytes:
        length = self.int32(field)
        if length < 0:
            raise KafkaProtocolError(f"{self.message} field {field!r} is null (length {length}); it may not be")
        return self._take(field, length)

    def compact_raw(self, field: str) -> bytes | None:
        """COMPACT_NULLABLE_STRING as its raw bytes (metadata: a commit's text need not be UTF-8)."""
        length = self.uvarint(field) - 1
        return None if length < 0 else self._take(field, length)

    def compact_string(self, field: str) -> str:
        raw = self.compact_raw(field)
        if raw is None:
            raise KafkaProtocolError(f"{self.message} field {field!r} is null; it may not be")
        return self._text(field, raw)

    def compact_nullable_string(self, field: str) -> str | None:
        raw = self.compact_raw(field)
        return None if raw is None else self._text(field, raw)

    def array(self, field: str) -> int:
        count = self.int32(field)
        if count < 0:
            raise KafkaProtocolError(f"{self.message} field {field!r} is a null array; it may not be")
        return count

    def compact_array(self, field: str) -> int:
        count = self.uvarint(field) - 1
        if count < 0:
            raise KafkaProtocolError(f"{self.message} field {field!r} is a null array; it may not be")
        return count

    def tags(self, field: str) -> None:
        """Skip a tagged-field section: none of the fields read here is tagged, so every tag is an unknown one."""
        for _ in range(self.uvarint(f"{field} tag count")):
            self.uvarint(f"{field} tag")
            self._take(f"{field} tag value", self.uvarint(f"{field} tag size"))

    def end(self) -> None:
        if self.pos != len(self.data):
            raise KafkaProtocolError(f"{self.message}: {len(self.data) - self.pos} unexpected byte(s) after the last "
                                     f"field, at byte {self.pos}")


def response_body(message: str, frame: bytes, correlation_id: int, *, flexible: bool) -> Reader:
    """The body of one response (``frame`` without its INT32 size): header v0 (CorrelationId) or v1 (then tags).
    A response to another request (a different correlation id) is an error: the connection is out of step."""
    reader = Reader(message, frame)
    got = reader.int32("correlation_id")
    if got != correlation_id:
        raise KafkaProtocolError(f"{message}: answer has correlation id {got}, the request had {correlation_id}")
    if flexible:
        reader.tags("response header")
    return reader


def frame_size(message: str, prefix: bytes) -> int:
    """A response's INT32 size prefix, checked: not negative, not beyond ``MAX_FRAME_BYTES``."""
    if len(prefix) != 4:
        raise KafkaProtocolError(f"{message}: size prefix truncated ({len(prefix)} of 4 bytes)")
    size = int(_I32.unpack(prefix)[0])
    if not 4 <= size <= MAX_FRAME_BYTES:
        raise KafkaProtocolError(f"{message}: response size {size} out of range [4, {MAX_FRAME_BYTES}]")
    return size


@dataclass(frozen=True)
class ApiVersions:
    error_code: int
    versions: dict[int, tuple[int, int]]  # api key -> (min, max)

    def max_version(self, api_key: int) -> int:
        """The broker's highest version of ``api_key``; -1 when it does not offer the API."""
        return self.versions.get(api_key, (-1, -1))[1]


def read_api_versions_v0(reader: Reader) -> ApiVersions:
    """ApiVersions v0 response: ErrorCode INT16, ApiKeys ARRAY of (ApiKey, MinVersion, MaxVersion INT16)."""
    error = reader.int16("error_code")
    versions = {}
    for _ in range(reader.array("api_keys")):
        key = reader.int16("api_keys[].api_key")
        versions[key] = (reader.int16("api_keys[].min_version"), reader.int16("api_keys[].max_version"))
    reader.end()
    return ApiVersions(error, versions)


@dataclass(frozen=True)
class Coordinator:
    key: str
    node_id: int
    host: str
    port: int
    error_code: int
    error_message: str | None


def read_find_coordinator_v4(reader: Reader) -> list[Coordinator]:
    """FindCoordinator v4 response: ThrottleTimeMs INT32, Coordinators COMPACT_ARRAY of (Key COMPACT_STRING, NodeId
    INT32, Host COMPACT_STRING, Port INT32, ErrorCode INT16, ErrorMessage COMPACT_NULLABLE_STRING, tags), tags."""
    reader.int32("throttle_time_ms")
    out = []
    for _ in range(reader.compact_array("coordinators")):
        out.append(Coordinator(
            key=reader.compact_string("coordinators[].key"), node_id=reader.int32("coordinators[].node_id"),
            host=reader.compact_string("coordinators[].host"), port=reader.int32("coordinators[].port"),
            error_code=reader.int16("coordinators[].error_code"),
            error_message=reader.compact_nullable_string("coordinators[].error_message")))
        reader.tags("coordinators[]")
    reader.tags("response")
    reader.end()
    return out


@dataclass(frozen=True)
class CommittedOffset:
    topic: str
    partition: int
    offset: int
    leader_epoch: int
    metadata: bytes | None  # raw: Kafka Streams commits binary metadata
    error_code: int


@dataclass(frozen=True)
class GroupOffsets:
    group_id: str
    error_code: int
    partitions: tuple[CommittedOffset, ...]


def read_offset_fetch_v8(reader: Reader) -> list[GroupOffsets]:
    """OffsetFetch v8 response: ThrottleTimeMs INT32, Groups COMPACT_ARRAY of (GroupId COMPACT_STRING, Topics
    COMPACT_ARRAY of (Name COMPACT_STRING, Partitions COMPACT_ARRAY of (PartitionIndex INT32, CommittedOffset INT64,
    CommittedLeaderEpoch INT32, Metadata COMPACT_NULLABLE_STRING, ErrorCode INT16, tags), tags), ErrorCode INT16,
    tags), tags."""
    reader.int32("throttle_time_ms")
    groups = []
    for _ in range(reader.compact_array("groups")):
        group_id = reader.compact_string("groups[].group_id")
        partitions = []
        for _ in range(reader.compact_array("groups[].topics")):
            topic = reader.compact_string("groups[].topics[].name")
            for _ in range(reader.compact_array("groups[].topics[].partitions")):
                where = "groups[].topics[].partitions[]"
                partitions.append(CommittedOffset(
                    topic=topic, partition=reader.int32(f"{where}.partition_index"),
                    offset=reader.int64(f"{where}.committed_offset"),
                    leader_epoch=reader.int32(f"{where}.committed_leader_epoch"),
                    metadata=reader.compact_raw(f"{where}.metadata"), error_code=reader.int16(f"{where}.error_code")))
                reader.tags(where)
            reader.tags("groups[].topics[]")
        groups.append(GroupOffsets(group_id, reader.int16("groups[].error_code"), tuple(partitions)))
        reader.tags("groups[]")
    reader.tags("response")
    reader.end()
    return groups


@dataclass(frozen=True)
class SaslHandshake:
    error_code: int
    mechanisms: tuple[str, ...]


def read_sasl_handshake_v1(reader: Reader) -> SaslHandshake:
    """SaslHandshake v1 response: ErrorCode INT16, Mechanisms ARRAY of STRING."""
    error = reader.int16("error_code")
    mechanisms = tuple(reader.string("mechanisms[]") for _ in range(reader.array("mechanisms")))
    reader.end()
    return SaslHandshake(error, mechanisms)


@dataclass(frozen=True)
class SaslAuthenticate:
    error_code: int
    error_message: str | None
    auth_bytes: bytes
    session_lifetime_ms: int


def read_sasl_authenticate_v1(reader: Reader) -> SaslAuthenticate:
    """SaslAuthenticate v1 response: ErrorCode INT16, ErrorMessage NULLABLE_STRING, AuthBytes BYTES,
    SessionLifetimeMs INT64."""
    out = SaslAuthenticate(reader.int16("error_code"), reader.nullable_string("error_message"),
                           reader.bytes_("auth_bytes"), reader.int64("session_lifetime_ms"))
    reader.end()
    return out


def chunks(items: Sequence[str], size: int) -> Iterable[Sequence[str]]:
    for i in range(0, len(items), size):
        yield items[i:i + size]


# --- SASL client messages -------------------------------------------------------------------------------------------
def plain_message(username: str, password: str) -> bytes:
    """SASL PLAIN (RFC 4616): authzid (empty) NUL authcid NUL password."""
    return b"\0" + username.encode("utf-8") + b"\0" + password.encode("utf-8")


SCRAM_HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}


class ScramError(Retryable, ValueError):
    """The SCRAM exchange went wrong: the server's message is malformed, or its signature does not verify."""


def _scram_attributes(message: bytes) -> dict[str, str]:
    try:
        text = message.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ScramError(f"SCRAM server message is not UTF-8: {exc}") from exc
    out = {}
    for part in text.split(","):
        key, sep, value = part.partition("=")
        if not sep or len(key) != 1:
            raise ScramError(f"SCRAM server message has a malformed attribute {part[:40]!r}")
        out[key] = value
    return out


class ScramClient:
    """The client's side of SCRAM-SHA-256/512 (RFC 5802, RFC 7677): no channel binding (gs2 header ``n,,``), as
    Kafka's SCRAM. ``nonce`` is for tests with the RFCs' vectors; otherwise a random one."""

    def __init__(self, mechanism: str, username: str, password: str, nonce: str | None = None) -> None:
        if mechanism not in SCRAM_HASHES:
            raise ScramError(f"SCRAM mechanism {mechanism!r} is not one of {sorted(SCRAM_HASHES)}")
        self.hash = SCRAM_HASHES[mechanism]
        self.password = password.encode("utf-8")
        self.nonce = nonce or secrets.token_urlsafe(24)
        name = username.replace("=", "=3D").replace(",", "=2C")
        self.first_bare = f"n={name},r={self.nonce}"
        self._server_signature: bytes | None = None

    def first_message(self) -> bytes:
        return ("n,," + self.first_bare).encode("utf-8")

    def final_message(self, server_first: bytes) -> bytes:
        attrs = _scram_attributes(server_first)
        if "e" in attrs:
            raise ScramError(f"SCRAM server refused: {attrs['e']}")
        try:
            nonce, salt, iterations = attrs["r"], base64.b64decode(attrs["s"], validate=True), int(attrs["i"])
        except (KeyError, ValueError) as exc:
            raise ScramError(f"SCRAM server-first message lacks or garbles r, s or i ({exc})") from exc
        if not nonce.startswith(self.nonce) or iterations < 1:
            raise ScramError("SCRAM server-first message does not extend the client's nonce, or has no iterations")
        salted = hashlib.pbkdf2_hmac(self.hash, self.password, salt, iterations)
        client_key = hmac.new(salted, b"Client Key", self.hash).digest()
        stored_key = hashlib.new(self.hash, client_key).digest()
        without_proof = f"c=biws,r={nonce}"
        auth_message = f"{self.first_bare},{server_first.decode('utf-8')},{without_proof}".encode()
        signature = hmac.new(stored_key, auth_message, self.hash).digest()
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        server_key = hmac.new(salted, b"Server Key", self.hash).digest()
        self._server_signature = hmac.new(server_key, auth_message, self.hash).digest()
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def verify_server_final(self, server_final: bytes) -> None:
        """Raises unless the server proved it knows the password's keys (its signature matches)."""
        attrs = _scram_attributes(server_final)
        if "e" in attrs:
            raise ScramError(f"SCRAM server refused: {attrs['e']}")
        if self._server_signature is None:
            raise ScramError("SCRAM server-final message before the client-final one")
        try:
            signature = base64.b64decode(attrs["v"], validate=True)
        except (KeyError, ValueError) as exc:
            raise ScramError(f"SCRAM server-final message lacks or garbles v ({exc})") from exc
        if not hmac.compare_digest(signature, self._server_signature):
            raise ScramError("SCRAM server signature does not verify: not the server the password belongs to")
