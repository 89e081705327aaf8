"""Every record kind of a migration's state topic, declared once: its key, the fields of its value, who writes it.

The state topic (``kafka-ferry.<migration>.state`` on the destination, compacted, one partition) is the
migration's memory: it survives a reset of Airflow's database and the Spark job reads it. MirrorMaker
declares its internal records in one place (``OffsetSync``, ``Checkpoint``, ``Heartbeat``; see ``mm2_wire``);
this module does the same for kafka-ferry's own topic, so a reader and a writer cannot disagree on a
kind's name, its key or the fields a value carries. ``state.store`` only accepts kinds declared here.

Record layout (literal-byte tests in ``tests/unit/core/test_state_records.py``):

    key    UTF-8 "<kind>/<key>"        kind never contains "/"; a key may ("step/final_copy")
    value  UTF-8 JSON object, keys sorted, compact separators as json.dumps writes them by default,
           with "written_at_ms" (the writer's wall clock) added by the store; a tombstone (null value)
           deletes the key, and compaction keeps only the newest value per key

Pure: no Kafka, no Airflow; the store does the I/O.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeAlias

from kafka_ferry.core.common.failures import Retryable

WRITTEN_AT = "written_at_ms"


class StateRecordError(Retryable, ValueError):
    """A state record that breaks its declaration; the message names kind, key, field and value."""


@dataclass(frozen=True)
class StateKind:
    """One kind of record: ``fields`` are carried by every live value (checked on write, so a reader can rely
    on them); values may carry more."""

    name: str
    key: str
    fields: tuple[str, ...]
    written_by: str

    def __str__(self) -> str:
        return self.name

    def record_key(self, key: str) -> bytes:
        if not isinstance(key, str) or not key:
            raise StateRecordError(f"state record {self.name}: key {key!r} is not a non-empty string ({self.key})")
        return f"{self.name}/{key}".encode()

    def encode(self, key: str, value: Mapping[str, Any] | None, written_at_ms: int) -> tuple[bytes, bytes | None]:
        """The record's key and value bytes; None writes a tombstone."""
        record_key = self.record_key(key)
        if value is None:
            return record_key, None
        missing = [f for f in self.fields if f not in value]
        if missing:
            raise StateRecordError(f"state record {self.name}/{key}: field {missing[0]} is missing "
                                   f"(every {self.name} record carries {', '.join(self.fields)})")
        return record_key, json.dumps({**value, WRITTEN_AT: written_at_ms}, sort_keys=True).encode()

    def records(self, state: StateSnapshot) -> dict[str, dict[str, Any]]:
        """This kind's live records in a ``read_all`` snapshot, by key."""
        return dict(state.get(self, {}))


# A ``read_all()`` of the state topic, as readers take it: {kind: {key: value}}. Readers that get one skip the read.
StateSnapshot: TypeAlias = Mapping[StateKind, Mapping[str, dict[str, Any]]]


def decode(raw_key: bytes, raw_value: bytes | None) -> tuple[str, str, dict[str, Any] | None]:
    """(kind name, key, value or None for a tombstone) of a record read from the topic."""
    kind, slash, key = raw_key.decode().partition("/")
    if not slash or not kind or not key:
        raise StateRecordError(f"state record key {raw_key!r} is not '<kind>/<key>'")
    return kind, key, None if raw_value is None else json.loads(raw_value)


def state_topic_problem(topic: str, partitions: int, cleanup_policy: str | None) -> str | None:
    """Why an existing topic cannot be a migration's state topic (one partition, compacted only), or None."""
    policies = sorted(p.strip() for p in (cleanup_policy or "delete").split(",") if p.strip())
    if partitions == 1 and policies == ["compact"]:
        return None
    return (f"state topic {topic} has {partitions} partition(s) and cleanup.policy {','.join(policies)}; a "
            "migration's state topic needs 1 partition and cleanup.policy compact (reads look at partition 0, "
            "compaction keeps each record's newest value). Delete it or name another one in the spec's "
            "state_topic; nothing was changed")


# --- keys -------------------------------------------------------------------------------------------------
def partition_key(topic: str, partition: int) -> str:
    """``<source topic>:<partition>``; parsed from the right, as Kafka topic names cannot hold a colon."""
    return f"{topic}:{partition}"


def parse_partition_key(key: str) -> tuple[str, int]:
    topic, _, partition = key.rpartition(":")
    return topic, int(partition)


def gap_key(topic: str, partition: int, lost_start: int) -> str:
    """One ledger entry per lost range start: a later, wider loss of the same range replaces it."""
    return f"{partition_key(topic, partition)}@{lost_start}"


# The promotion kind holds one migration's whole-cutover records under these keys and key prefixes.
MIGRATION_KEY = "migration"                  # status, promoted_at_ms, topics, groups
QUIESCE_KEY = "quiesce/source-end-offsets"   # fingerprint, since_s: when the source's end offsets last moved
STEP_PREFIX = "step/"                        # step/<step>: status, finished_at_ms, duration_s, summary
TRANSLATION_PREFIX = "translation/"          # translation/<group>: decisions, one row per partition
PROMOTED_TOPIC_PREFIX = "topic/"             # topic/<source topic>: status, destination_topic, promoted_at_ms
PROMOTED_GROUP_PREFIX = "group/"             # group/<group>: status, promoted_at_ms


def under(records: Mapping[str, Any], prefix: str) -> dict[str, Any]:
    """The records whose key starts with ``prefix``, keyed by the rest of the key (in key order)."""
    return {k[len(prefix):]: v for k, v in sorted(records.items()) if k.startswith(prefix)}


# --- kinds ------------------------------------------------------------------------------------------------
PROGRESS_KIND = StateKind(
    "progress", "<source topic>:<partition>",
    ("source_topic", "partition", "destination_topic", "next_upstream_offset", "last_upstream_offset",
     "last_downstream_offset", "records_copied", "batch_id"),
    "the partition copier after each partition (core.batches.progress.PartitionProgress); the planner past an "
    "accepted gap")
GAP_KIND = StateKind(
    "gap", "<source topic>:<partition>@<first lost offset>",
    ("topic", "partition", "lost_start", "lost_end", "lost_count", "batch_id", "recorded_at_ms"),
    "the planner, for records lost to source retention that the spec accepts")
BATCH_KIND = StateKind(
    "batch", "<batch id>",
    ("migration", "batch_id", "status", "records_copied", "lag_after_total", "report_path"),
    "the copy job's driver when a batch ends (totals; per-partition rows stay in the report file)")
TOPIC_KIND = StateKind(
    "topic", "<source topic>", ("destination_topic", "partitions"), "provisioning, per mirrored topic")
OWNED_TOPIC_KIND = StateKind(
    "owned-topic", "<destination topic>", ("destination_topic", "source_topic", "how"),
    "provisioning, before it creates (how: created) or adopts (how: adopted, topics.adopt) a destination topic: "
    "the topics the migration may write to and reconfigure (core.provisioning.topic_ownership)")
GROUP_KIND = StateKind(
    "group", "<group id>", ("source_topics",), "provisioning, per migrated consumer group")
TIMESTAMPS_KIND = StateKind(
    "timestamps", "<source topic>",
    ("source_topic", "destination_topic", "source_timestamp_type", "during", "at_promotion", "status"),
    "provisioning (core.provisioning.time_fidelity.TopicTimePlan, status copying); the promotion (status switched)")
PROMOTION_KIND = StateKind(
    "promotion", "migration | quiesce/source-end-offsets | step/<step> | translation/<group> | topic/<topic> "
    "| group/<group>", (),
    "the whole-migration promotion runner and its readiness gates (keys and fields: the *_key helpers above)")
GROUP_PROMOTION_KIND = StateKind(
    "group_promotion", "<group id>", ("name", "run_id", "steps_done", "started_at_ms"),
    "a staged group promotion (core.cutover.staged_cutover.UnitPromotion)")
TOPIC_PROMOTION_KIND = StateKind(
    "topic_promotion", "<source topic>", ("name", "run_id", "steps_done", "started_at_ms"),
    "a staged topic promotion (core.cutover.staged_cutover.UnitPromotion)")
GROUP_ACTIVITY_KIND = StateKind(
    "group_activity", "<group id>", ("fingerprint", "changed_at_ms"),
    "the group readiness check: when a source group's committed offsets last changed")
SCHEMA_ID_KIND = StateKind(
    "schema_id", "<source schema id>", ("destination_id", "mode", "run_id"),
    "schema migration: the id map the copy rewrites wire-format records with (remap mode)")
SERIALIZED_FIELDS_KIND = StateKind(
    "serialized-fields", "<source topic>", ("key", "value", "reason", "run_id"),
    "schema migration: whether the topic's key and value carry the registry wire format "
    "(core.schemas.serialized_fields), so copy, decode check and reconciliation rewrite and check only those")
FENCE_KIND = StateKind(
    "fence", "GROUP:<group id> | TOPIC:<mirror topic>", ("entries",),
    "fencing (acls.fence): the DENY ACLs put on the destination for a unit, so its promotion lifts exactly those")
ACL_MIGRATION_KIND = StateKind(
    "acl-migration", "<run id>", ("run_id", "recorded_at_ms", "created", "present", "refused"),
    "the ACL migration (provision.acls.migrate_acls), not in a dry run, when a run created an ACL on the destination "
    "or refused another set than the newest record: the entries it created (only those the destination accepted), "
    "the count found present, the refusals with their reasons (core.acls.acl_record). Own only what you create: "
    "the created entries are the only ACLs a later removal may touch")
DECODE_CHECK_KIND = StateKind(
    "decode-check", "<destination topic>:<partition>",
    ("destination_topic", "partition", "checked_through", "records", "decoded", "plain", "failed", "batch_id"),
    "the decode check after a batch: the next destination offset to check and the partition's totals so far "
    "(and `migration_fault` while records there decode on the source but not on the destination)")
LEASE_KIND = StateKind(
    "copy-lease", "<claim token>",
    ("token", "migration", "batch_id", "host", "pid", "pid_started", "claimed_at_ms", "expires_at_ms"),
    "a copy job claiming the migration's copy lease (core.batches.copy_lease.Claim; written by the lease itself, "
    "which needs each claim's offset)")
BACKLOG_KIND = StateKind(
    "backlog", "<batch id>",
    ("batch_id", "finished_at_ms", "duration_s", "records_copied", "bytes_copied", "backlog_before",
     "backlog_after", "offsets_progressed", "backlog_bytes_after", "bytes_estimated", "copy_records_per_s",
     "etas"),
    "the copy report task after each catch-up batch: backlog before and after (offsets; bytes estimated from "
    "the measured bytes per record), the measured rate and the ETAs (core.batches.backlog_eta)")

ROLLBACK_KIND = StateKind(
    "rollback", "migration | step/<step> | resume/<group> | range/<destination topic>:<partition> | group/<group> "
    "| topic/<topic>", (),
    "the rollback runner (promotion.rollback), a staged group's or topic's rollback (promotion.group_rollback, "
    "promotion.topic_rollback; keys and fields: state.rollback)")
OWNER_KIND = StateKind(
    "owner", "spec", ("spec_path", "tenant", "name"),
    "with the platform's tenants file, the first provisioning: the spec file (relative to the tenants file's "
    "spec_root) and tenant that own the state topic; a run from another spec file or tenant is refused before any "
    "change (core.specs.tenants.owner_problem)")
ACT_KIND = StateKind(
    "act", "<mode>/<run id>",
    ("record_version", "action", "user", "confirmation", "run_id", "run_type", "started_at_ms", "status"),
    "every promotion, staged step, rollback and reset (promote, promote-groups, promote-topics, rollback, "
    "reset-promotion): who triggered it, the typed confirmation, the run and when (core.cutover.authority.act_record); "
    "written as the act's first task starts, again when it is done")
EVIDENCE_KEY_KIND = StateKind(
    "evidence-key", "signing", ("public_key", "fingerprint", "recorded_at_ms", "run_id"),
    "the first signed evidence bundle (promotion.evidence): the Ed25519 public key every later bundle of the "
    "migration must be signed with (core.cutover.evidence.signer_problem)")

KINDS: dict[str, StateKind] = {k.name: k for k in (
    OWNER_KIND, ACT_KIND, EVIDENCE_KEY_KIND,
    PROGRESS_KIND, GAP_KIND, BATCH_KIND, TOPIC_KIND, OWNED_TOPIC_KIND, GROUP_KIND, TIMESTAMPS_KIND, PROMOTION_KIND,
    GROUP_PROMOTION_KIND, TOPIC_PROMOTION_KIND, GROUP_ACTIVITY_KIND, SCHEMA_ID_KIND, FENCE_KIND, ACL_MIGRATION_KIND,
    DECODE_CHECK_KIND,
    LEASE_KIND, SERIALIZED_FIELDS_KIND, BACKLOG_KIND, ROLLBACK_KIND)}
