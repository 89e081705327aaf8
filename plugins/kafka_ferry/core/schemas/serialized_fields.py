"""Which fields (key, value) of each topic carry the registry wire format, and the rewrite that touches only those.

Why a decision per topic and field: a remap migration changes bytes 1-4 of a payload that starts with 0x00.
That shape alone proves nothing: an 8-byte big-endian long key (Java's LongSerializer) below 2^56 starts
with 0x00 too, and its bytes 1-4 are as likely as not to equal a mapped id. Rewriting such a key corrupts
it silently; failing on it ("schema id N not mapped") stops a copy over data the registry never saw. So a
field is rewritten (and decode-checked) only where the source registry, or the spec, says it is serialized
by a registry serializer; every other field is copied byte for byte and never fails on an "unknown id".

The decision for topic T, first rule that applies (each decision carries its reason):
  1. the spec: the first `schema_registry.serialized_fields` rule whose `topics` regex full-matches T;
  2. TopicNameStrategy: the source registry holds `T-key` (key) and/or `T-value` (value); a value also counts
     when rule 3 finds subjects for T;
  3. TopicRecordNameStrategy: subjects the spec selects with `subjects_include` named `T-<record name>` (split
     at the last '-'): the value is serialized; a key needs rule 1;
  4. RecordNameStrategy: subjects selected by `subjects_include` that name no migrated topic: such a subject
     says nothing about which topic uses it, so the values of topics with no evidence of their own count as
     serialized (the spec listed record-name subjects for this migration); a key needs rule 1;
  5. otherwise neither field: both are copied byte for byte.
Pure: no registry client here; `schemas.serialized_fields` reads the subjects and stores the decisions.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kafka_ferry.core.common.failures import Permanent
from kafka_ferry.core.schemas.schema_wire import SchemaIdRewriter, UnknownIdPolicy
from kafka_ferry.core.specs.patterns import any_full_match, full_match

FIELD_CHOICES = ("key", "value", "both", "none")
_CHOICE = {"key": (True, False), "value": (False, True), "both": (True, True), "none": (False, False)}

Rewrite = Callable[[bytes | None], bytes | None]


def choice_of(key: bool, value: bool) -> str:
    """`key`, `value`, `both` or `none`: how the spec and the pages name a pair of field flags."""
    return {flags: name for name, flags in _CHOICE.items()}[(key, value)]


@dataclass(frozen=True)
class FieldDecision:
    """Whether the key and the value of one source topic are registry-serialized, and why."""

    topic: str
    key: bool
    value: bool
    reason: str

    @property
    def fields(self) -> str:
        return choice_of(self.key, self.value)

    def describe(self) -> str:
        return f"{self.topic}: {self.fields} ({self.reason})"

    def as_record(self) -> dict[str, Any]:
        return {"key": self.key, "value": self.value, "reason": self.reason}

    @classmethod
    def from_record(cls, topic: str, record: Mapping[str, Any]) -> FieldDecision:
        return cls(topic, bool(record["key"]), bool(record["value"]), str(record.get("reason", "")))

    @classmethod
    def of_choice(cls, topic: str, choice: str, reason: str) -> FieldDecision:
        if choice not in _CHOICE:
            raise ValueError(f"fields must be one of {FIELD_CHOICES}, not {choice!r}")
        return cls(topic, *_CHOICE[choice], reason)


def _record_subjects(subjects: Iterable[str], topics: Sequence[str], include: Sequence[str],
                     exclude: Sequence[str]) -> tuple[dict[str, list[str]], list[str]]:
    """Selected record-name subjects: per topic (`<topic>-<record>`) and unattributed.

    Split at the last '-', as `select_subjects` does: a record's full name holds no '-' (Avro and Protobuf names
    cannot), so `orders-eu-acme.Created` is topic `orders-eu`'s, never `orders`'s."""
    by_topic: dict[str, list[str]] = {}
    loose: list[str] = []
    migrated = set(topics)
    for subject in sorted(set(subjects)):
        if not any_full_match(include, subject) or any_full_match(exclude, subject):
            continue
        owner, _, rest = subject.rpartition("-")
        if rest in ("key", "value"):
            continue  # a TopicNameStrategy subject (rule 2, its own topic's), whether or not an include names it
        if owner in migrated:
            by_topic.setdefault(owner, []).append(subject)
        else:
            loose.append(subject)
    return by_topic, loose


def decide_fields(topics: Iterable[str], source_subjects: Iterable[str],
                  overrides: Sequence[tuple[str, str]] = (), include: Sequence[str] = (),
                  exclude: Sequence[str] = ()) -> dict[str, FieldDecision]:
    """The decision for every topic (see the module's rules); `overrides` are (topics regex, fields) in spec order."""
    topics = sorted(set(topics))
    subjects = set(source_subjects)
    by_topic, loose = _record_subjects(subjects, topics, tuple(include), tuple(exclude))
    out = {}
    for topic in topics:
        out[topic] = _decide(topic, subjects, overrides, by_topic.get(topic, []), loose)
    return out


def _decide(topic: str, subjects: set[str], overrides: Sequence[tuple[str, str]], record_subjects: list[str],
            loose: list[str]) -> FieldDecision:
    for index, (pattern, choice) in enumerate(overrides):
        if full_match(pattern, topic):  # RE2: linear in the name (core.specs.patterns)
            return FieldDecision.of_choice(
                topic, choice, f"spec: serialized_fields[{index}] (topics {pattern!r}, fields {choice})")
    key, value = f"{topic}-key" in subjects, f"{topic}-value" in subjects
    if key or value or record_subjects:
        found = [s for s in (f"{topic}-key", f"{topic}-value") if s in subjects] + record_subjects[:3]
        more = f" and {len(record_subjects) - 3} more" if len(record_subjects) > 3 else ""
        why = f"source registry subject(s) {', '.join(found)}{more}"
        if record_subjects and not key:
            why += "; record-name subjects say nothing of keys (a serialized key needs a serialized_fields rule)"
        return FieldDecision(topic, key, value or bool(record_subjects), why)
    if loose:
        more = f" and {len(loose) - 3} more" if len(loose) > 3 else ""
        return FieldDecision(topic, False, True, (
            f"no {topic}-key/{topic}-value subject; subjects_include selects record-name subject(s) "
            f"{', '.join(loose[:3])}{more}: values counted as serialized, keys not (override with serialized_fields)"))
    return FieldDecision(topic, False, False, f"no subject {topic}-key or {topic}-value in the source registry and "
                                              "no record-name subjects listed: copied byte for byte")


class FieldsUndecided(Permanent, ValueError):
    """A topic to rewrite has no stored decision: the schema migration has not seen it yet."""


class RecordRewriter:
    """A remap migration's rewrite, per topic and field: the id rewrite on serialized fields, nothing elsewhere.

    `decisions` by source topic. A topic without a decision is refused (`FieldsUndecided`), never guessed:
    guessing "both" is the corruption this module exists to stop, guessing "none" leaves source ids in
    records the destination's consumers would decode against the wrong schemas.
    """

    def __init__(self, ids: SchemaIdRewriter, decisions: Mapping[str, FieldDecision]):
        self.ids = ids
        self.decisions = dict(decisions)

    @property
    def id_map(self) -> dict[int, int]:
        return self.ids.id_map

    @property
    def policy(self) -> UnknownIdPolicy:
        return self.ids.policy

    def passing_through(self) -> RecordRewriter:
        """The same rewrite with unknown ids left as they are (for digests, which must never raise)."""
        return RecordRewriter(SchemaIdRewriter(self.ids.id_map, "pass-through"), self.decisions)

    def decision(self, topic: str) -> FieldDecision:
        try:
            return self.decisions[topic]
        except KeyError:
            raise FieldsUndecided(
                f"topic {topic!r} has no registry-serialization decision (key/value): the schema migration has "
                "not seen it (created after migrate_schemas ran?); run migrate_schemas again, or add a "
                "schema_registry.serialized_fields rule for it") from None

    def for_topic(self, topic: str) -> tuple[Rewrite | None, Rewrite | None]:
        """(key rewrite, value rewrite) for the topic's records; None where the field is copied byte for byte."""
        d = self.decision(topic)
        rewrite = self.ids.rewrite
        return (rewrite if d.key else None), (rewrite if d.value else None)

    def rewrite(self, topic: str, key: bytes | None, value: bytes | None) -> tuple[bytes | None, bytes | None]:
        rewrite_key, rewrite_value = self.for_topic(topic)
        return (key if rewrite_key is None else rewrite_key(key)), (value if rewrite_value is None
                                                                     else rewrite_value(value))

    def fields_by_topic(self, topics: Iterable[str]) -> dict[str, str]:
        """`key`/`value`/`both`/`none` per topic, for a copy plan (raises FieldsUndecided for an unknown topic)."""
        return {t: self.decision(t).fields for t in sorted(set(topics))}
