"""One Schema Registry (Confluent REST API), reached with confluent-kafka's SchemaRegistryClient.

The client (whose HTTP library, httpx2, is used here too) covers reads, normal registration, compatibility
and soft deletes. Three calls it lacks are sent as plain HTTP with the same URL, credentials and CA:
  - register with an explicit id and version (IMPORT mode): the client's body has neither;
  - PUT /mode with `force=true`: the client sends `force=True`, which some servers (AxonOps) ignore;
  - GET /schemas/ids/{id} without the client's cache (a preserve plan asks which ids are taken).
Servers differ (measured): Apicurio ignores requested ids and IMPORT; AxonOps returns an existing id without
error; `GET /subjects` may be `null`; a missing soft-deleted version is 40402 or 40406. This module absorbs
those differences; callers compare returned and requested ids themselves.

Credentials stay in `RegistryConnection`, whose repr hides them; errors name the registry and URL only. A URL
with a user part (``http://user:secret@host``), a query or a fragment is refused when the connection is made
(``url_problem``): errors and logs name the URL, so a secret in it would reach every one of them; credentials
come from the Airflow connection's login/password or Extra ``bearer_token`` only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any
from urllib.parse import quote, urlsplit

import httpx2
from confluent_kafka.schema_registry import Schema, SchemaReference, SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError

from kafka_ferry.core.common.failures import Permanent, Retryable
from kafka_ferry.core.schemas.schema_compat import own_level
from kafka_ferry.core.schemas.schema_decode import RegisteredSchema
from kafka_ferry.core.schemas.schema_forms import canonical
from kafka_ferry.core.schemas.schema_plan import Reference, RegistrySnapshot, SchemaVersion, Subject

NOT_FOUND_CODES = frozenset({40401, 40402, 40403, 40406, 40408, 40409})
REFUSED_STATUSES = frozenset({401, 403})
CONTENT_TYPE = {"Content-Type": "application/vnd.schemaregistry.v1+json"}


class RegistryUrlRefused(Permanent, ValueError):
    """The registry URL carries a user part, a query or a fragment; the message never echoes the URL."""


def url_problem(url: str) -> str | None:
    """Why ``url`` cannot name a registry (never quoting it: it may hold a secret), or None.

    Why refuse rather than strip: a URL is copied into every error and log line about the registry, and a
    stripped one would still leave the secret in the connection for whoever reads it next."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "the URL does not parse"
    if "@" in parts.netloc:
        return "the URL has a user part (user:password@)"
    if parts.query or parts.fragment or "?" in url or "#" in url:
        return "the URL has a query or a fragment"
    return None


@dataclass(frozen=True)
class RegistryConnection:
    """Where a registry is and how to authenticate; secrets are excluded from repr, and the URL holds none."""

    name: str  # the Airflow connection id (or a test's label); the only name errors use
    url: str
    basic_auth: tuple[str, str] | None = field(default=None, repr=False)
    bearer_token: str | None = field(default=None, repr=False)
    ca_path: str | None = None
    timeout_s: float = 30.0

    def client_config(self) -> dict[str, Any]:
        conf: dict[str, Any] = {"url": self.url, "timeout": self.timeout_s, "max.retries": 1}
        if self.basic_auth:
            conf["basic.auth.user.info"] = ":".join(self.basic_auth)
        if self.bearer_token:
            conf.update({"bearer.auth.credentials.source": "STATIC_TOKEN", "bearer.auth.token": self.bearer_token,
                         "bearer.auth.logical.cluster": ""})
        if self.ca_path:
            conf["ssl.ca.location"] = self.ca_path
        return conf

    def __post_init__(self) -> None:
        problem = url_problem(self.url)
        if problem:
            raise RegistryUrlRefused(f"schema registry {self.name!r}: {problem}; credentials go in the connection's "
                                     "login/password (or Extra bearer_token), never in the URL")


class SchemaRegistryUnavailable(Retryable, RuntimeError):
    """The registry did not answer or refused a call; names the registry, the URL and the operation."""

    def __init__(self, conn: RegistryConnection, operation: str, cause: object):
        self.registry, self.operation = conn.name, operation
        super().__init__(f"schema registry {conn.name!r} ({conn.url}): {operation} failed: {cause}")


class SchemaRegistryRefused(Permanent, SchemaRegistryUnavailable):
    """The registry answered 401/403: the credentials or the principal's permissions are wrong, and no retry
    changes that (an outage stays `SchemaRegistryUnavailable`, which retries may heal)."""

    def __init__(self, conn: RegistryConnection, operation: str, status: int):
        super().__init__(conn, operation, f"refused with HTTP {status}: check the connection's credentials and "
                                          "the principal's permissions on the registry")


def _unavailable(conn: RegistryConnection, operation: str, status: int | None, cause: object):
    if status in REFUSED_STATUSES:
        return SchemaRegistryRefused(conn, operation, status)
    return SchemaRegistryUnavailable(conn, operation, cause)


def _missing(exc: SchemaRegistryError) -> bool:
    return exc.http_status_code == 404 or exc.error_code in NOT_FOUND_CODES


class SchemaRegistry:
    """Reads a registry into core snapshots and applies a plan's writes, one call per action."""

    def __init__(self, conn: RegistryConnection):
        self.conn = conn

    @cached_property
    def client(self) -> SchemaRegistryClient:
        return SchemaRegistryClient(self.conn.client_config())

    @cached_property
    def http(self) -> httpx2.Client:
        headers = dict(CONTENT_TYPE)
        if self.conn.bearer_token:
            headers["Authorization"] = f"Bearer {self.conn.bearer_token}"
        return httpx2.Client(base_url=self.conn.url.rstrip("/") + "/", headers=headers, auth=self.conn.basic_auth,
                            verify=self.conn.ca_path or True, timeout=self.conn.timeout_s)

    def close(self) -> None:
        """Both HTTP sessions (the client's and ours), when opened; the registry object is done afterwards."""
        if "http" in self.__dict__:
            self.http.close()
        if "client" in self.__dict__:
            self.client.close()

    def _call(self, operation: str, fn, *args, missing: Any = ..., **kwargs):
        try:
            return fn(*args, **kwargs)
        except SchemaRegistryError as exc:
            if missing is not ... and _missing(exc):
                return missing
            raise _unavailable(self.conn, operation, exc.http_status_code, exc) from None
        except (httpx2.HTTPError, OSError) as exc:
            raise SchemaRegistryUnavailable(self.conn, operation, f"{type(exc).__name__}: {exc}") from None

    def _http(self, method: str, path: str, operation: str, body: dict | None = None,
              missing: Any = ...) -> Any:
        try:
            resp = self.http.request(method, path, json=body)
        except httpx2.HTTPError as exc:
            raise SchemaRegistryUnavailable(self.conn, operation, f"{type(exc).__name__}: {exc}") from None
        if resp.status_code == 404 and missing is not ...:
            return missing
        if resp.status_code >= 400:
            raise _unavailable(self.conn, operation, resp.status_code, f"HTTP {resp.status_code}: {resp.text[:300]}")
        return resp.json() if resp.content else None

    # --- reads ---------------------------------------------------------------------------------
    def subjects(self, include_deleted: bool = True) -> list[str]:
        names = self._call("list subjects", self.client.get_subjects, deleted=include_deleted)
        return sorted(names or [])  # AxonOps answers `null` when empty

    def read_subject(self, name: str) -> Subject | None:
        numbers = self._call(f"list versions of {name!r}", self.client.get_versions, name, deleted=True, missing=None)
        if not numbers:
            return None
        live = set(self._call(f"list versions of {name!r}", self.client.get_versions, name, missing=[]) or [])
        versions = []
        for number in sorted(numbers):
            reg = self._call(f"read {name!r} version {number}", self.client.get_version, name, number, deleted=True)
            schema = reg.schema
            refs = tuple(Reference(r.name, r.subject, r.version) for r in (schema.references or []))
            versions.append(SchemaVersion(name, number, reg.schema_id, schema.schema_str,
                                          schema.schema_type or "AVRO", refs, deleted=number not in live))
        compat = self.subject_compatibility(name)
        mode = self._http("GET", f"mode/{quote(name, safe='')}", f"read mode of {name!r}", missing={}) or {}
        return Subject(name, tuple(versions), compat, mode.get("mode"))

    def subject_compatibility(self, name: str) -> str | None:
        """The subject's own level, None when it follows the global one (`core.schemas.schema_compat.own_level`).

        Asked twice: plainly (the client's call: "not configured" on the Confluent API and AxonOps) and with
        `defaultToGlobal=true`, which the client cannot send (Apicurio answers NONE to the plain question for a
        subject without a level of its own)."""
        plain = self._call(f"read compatibility of {name!r}", self.client.get_compatibility, name, missing=None)
        if plain is None:
            return None
        answer = self._http("GET", f"config/{quote(name, safe='')}?defaultToGlobal=true",
                            f"read effective compatibility of {name!r}", missing={}) or {}
        return own_level(plain, answer.get("compatibilityLevel") or answer.get("compatibility"))

    def effective_compatibility(self, name: str, global_level: str | None = None) -> str | None:
        """What the registry enforces on the subject: its own level, else the global one."""
        own = self.subject_compatibility(name)
        return own if own is not None else (global_level or self.global_compatibility())

    def global_compatibility(self) -> str | None:
        return self._call("read global compatibility", self.client.get_compatibility, missing=None)

    def schema_by_id(self, schema_id: int) -> tuple[str, str] | None:
        """(type, text) stored under an id, or None when the id is free."""
        found = self._http("GET", f"schemas/ids/{schema_id}", f"read schema id {schema_id}", missing=None)
        return None if found is None else (found.get("schemaType") or "AVRO", found["schema"])

    def registered_schema(self, schema_id: int) -> RegisteredSchema | None:
        """The schema stored under an id with its references resolved (for the decode check), or None when the
        id is free. The client caches by id: an id's schema never changes."""
        found = self._call(f"read schema id {schema_id}", self.client.get_schema, schema_id, missing=None)
        return None if found is None else self._with_references(found, depth=0)

    def versions_of_id(self, schema_id: int) -> list[tuple[str, int, bool]]:
        """(subject, version, soft-deleted) of every version registered with this id, soft-deleted ones included."""
        every = self._call(f"list versions of schema id {schema_id}", self.client.get_schema_versions, schema_id,
                           deleted=True, missing=[]) or []
        live = self._call(f"list versions of schema id {schema_id}", self.client.get_schema_versions, schema_id,
                          missing=[]) or []
        alive = {(v.subject, v.version) for v in live}
        return sorted((v.subject, v.version, (v.subject, v.version) not in alive) for v in every)

    def _with_references(self, schema: Schema, depth: int) -> RegisteredSchema:
        if depth > 32:
            raise SchemaRegistryUnavailable(self.conn, "resolve references", "references nest deeper than 32")
        refs = {}
        for ref in schema.references or []:
            reg = self._call(f"read {ref.subject!r} version {ref.version}", self.client.get_version, ref.subject,
                             ref.version, deleted=True)
            refs[ref.name] = self._with_references(reg.schema, depth + 1)
        # a schema the registry returns has its text and a reference its name; confluent-kafka's stubs declare both
        # optional (a stub gap)
        return RegisteredSchema(schema.schema_type or "AVRO", schema.schema_str, refs)  # type: ignore[arg-type]

    def snapshot(self, subjects: list[str] | None = None, ids: Sequence[int] = ()) -> RegistrySnapshot:
        """The named subjects (all when None) with their versions and settings, and the schemas of `ids`."""
        names = self.subjects() if subjects is None else subjects
        read = {n: s for n in names if (s := self.read_subject(n)) is not None}
        by_id = {}
        for schema_id in ids:
            found = self.schema_by_id(schema_id)
            if found is not None:
                by_id[schema_id] = (found[0], canonical(found[1], found[0]))
        return RegistrySnapshot(read, self.global_compatibility(), by_id)

    # --- writes --------------------------------------------------------------------------------
    def register(self, subject: str, schema: str, schema_type: str, references: tuple[Reference, ...]) -> int:
        refs = [SchemaReference(r.name, r.subject, r.version) for r in references]
        return self._call(f"register {subject!r}", self.client.register_schema, subject,
                          Schema(schema, schema_type, refs))

    def register_with_id(self, subject: str, version: int, schema_id: int, schema: str, schema_type: str,
                         references: tuple[Reference, ...]) -> int:
        """Register asking for an id and version (IMPORT mode); returns the id the registry answered."""
        body = {"schema": schema, "schemaType": schema_type, "id": schema_id, "version": version,
                "references": [{"name": r.name, "subject": r.subject, "version": r.version} for r in references]}
        out = self._http("POST", f"subjects/{quote(subject, safe='')}/versions",
                         f"register {subject!r} version {version} with id {schema_id}", body)
        return int(out["id"])

    def set_mode(self, subject: str, mode: str) -> str:
        out = self._http("PUT", f"mode/{quote(subject, safe='')}?force=true", f"set mode of {subject!r} to {mode}",
                         {"mode": mode})
        return out["mode"]

    def set_compatibility(self, subject: str | None, level: str) -> None:
        where = repr(subject) if subject else "the global level"
        self._call(f"set compatibility of {where} to {level}", self.client.set_compatibility, subject, level)

    def soft_delete(self, subject: str, version: int) -> None:
        self._call(f"soft-delete {subject!r} version {version}", self.client.delete_version, subject, version)

    def delete_subject_permanently(self, subject: str) -> None:
        self._call(f"delete {subject!r}", self.client.delete_subject, subject, missing=None)
        self._call(f"delete {subject!r} permanently", self.client.delete_subject, subject, permanent=True,
                   missing=None)
