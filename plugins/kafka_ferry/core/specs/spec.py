"""The migration spec: one YAML file per tenant migration, validated before anything runs.

Every model is frozen and forbids unknown keys: a typo in a production spec must fail loudly at parse
time (an import error on that tenant's DAG only), not silently fall back to a default mid-migration.
`load_spec` reports every problem of a file at once in a `SpecError`: file, line, field, value and reason
of each. `python -m kafka_ferry.core.specs.spec_check check FILE...` runs the same checks without Airflow.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from kafka_ferry.core.batches.batch_window import parse_window
from kafka_ferry.core.batches.driver_jvm import ARCHIVE_DIR
from kafka_ferry.core.batches.rate_limit import RateLimit
from kafka_ferry.core.specs.patterns import (
    CLUSTER_ALIAS,
    CONNECTION_ID,
    MIGRATION_NAME,
    PRINCIPAL,
    SECRET_REF,
    TENANT,
    TOPIC_NAME,
    PatternError,
    any_full_match,
    compiled,
    is_topic_name,
)
from kafka_ferry.core.specs.spec_source import (
    Location,
    Position,
    SpecProblem,
    located,
    read_yaml,
    validation_problems,
)
from kafka_ferry.core.specs.spec_source import SpecError as SpecError  # load_spec raises it: callers catch it from here
from kafka_ferry.core.units import streams_apps
from kafka_ferry.core.units.coupling import CoupledUnit

# The name rules (full-match patterns: `$` would let a final newline through) and the RE2 matching of regexes.
TOPIC_CHARS = TOPIC_NAME  # a prefix is prepended to topic names: it holds only topic characters


class _Frozen(BaseModel):
    """Immutable, closed models: specs are parsed once and shared by every task of the DAG."""

    model_config = ConfigDict(frozen=True, extra="forbid")


def _connection_id(value: str) -> str:
    if not CONNECTION_ID.fullmatch(value):
        raise ValueError("not a valid Airflow connection id (letters, digits, '-', '_', '.')")
    return value


ConnectionId = Annotated[str, AfterValidator(_connection_id)]


class ClusterRef(_Frozen):
    """A Kafka cluster reached through an Airflow connection of type `kafka` (Extra = librdkafka config).

    The same two keys mean different things at `source` and at `destination` (which MM2 topic the alias names), so
    each role is its own model below, with its own descriptions; the checks are these, shared.
    """

    connection_id: ConnectionId = Field(description="Airflow connection of type `kafka`.")
    alias: str = Field(description="The cluster's name in MM2 topic names.")

    @field_validator("alias")
    @classmethod
    def _alias(cls, v: str) -> str:
        if not CLUSTER_ALIAS.fullmatch(v):
            raise ValueError("cluster alias must be 1-64 letters, digits, '_' or '-' (it names MM2 topics)")
        return v


class SourceCluster(ClusterRef):
    """The cluster the workload leaves."""

    connection_id: ConnectionId = Field(
        description="Airflow connection of type `kafka` (Extra = librdkafka config: `bootstrap.servers`, SASL/SSL "
                    "settings).",
    )
    alias: str = Field(
        description="The source's name in MM2 topic names: `<alias>.checkpoints.internal` and `<alias>.heartbeats` on "
                    "the destination.",
    )


class DestinationCluster(ClusterRef):
    """The cluster the workload moves to."""

    connection_id: ConnectionId = Field(description="Airflow connection of type `kafka` for the destination.")
    alias: str = Field(
        description="The destination's name in MM2 topic names: `mm2-offset-syncs.<alias>.internal`. Must differ "
                    "from `source.alias`.",
    )


def _regex(pattern: str) -> str:
    # RE2: matched in linear time against every name (core.specs.patterns says why); refused if RE2 cannot take it
    try:
        compiled(pattern)
    except PatternError as exc:
        raise ValueError(str(exc)) from None
    return pattern


Regex = Annotated[str, AfterValidator(_regex)]


class SerializedFieldsRule(_Frozen):
    """Which fields of the topics matching `topics` (full-match regex) a registry serializer wrote: `key`,
    `value`, `both` or `none`. Overrides what the source registry's subjects say (core.schemas.serialized_fields)."""

    topics: Regex = Field(description="Full-match regex over source topic names the rule applies to.")
    fields: Literal["key", "value", "both", "none"] = Field(
        description="Which fields of those topics carry the registry wire format.",
    )


class SchemaRegistryRef(_Frozen):
    """Schema migration between two registries (connections of type `schemaregistry`).

    `mode`: `preserve` keeps ids and versions (the destination must honour IMPORT mode), `remap` lets the
    destination assign ids and the copy rewrites them in records. Subjects follow the migrated topics
    (`<topic>-key`/`-value`, renamed like the topics); `subjects_include`/`subjects_exclude` (full-match
    regexes) add RecordNameStrategy-style subjects; referenced subjects come automatically.
    `serialized_fields`: rules (first match wins) saying which fields of a topic carry the registry wire
    format, where the subjects do not say it right; only those fields are rewritten and decode-checked.
    """

    source_connection_id: ConnectionId = Field(
        description="Airflow connection of type `schemaregistry` (host = the registry URL).",
    )
    destination_connection_id: ConnectionId = Field(
        description="Airflow connection of type `schemaregistry` for the destination.",
    )
    mode: Literal["preserve", "remap"] = Field(
        default="remap",
        description="`preserve` keeps schema ids and versions (the destination registry must accept IMPORT mode); "
                    "`remap` lets it assign ids and the copy rewrites the id in every record.",
    )
    subjects_include: tuple[Regex, ...] = Field(
        default=(),
        description="Extra subjects to migrate besides `<topic>-key`/`-value` (RecordNameStrategy), full-match "
                    "regexes.",
    )
    subjects_exclude: tuple[Regex, ...] = Field(default=(), description="Subjects never migrated, full-match regexes.")
    include_soft_deleted: bool = Field(
        default=True,
        description="Soft-deleted versions move too (and arrive soft-deleted): records written before a version was "
                    "retired still carry its id, and a consumer moved to the destination must resolve it. Opting out "
                    "leaves such records undecodable there; the decode check then blocks the run before translation, "
                    "naming them.",
    )
    move_global_compatibility: bool = Field(
        default=False,
        description="The destination registry's global compatibility is not the migration's: moved only when asked. "
                    "Each migrated subject gets the source's effective level either way (its own, else the source's "
                    "global).",
    )
    unknown_id_policy: Literal["fail", "pass-through"] = Field(
        default="fail",
        description="A record whose schema id the migration does not know: `fail` the batch, or `pass-through` copy "
                    "it unchanged.",
    )
    decode_check: Literal["off", "report", "enforce"] = Field(
        default="report",
        description="After each catch-up batch, decode the newly copied keys and values on the destination against "
                    "the destination registry (schemas.decode_check): `report` puts the counts and failures on the "
                    "run's page, `enforce` also fails the run (before translation) when one does not decode, `off` "
                    "skips the check. Not `enforce` by default: a source record that never decoded is copied "
                    "faithfully and fails here too.",
    )
    serialized_fields: tuple[SerializedFieldsRule, ...] = Field(
        default=(), max_length=1000,
        description="Rules, first match wins, saying which fields of a topic a registry serializer wrote (only those "
                    "are rewritten and decode-checked); without a rule the source registry's subjects decide "
                    "(core.schemas.serialized_fields).",
    )

    def field_overrides(self) -> tuple[tuple[str, str], ...]:
        return tuple((r.topics, r.fields) for r in self.serialized_fields)


Includes = Annotated[tuple[Regex, ...], Field(min_length=1)]


class Selection(_Frozen):
    """Full-match regexes; a name is selected when an include matches and no exclude does.

    What the names are differs by role (topic names, group ids), so `topics` and `groups` are their own models
    below, with their own descriptions; the matching is this, shared.
    """

    include: Includes = Field(description="Full-match regexes; a name is selected when one matches.")
    exclude: tuple[Regex, ...] = Field(
        default=(), description="Full-match regexes; a name one matches is not selected.",
    )
    allow_empty: bool = Field(
        default=False,
        description="The pre-flight refuses a selection that matches nothing on the source (a typo'd name is otherwise "
                    "a green, empty run); true says an empty selection is intended.",
    )

    def matches(self, name: str) -> bool:
        return any_full_match(self.include, name) and not any_full_match(self.exclude, name)


class IdentityRename(_Frozen):
    policy: Literal["identity"] = Field(
        default="identity",
        description="`identity` keeps the source name; `prefix` prepends `prefix`.",
    )

    def destination_topic(self, source_topic: str) -> str:
        return source_topic


class PrefixRename(_Frozen):
    policy: Literal["prefix"] = Field(description="`identity` keeps the source name; `prefix` prepends `prefix`.")
    prefix: str = Field(min_length=1, max_length=100, description="Prepended to every source topic name.")

    @field_validator("prefix")
    @classmethod
    def _prefix(cls, v: str) -> str:
        if not TOPIC_CHARS.fullmatch(v):
            raise ValueError("prefix may hold only letters, digits, '.', '_' and '-'")
        return v

    def destination_topic(self, source_topic: str) -> str:
        return f"{self.prefix}{source_topic}"


class GroupSelection(Selection):
    """Which consumer groups to migrate."""

    include: Includes = Field(description="Full-match regexes over group ids.")
    exclude: tuple[Regex, ...] = Field(
        default=(), description="Full-match regexes; a group one matches is not migrated.",
    )


class TopicSelection(Selection):
    """Which source topics to migrate."""

    include: Includes = Field(
        description="Full-match regexes (escape the dot: `orders\\..*`); a topic is selected when one matches.",
    )
    exclude: tuple[Regex, ...] = Field(
        default=(), description="Full-match regexes; a topic one matches is not selected.",
    )
    rename: IdentityRename | PrefixRename = Field(
        default_factory=IdentityRename, discriminator="policy",
        description="How a mirror topic is named on the destination.",
    )
    adopt: tuple[str, ...] = Field(
        default=(), max_length=10_000,
        description="Existing destination topics (by their destination name) the migration may take over as mirrors: "
                    "only when empty or holding only records it copied (core.provisioning.topic_ownership); any "
                    "other existing name is refused.",
    )

    @field_validator("adopt")
    @classmethod
    def _adopt(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        return _topic_names(v)


class CopySettings(_Frozen):
    """Bounds of one copy batch; every run is bounded so a batch window can be planned."""

    max_records_per_partition: int = Field(
        default=100_000, gt=0,
        description="At most this many records per partition in one batch.",
    )
    max_bytes_per_partition: int = Field(
        default=64 * 1024 * 1024, gt=0,
        description="At most this many bytes per partition in one batch.",
    )
    offset_sync_interval: int = Field(
        default=100, gt=0,
        description="Write an offset sync at least every this many records (and at every discontinuity: exact "
                    "translation needs them).",
    )
    lanes_per_task: int = Field(
        default=4, ge=1, le=64,
        description="Partitions one Spark task copies at once, each on its own clients (memory: per lane, the "
                    "producer and consumer queue bounds of copy/copier_settings.py, ~100 MB at most).",
    )
    provenance_headers: bool = Field(
        default=True,
        description="Add source cluster id and offset headers to every copied record: exactly-once resume. `false`: "
                    "at-least-once.",
    )
    accept_retention_gaps: bool = Field(
        default=False,
        description="Copy on when the source deleted records not yet copied (recorded in the state); `false` fails "
                    "the batch naming the lost ranges.",
    )
    spark_connection_id: ConnectionId = Field(
        default="spark_default",
        description="Airflow connection of type `spark` (host `local[*]`, `spark://host:7077`, `yarn`, `k8s://…`) or "
                    "`spark_connect`.",
    )
    kubernetes_credentials_secret: str | None = Field(
        default=None,
        description="'<Secret name>:<key>' of a Kubernetes Secret holding the copy job's cluster configs (k8s:// "
                    "masters).",
    )
    credentials_file: bool = Field(
        default=False,
        description="Ship the configs as a 0600 credentials file (--files) on every master, not only on YARN.",
    )
    fast_driver_start: bool = Field(
        default=True,
        description="spark-submit's driver JVM, where it runs on the Airflow worker: C1-only JIT and a class-data "
                    "archive kept on the host (core/batches/driver_jvm.py), a faster start per batch; false leaves "
                    "the JVM's flags alone.",
    )
    max_bytes_per_second: int | None = Field(
        default=None, gt=0,
        description="The migration's copy rate limit in bytes per second (keys plus values), shared by all the "
                    "batch's Spark tasks and lanes (and the promotion's final copy); throttling only delays, it "
                    "never changes what is copied.",
    )
    max_records_per_second: int | None = Field(
        default=None, gt=0,
        description="The migration's copy rate limit in records per second, shared like max_bytes_per_second (both "
                    "may be set).",
    )
    window: str | None = Field(
        default=None,
        description="A catch-up batch's window: a duration ('4h', '90min', '1h30min') counted from the run's due "
                    "time, or an end time ('05:00', 24-hour, in the DAG's timezone: Airflow's default_timezone). The "
                    "batch is sized from the migration's measured rate to end inside it and stops at the deadline at "
                    "a chunk boundary, progress and offset syncs written; the next run resumes there. Not applied to "
                    "the promotion's final copy.",
    )

    @field_validator("window")
    @classmethod
    def _window(cls, v: str | None) -> str | None:
        if v is not None:
            parse_window(v)  # ValueError: names what is accepted
        return v

    @property
    def rate_limit(self) -> RateLimit:
        """The copy rate limit (``core.batches.rate_limit``); unlimited when neither key is set."""
        return RateLimit(self.max_bytes_per_second, self.max_records_per_second)

    @field_validator("kubernetes_credentials_secret")
    @classmethod
    def _secret_ref(cls, v: str | None) -> str | None:
        if v is not None and not SECRET_REF.fullmatch(v):
            raise ValueError("a Kubernetes Secret reference is '<secret name>:<key>' (DNS name, key characters)")
        return v


class PromotionSettings(_Frozen):
    """Thresholds the sensors gate promotion on."""

    max_lag_records: int = Field(
        default=0, ge=0,
        description="Largest per-partition lag the final copy may start from.",
    )
    # Bounded like timeouts.task_seconds (issue 36: 3e9 s was accepted, a sensor waiting 34,722 days): a sensor
    # holds its worker slot (or a triggerer's) for as long as its timeout, and a quiesce window longer than a day
    # is no gate anyone waits for.
    quiesce_window_seconds: int = Field(
        default=30, ge=1, le=24 * 3600,
        description="The source's end offsets must stay unchanged this long (producers stopped).",
    )
    sensor_timeout_seconds: int = Field(
        default=3600, ge=1, le=7 * 24 * 3600,
        description="A promotion sensor fails after waiting this long.",
    )
    poke_interval_seconds: int = Field(
        default=10, ge=1, le=3600,
        description="Seconds between two checks of a promotion sensor.",
    )


def _principal(value: str) -> str:
    if not PRINCIPAL.fullmatch(value):
        raise ValueError("a principal is '<Type>:<name>', e.g. 'User:orders-app'")
    return value


Principal = Annotated[str, AfterValidator(_principal)]


class AclSettings(_Frozen):
    """ACL migration: the ACLs of migrated topics and groups, with principals renamed by this table
    (source principal -> destination principal; unlisted principals keep their name); ``migrate`` puts it on the
    DAG's route."""

    principals: dict[Principal, Principal] = Field(
        default_factory=dict,
        description="Source principal -> destination principal for migrated ACLs; unlisted principals keep their "
                    "name.",
    )
    migrate: bool = Field(
        default=False,
        description="Migrate the ACLs on the route: the DAG's migrate_acls task (after provision_groups, before the "
                    "mode's work; a dry run shows the diff) creates on the destination the ACLs the source holds on "
                    "migrated topics and groups, principals renamed by principals, never widened. Off by default: "
                    "it needs DESCRIBE on the source cluster and ALTER on the destination cluster, beyond the copy's "
                    "minimum ACLs (kafka-ferry acls SPEC lists them).",
    )
    fence: bool = Field(
        default=False,
        description="Fence the destination until promotion (needs an authorizer there): a migrated group's readers "
                    "are denied READ on it until the group is promoted; a mirror topic takes writes only from the "
                    "migration's principal until the topic is promoted. Put by provision_groups, lifted by the "
                    "promotion that promotes the unit.",
    )

    @field_validator("principals")
    @classmethod
    def _no_wildcard_target(cls, v: dict[str, str]) -> dict[str, str]:
        for source, target in v.items():
            if target.endswith(":*") and not source.endswith(":*"):
                raise ValueError(f"{source!r} -> {target!r} would grant everyone what one principal holds")
        return v


class TimeoutSettings(_Frozen):
    """Every task's execution timeout: a hung client call or Spark job fails its try instead of holding a worker
    slot for ever. ``copy_seconds`` bounds the Spark copy tasks (a batch of the spec's bounds takes far less)."""

    task_seconds: int = Field(
        default=3600, ge=60, le=7 * 24 * 3600,
        description="Execution timeout of every task but the Spark copy (seconds); a sensor never gets less than its "
                    "own timeout.",
    )
    copy_seconds: int = Field(
        default=6 * 3600, ge=60, le=7 * 24 * 3600,
        description="Execution timeout of the Spark copy tasks (seconds).",
    )


# Directories kafka-ferry keeps in the work base beside each migration's ``<work base>/<name>``: a migration of
# that name would share (and could plant files in) them.
RESERVED_NAMES: dict[str, str] = {ARCHIVE_DIR: "the driver JVM's class-data archive and the Spark home mirrors"}


def _checkpoint_location(value: str) -> str:
    if not value or not value.isprintable() or len(value) > 4096:
        raise ValueError("a checkpoint location is a non-empty path or URL of printable characters (4096 at most)")
    scheme, sep, rest = value.partition("://")
    if sep and ("@" in rest.split("/", 1)[0] or "?" in value or "#" in value):
        raise ValueError("a checkpoint URL has no user part, query or fragment: credentials come from the work "
                         "dir's Airflow connection, never the spec")
    return value


CheckpointLocation = Annotated[str, AfterValidator(_checkpoint_location)]


class SparkCheckpoint(_Frozen):
    """A Spark Structured Streaming query's checkpoint the promotion hands over (translation.spark_checkpoint)."""

    checkpoint: CheckpointLocation = Field(
        description="The checkpoint directory (`checkpointLocation`): a local path, or a URL read and written "
                    "through the work dir's connection.",
    )
    file_sink: CheckpointLocation | None = Field(
        default=None,
        description="The query's file sink directory (`path` of a file sink), when it has one: its metadata log "
                    "(`_spark_metadata`) gets the empty entry of the batch the hand-over adds, so readers of the "
                    "sink see no gap.",
    )


class ConsumerSettings(_Frozen):
    """Consumers that keep their position outside Kafka, handed over to the destination by the promotion."""

    spark_checkpoints: tuple[SparkCheckpoint, ...] = Field(
        default=(), max_length=1000,
        description="Spark Structured Streaming checkpoints the promotion rewrites after its final translation, so "
                    "each query resumes on the destination exactly where it stopped on the source "
                    "(docs/promotion.md). Stop the queries before promoting: a running query's checkpoint is "
                    "refused, unchanged.",
    )

    @field_validator("spark_checkpoints")
    @classmethod
    def _unique(cls, v: tuple[SparkCheckpoint, ...]) -> tuple[SparkCheckpoint, ...]:
        duplicates = sorted(n for n, count in Counter(c.checkpoint for c in v).items() if count > 1)
        if duplicates:
            raise ValueError(f"{duplicates[0]!r} is listed twice")
        return v


class StreamsApplicationSpec(_Frozen):
    """A Kafka Streams application that moves as one unit (core.units.streams_apps)."""

    application_id: str = Field(
        min_length=1, max_length=200,
        description="The application's `application.id`: its group, and the prefix of its `<id>-<name>-changelog` "
                    "and `<id>-<name>-repartition` topics.",
    )
    output_topics: tuple[str, ...] = Field(
        default=(), max_length=1000,
        description="Topics the application writes its results to (not seen from names): selected, provisioned and "
                    "promoted with it.",
    )

    @field_validator("application_id")
    @classmethod
    def _application_id(cls, v: str) -> str:
        if not is_topic_name(v):
            raise ValueError("not a legal Kafka Streams application.id (letters, digits, '.', '_', '-': it prefixes "
                             "the application's topic names)")
        return v

    @field_validator("output_topics")
    @classmethod
    def _outputs(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        return _topic_names(v)

UNIT_NAME_MAX = 1000  # a unit found in __transaction_state is named after its transactional ids


def _unit_name(value: str) -> str:
    if not value.strip() or not value.isprintable() or len(value) > UNIT_NAME_MAX:
        raise ValueError(f"a unit name is 1-{UNIT_NAME_MAX} printable characters")
    return value


UnitName = Annotated[str, AfterValidator(_unit_name)]


class DeclaredUnit(_Frozen):
    """Topics and groups that must be promoted together (core.units.coupling): a staged cutover that would move some of
    them and leave others is refused, unless `coupling.accept_split` names the unit."""

    name: UnitName = Field(
        description="The unit's name, said in every refusal and listed in `coupling.accept_split` to accept "
                    "splitting it.",
    )
    topics: tuple[str, ...] = Field(
        default=(), max_length=10_000,
        description="Source topic names (exact names, not regexes) of the unit.",
    )
    groups: tuple[str, ...] = Field(
        default=(), max_length=10_000,
        description="Consumer group ids (exact names) of the unit.",
    )
    reason: str = Field(
        default="declared in the spec", max_length=1000,
        description="Why they belong together, said in every refusal.",
    )

    @field_validator("topics")
    @classmethod
    def _topics(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        return _topic_names(v)

    @field_validator("groups")
    @classmethod
    def _groups(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        for name in v:
            if not name or not name.isprintable():
                raise ValueError(f"{name!r} is not a group id (empty, or a control character)")
        return _no_duplicates(v)

    @field_validator("reason")
    @classmethod
    def _reason(cls, v: str) -> str:
        if not v.isprintable():
            raise ValueError("reason holds a control character (a newline?)")
        return v

    @model_validator(mode="after")
    def _two_members(self) -> DeclaredUnit:
        if len(self.topics) + len(self.groups) < 2:
            raise ValueError(f"unit {self.name!r} names {len(self.topics) + len(self.groups)} topic(s) and "
                             "group(s): a unit has at least two members (nothing can split one)")
        return self

    def unit(self) -> CoupledUnit:
        return CoupledUnit(self.name, frozenset(self.topics), frozenset(self.groups), self.reason)


def _no_duplicates(v: tuple[str, ...]) -> tuple[str, ...]:
    duplicates = sorted(n for n, count in Counter(v).items() if count > 1)
    if duplicates:
        raise ValueError(f"{duplicates[0]!r} is listed twice")
    return v


def _topic_names(v: tuple[str, ...]) -> tuple[str, ...]:
    """A list of topic names: each legal, none twice (topics.adopt, an application's output_topics, a unit's)."""
    for name in v:
        if not is_topic_name(name):
            raise ValueError(f"{name!r} is not a legal Kafka topic name")
    return _no_duplicates(v)


class CouplingSettings(_Frozen):
    """Units of topics and groups that move together in a staged cutover (docs/promotion.md, units and coupling)."""

    discover_transactions: bool = Field(
        default=True,
        description="Read the source's `__transaction_state` (when the principal may) to find topics written in the "
                    "same transactions; each such set is a unit named `transactions:<transactional ids>`.",
    )
    units: tuple[DeclaredUnit, ...] = Field(
        default=(), max_length=1000,
        description="Units declared by hand: where `__transaction_state` cannot be read, or for any other coupling.",
    )
    accept_split: tuple[UnitName, ...] = Field(
        default=(), max_length=1000,
        description="Names of units (declared or found) a staged cutover may split: their members may run on "
                    "different clusters for a while. Explicit, per unit.",
    )

    @field_validator("units")
    @classmethod
    def _unique(cls, v: tuple[DeclaredUnit, ...]) -> tuple[DeclaredUnit, ...]:
        duplicates = sorted(n for n, count in Counter(u.name for u in v).items() if count > 1)
        if duplicates:
            raise ValueError(f"unit {duplicates[0]!r} is declared twice")
        return v

    @field_validator("accept_split")
    @classmethod
    def _accepted(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        return _no_duplicates(v)

    def declared_units(self) -> list[CoupledUnit]:
        return [u.unit() for u in self.units]


class EvidenceSettings(_Frozen):
    """The evidence bundle written after every promotion, staged step and rollback (``core.cutover.evidence``): signed
    with the Ed25519 key of the Airflow connection ``signing_connection_id`` (type ``evidencesigning``, the key in
    its password), or written unsigned, with its digests, without one. ``require_signature``: a cutover without a
    usable key fails before its bundle is written, instead of writing it unsigned."""

    signing_connection_id: ConnectionId | None = Field(
        default=None,
        description="The Airflow connection (type `evidencesigning`) whose password holds the Ed25519 key that "
                    "signs each evidence bundle's manifest; its public key is recorded in the state topic at the "
                    "first signed bundle. Unset: bundles are written unsigned, with their digests.",
    )
    require_signature: bool = Field(
        default=False,
        description="`true`: a promotion, staged step or rollback without a usable signing key fails before its "
                    "bundle is written, instead of writing it unsigned. Needs `signing_connection_id`.",
    )

    @model_validator(mode="after")
    def _signing_needs_a_key(self) -> EvidenceSettings:
        if self.require_signature and not self.signing_connection_id:
            raise ValueError("evidence.require_signature is true but evidence.signing_connection_id is not set: "
                             "name the connection holding the Ed25519 key")
        return self


class MigrationSpec(_Frozen):
    name: str = Field(
        description="The migration's name: the DAG id is `kafka_ferry__<name>`, the state topic "
                    "`kafka-ferry.<name>.state`. Lowercase letters, digits, `_` and `-`.",
    )
    tenant: str = Field(
        min_length=1, max_length=100,
        description="Who owns the workload; a DAG tag (`tenant:<tenant>`) and a column of the Migrations page.",
    )
    description: str = Field(default="", description="The DAG's description in the Airflow UI.")
    source: SourceCluster = Field(description="The cluster the workload leaves.")
    destination: DestinationCluster = Field(
        description="The cluster the workload moves to; the migration's own topics live here.",
    )
    schema_registry: SchemaRegistryRef | None = None
    acls: AclSettings = Field(default_factory=AclSettings)
    topics: TopicSelection = Field(description="Which source topics to migrate (Kafka-internal `__` topics never are).")
    groups: GroupSelection = Field(
        default_factory=lambda: GroupSelection(include=(".*",)),
        description="Which consumer groups to migrate: those selected here with committed offsets on migrated topics "
                    "(default: every such group). Checked by the pre-flight only when the spec sets it.",
    )
    copy_settings: CopySettings = Field(
        default_factory=CopySettings, alias="copy",
        description="The copy batches (Spark).",
    )
    schedule: str | None = Field(
        default=None,
        description="Cron expression or @preset for catch-up batches; `null`: triggered runs only.",
    )
    promotion: PromotionSettings = Field(
        default_factory=PromotionSettings,
        description="When the promotion may cut over (the sensors' thresholds).",
    )
    state_topic: str | None = Field(
        default=None,
        description="The migration's state topic on the destination; default `kafka-ferry.<name>.state`.",
    )
    timeouts: TimeoutSettings = Field(default_factory=TimeoutSettings)
    consumers: ConsumerSettings = Field(default_factory=ConsumerSettings)
    applications: tuple[StreamsApplicationSpec, ...] = Field(
        default=(), max_length=1000,
        description="Kafka Streams applications that move as one unit: the group `application_id`, its changelog and "
                    "repartition topics, its input topics (which topics.include must select) and `output_topics` are "
                    "selected, provisioned and promoted together; a staged step that would split one is refused. "
                    "Groups detected as Streams applications from their topics' names are units too, without being "
                    "listed here.",
    )
    coupling: CouplingSettings = Field(default_factory=CouplingSettings)
    evidence: EvidenceSettings = Field(default_factory=EvidenceSettings)

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not MIGRATION_NAME.fullmatch(v):
            raise ValueError("name must start with a lowercase letter or digit and hold only a-z, 0-9, '_', '-'")
        if v in RESERVED_NAMES:
            raise ValueError(f"{v!r} is reserved: kafka-ferry keeps a directory of that name beside the migrations' "
                             f"work dirs ({RESERVED_NAMES[v]}); choose another name")
        return v

    @field_validator("tenant")
    @classmethod
    def _tenant(cls, v: str) -> str:
        if not TENANT.fullmatch(v):
            raise ValueError("tenant must be 1-100 letters, digits, '.', '_' or '-', starting with a letter or digit")
        return v

    @field_validator("schedule")
    @classmethod
    def _schedule(cls, v: str | None) -> str | None:
        if v is not None and not v.isprintable():
            raise ValueError("schedule holds a control character (a newline?)")
        if v is None or v.startswith("@"):
            return v
        if len(v.split()) != 5:
            raise ValueError("schedule must be a 5-field cron expression, an @preset, or null")
        return v

    @field_validator("state_topic")
    @classmethod
    def _state_topic(cls, v: str | None) -> str | None:
        if v is not None and not is_topic_name(v):
            raise ValueError("not a legal Kafka topic name (1-249 of letters, digits, '.', '_', '-'; not '.' or '..')")
        return v

    @field_validator("applications")
    @classmethod
    def _unique_applications(cls, v: tuple[StreamsApplicationSpec, ...]) -> tuple[StreamsApplicationSpec, ...]:
        duplicates = sorted(n for n, count in Counter(a.application_id for a in v).items() if count > 1)
        if duplicates:
            raise ValueError(f"application_id {duplicates[0]!r} is listed twice")
        return v

    @property
    def declared_applications(self) -> dict[str, tuple[str, ...]]:
        """application id -> output topics, of the applications the spec names."""
        return {a.application_id: a.output_topics for a in self.applications}

    def selects_topic(self, name: str) -> bool:
        """The spec selects this source topic: by topics.include/exclude, or as a named application's changelog,
        repartition or output topic (an application moves whole; core.units.streams_apps)."""
        if self.topics.matches(name):
            return True
        apps = self.declared_applications
        return any(name in outputs for outputs in apps.values()) or streams_apps.owner(name, apps) is not None

    def selects_group(self, name: str) -> bool:
        """The spec selects this source group: by groups.include/exclude, or as a named application's group."""
        return self.groups.matches(name) or name in self.declared_applications

    @property
    def dag_id(self) -> str:
        return f"kafka_ferry__{self.name}"

    @property
    def state_topic_name(self) -> str:
        return self.state_topic or f"kafka-ferry.{self.name}.state"

    @property
    def copy_back_state_topic_name(self) -> str:
        """Where a rollback's copy-back keeps its progress: on the source, beside the state topic's name (the
        partition copier writes progress to its own destination's state topic, and the copy-back's destination is
        the source). Named here once: the rollback writes it, its minimum ACLs grant it."""
        return f"{self.state_topic_name}.rollback"


# MM2 can keep offset syncs on either cluster; kafka-ferry writes and reads them on the destination only.
REMOVED_SYNC_LOCATION = "offset_syncs_topic_location"


def parse_spec(data: Any, path: str | Path = "<spec>",
               positions: Mapping[Location, Position] | None = None) -> MigrationSpec:
    """Validate an already-loaded YAML document; raise one SpecError holding every problem found."""
    positions = positions or {}
    if data is None:
        raise SpecError(path, [SpecProblem(None, None, "the file is empty: a migration spec is a YAML mapping")])
    if not isinstance(data, dict):
        raise SpecError(path, [SpecProblem("<root>", type(data).__name__,
                                           "the spec must be a YAML mapping (key: value lines)", line=1)])
    problems = _cross_field_problems(data, positions)
    if REMOVED_SYNC_LOCATION in data:
        problems.append(located((REMOVED_SYNC_LOCATION,), data[REMOVED_SYNC_LOCATION],
                                "not supported: offset syncs are written to the destination", positions))
        data = {k: v for k, v in data.items() if k != REMOVED_SYNC_LOCATION}
    try:
        spec = MigrationSpec.model_validate(data)
    except ValidationError as exc:
        problems += validation_problems(exc, positions, MigrationSpec)
    if problems:
        raise SpecError(path, problems)
    return spec


def load_spec(path: str | Path) -> MigrationSpec:
    """Read and validate one migration YAML file; every problem of the file in one SpecError."""
    path = Path(path)
    data, positions = read_yaml(path)
    return parse_spec(data, path, positions)


def _cross_field_problems(data: Mapping[str, Any], positions: Mapping[Location, Position]) -> list[SpecProblem]:
    problems = _window_problems(data, positions) + _application_rename_problems(data, positions)
    source, destination = data.get("source"), data.get("destination")
    if not (isinstance(source, dict) and isinstance(destination, dict)):
        return problems
    checks = (("alias", "must differ from source.alias"),
              ("connection_id", "source and destination use the same connection: a migration onto itself"))
    return problems + [located(("destination", key), destination[key], reason, positions) for key, reason in checks
                       if isinstance(destination.get(key), str) and destination[key] == source.get(key)]


def _window_problems(data: Mapping[str, Any], positions: Mapping[Location, Position]) -> list[SpecProblem]:
    """A duration window longer than the copy task's timeout: the task would be killed before its deadline."""
    copy, timeouts = data.get("copy"), data.get("timeouts")
    window = copy.get("window") if isinstance(copy, dict) else None
    limit = timeouts.get("copy_seconds") if isinstance(timeouts, dict) else None
    limit = limit if isinstance(limit, int) else TimeoutSettings.model_fields["copy_seconds"].default
    try:
        seconds = parse_window(window).seconds if isinstance(window, str) else None
    except ValueError:
        return []  # the field's own validator says why
    if seconds is None or seconds <= limit:
        return []
    return [located(("copy", "window"), window, f"is {seconds} s, longer than timeouts.copy_seconds ({limit} s): "
                    "the copy task would time out before its deadline; shorten the window or raise the timeout",
                    positions)]


def _application_rename_problems(data: Mapping[str, Any], positions: Mapping[Location, Position]
                                 ) -> list[SpecProblem]:
    """Streams applications with renamed topics: an application finds its changelog and repartition topics by its
    application.id alone, so on the destination they must keep their names (a prefixed changelog is a new, empty
    one: the application would restore no state)."""
    topics, apps = data.get("topics"), data.get("applications")
    rename = topics.get("rename") if isinstance(topics, dict) else None
    if not apps or not isinstance(rename, dict) or rename.get("policy", "identity") == "identity":
        return []
    return [located(("topics", "rename", "policy"), rename.get("policy"), "a spec with applications (Kafka Streams) "
                    "keeps topic names: an application finds its changelog and repartition topics by its "
                    "application.id, so a renamed changelog would restore no state; use policy identity", positions)]
