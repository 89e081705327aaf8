"""The migration spec: one YAML file per tenant migration, validated before anything runs.

Every model is frozen and forbids unknown keys: a typo in a production spec must fail loudly at parse
time (an import error on that tenant's DAG only), not silently fall back to a default mid-migration.
`load_spec` turns every validation problem into a `SpecError` naming the file, the field and the value.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, field_validator

# Airflow's own rule for connection ids (letters, digits, '-', '_', '.'), bounded like its column.
CONNECTION_ID = re.compile(r"^[A-Za-z0-9_.\-]{1,250}$")
# Migration names become DAG ids and Kafka topic names, so keep them to what both accept.
MIGRATION_NAME = re.compile(r"^[a-z0-9][a-z0-9_\-]{0,99}$")
# Kafka's legal topic characters; a prefix is prepended to topic names.
TOPIC_CHARS = re.compile(r"^[A-Za-z0-9._\-]+$")
CLUSTER_ALIAS = re.compile(r"^[A-Za-z0-9_\-]{1,64}$")


class SpecError(ValueError):
    """A spec problem, located: file, dotted field path, offending value."""

    def __init__(self, path: str | Path, field: str, value: Any, problem: str):
        self.path, self.field, self.value, self.problem = str(path), field, value, problem
        super().__init__(f"{self.path}: field '{field}' = {value!r}: {problem}")


class _Frozen(BaseModel):
    """Immutable, closed models: specs are parsed once and shared by every task of the DAG."""

    model_config = ConfigDict(frozen=True, extra="forbid")


def _connection_id(value: str) -> str:
    if not CONNECTION_ID.match(value):
        raise ValueError("not a valid Airflow connection id (letters, digits, '-', '_', '.')")
    return value


ConnectionId = Annotated[str, AfterValidator(_connection_id)]


class ClusterRef(_Frozen):
    """A Kafka cluster reached through an Airflow connection of type `kafka` (Extra = librdkafka config)."""

    connection_id: ConnectionId
    alias: str

    @field_validator("alias")
    @classmethod
    def _alias(cls, v: str) -> str:
        if not CLUSTER_ALIAS.match(v):
            raise ValueError("cluster alias must be 1-64 letters, digits, '_' or '-' (it names MM2 topics)")
        return v


class SchemaRegistryRef(_Frozen):
    source_connection_id: ConnectionId
    destination_connection_id: ConnectionId


def _regex(pattern: str) -> str:
    try:
        re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"not a valid regex: {exc}") from None
    return pattern


Regex = Annotated[str, AfterValidator(_regex)]


class Selection(_Frozen):
    """Full-match regexes; a name is selected when an include matches and no exclude does."""

    include: tuple[Regex, ...] = Field(min_length=1)
    exclude: tuple[Regex, ...] = ()

    def matches(self, name: str) -> bool:
        return any(re.fullmatch(p, name) for p in self.include) and not any(
            re.fullmatch(p, name) for p in self.exclude
        )


class IdentityRename(_Frozen):
    policy: Literal["identity"] = "identity"

    def destination_topic(self, source_topic: str) -> str:
        return source_topic


class PrefixRename(_Frozen):
    policy: Literal["prefix"]
    prefix: str = Field(min_length=1, max_length=100)

    @field_validator("prefix")
    @classmethod
    def _prefix(cls, v: str) -> str:
        if not TOPIC_CHARS.match(v):
            raise ValueError("prefix may hold only letters, digits, '.', '_' and '-'")
        return v

    def destination_topic(self, source_topic: str) -> str:
        return f"{self.prefix}{source_topic}"


class TopicSelection(Selection):
    rename: IdentityRename | PrefixRename = Field(default_factory=IdentityRename, discriminator="policy")


class CopySettings(_Frozen):
    """Bounds of one copy batch; every run is bounded so a batch window can be planned."""

    max_records_per_partition: int = Field(default=100_000, gt=0)
    max_bytes_per_partition: int = Field(default=64 * 1024 * 1024, gt=0)
    offset_sync_interval: int = Field(default=100, gt=0)
    provenance_headers: bool = True
    accept_retention_gaps: bool = False
    spark_connection_id: ConnectionId = "spark_default"


class PromotionSettings(_Frozen):
    """Thresholds the sensors gate promotion on."""

    max_lag_records: int = Field(default=0, ge=0)
    quiesce_window_seconds: int = Field(default=30, ge=1)
    sensor_timeout_seconds: int = Field(default=3600, ge=1)
    poke_interval_seconds: int = Field(default=10, ge=1)


class MigrationSpec(_Frozen):
    name: str
    tenant: str = Field(min_length=1, max_length=100)
    description: str = ""
    source: ClusterRef
    destination: ClusterRef
    schema_registry: SchemaRegistryRef | None = None
    topics: TopicSelection
    groups: Selection = Field(default_factory=lambda: Selection(include=(".*",)))
    copy_settings: CopySettings = Field(default_factory=CopySettings, alias="copy")
    schedule: str | None = None
    promotion: PromotionSettings = Field(default_factory=PromotionSettings)
    state_topic: str | None = None
    offset_syncs_topic_location: Literal["destination", "source"] = "destination"

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not MIGRATION_NAME.match(v):
            raise ValueError("name must start with a lowercase letter or digit and hold only a-z, 0-9, '_', '-'")
        return v

    @field_validator("schedule")
    @classmethod
    def _schedule(cls, v: str | None) -> str | None:
        if v is None or v.startswith("@"):
            return v
        if len(v.split()) != 5:
            raise ValueError("schedule must be a 5-field cron expression, an @preset, or null")
        return v

    @field_validator("state_topic")
    @classmethod
    def _state_topic(cls, v: str | None) -> str | None:
        if v is not None and (not TOPIC_CHARS.match(v) or len(v) > 249):
            raise ValueError("not a legal Kafka topic name")
        return v

    @property
    def dag_id(self) -> str:
        return f"kafka_ferry__{self.name}"

    @property
    def state_topic_name(self) -> str:
        return self.state_topic or f"kafka-ferry.{self.name}.state"


def _field_path(loc: tuple[Any, ...]) -> str:
    parts: list[str] = []
    for i, item in enumerate(loc):
        if isinstance(item, int):
            parts.append(f"[{item}]")
        elif i > 0 and loc[i - 1] == "rename" and item in ("identity", "prefix"):
            continue  # the discriminator tag pydantic inserts into union locations
        else:
            parts.append(("." if parts else "") + str(item))
    return "".join(parts) or "<root>"


def parse_spec(data: Any, path: str | Path = "<spec>") -> MigrationSpec:
    """Validate an already-loaded YAML document; raise SpecError for the first problem found."""
    if not isinstance(data, dict):
        raise SpecError(path, "<root>", type(data).__name__, "the spec must be a YAML mapping")
    try:
        spec = MigrationSpec.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        problem = first["msg"].removeprefix("Value error, ")
        value = None if first["type"] == "missing" else first.get("input")
        raise SpecError(path, _field_path(tuple(first["loc"])), value, problem) from None
    if spec.source.alias == spec.destination.alias:
        raise SpecError(path, "destination.alias", spec.destination.alias, "must differ from source.alias")
    if spec.source.connection_id == spec.destination.connection_id:
        raise SpecError(path, "destination.connection_id", spec.destination.connection_id,
                        "source and destination use the same connection: a migration onto itself")
    return spec


def load_spec(path: str | Path) -> MigrationSpec:
    """Read and validate one migration YAML file."""
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark else "<document>"
        raise SpecError(path, where, None, f"not valid YAML: {exc}") from None
    except OSError as exc:
        raise SpecError(path, "<file>", None, f"cannot read: {exc.strerror}") from None
    return parse_spec(data, path)


def check_connections(spec: MigrationSpec, path: str | Path, known: set[str] | frozenset[str]) -> None:
    """Fail before anything changes when the spec names an Airflow connection that does not exist."""
    refs = [
        ("source.connection_id", spec.source.connection_id),
        ("destination.connection_id", spec.destination.connection_id),
        ("copy.spark_connection_id", spec.copy_settings.spark_connection_id),
    ]
    if spec.schema_registry:
        refs += [
            ("schema_registry.source_connection_id", spec.schema_registry.source_connection_id),
            ("schema_registry.destination_connection_id", spec.schema_registry.destination_connection_id),
        ]
    for field, conn_id in refs:
        if conn_id not in known:
            raise SpecError(path, field, conn_id, "no Airflow connection with this id")
