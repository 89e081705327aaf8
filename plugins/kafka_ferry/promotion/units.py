"""The migration's coupled units (``core.units.coupling``): found on the source, declared in the spec, checked before a
staged step.

Where they come from: the spec's ``coupling.units``, and (``coupling.discover_transactions``, on by default) the
topics the source's ``__transaction_state`` shows written by one transactional.id. A unit is kept only when it
touches the migration (a declared unit naming nothing the migration moves says nothing about it). The pre-flight
shows them (its XCom and so ``kafka-ferry dry-run --json``), and ``promote-topics`` / ``promote-groups`` refuse, in
the pre-flight and again in their task, a step that would split one the spec does not accept splitting.
Kafka Streams applications (``provision.streams_apps``: named in the spec or detected) are units too: the callers
read them and hand them in.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field

from kafka_ferry.core.specs.spec import MigrationSpec
from kafka_ferry.core.units.coupling import CoupledUnit, UnitSplit, check_unit_splits, transaction_units, writers_beyond
from kafka_ferry.core.units.streams_apps import StreamsApplication
from kafka_ferry.core.units.transaction_log import TRANSACTION_STATE_TOPIC
from kafka_ferry.kafka.transaction_log import read_transaction_state

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class MigrationUnits:
    """The units of a migration and where they came from (``transaction_log``: one line on what the log said)."""

    units: tuple[CoupledUnit, ...]
    transaction_log: str
    log_read: bool = False
    notes: tuple[str, ...] = field(default=())

    def lines(self) -> list[str]:
        """What the pre-flight logs and the CLI prints, one line each."""
        out = [f"transaction log {self.transaction_log}"]
        out += [f"coupled unit {u.name} ({u.reason}): " + ", ".join(
            [f"topic {t}" for t in sorted(u.topics)] + [f"group {g}" for g in sorted(u.groups)])
            for u in self.units]
        return out + list(self.notes)

    def as_dict(self) -> dict:
        return {"transaction_log": self.transaction_log, "transaction_log_read": self.log_read,
                "units": [u.as_dict() for u in self.units], "notes": list(self.notes)}


def migration_units(spec: MigrationSpec, source, selected_topics: Iterable[str],
                    migrated_groups: Iterable[str] = (),
                    applications: Iterable[StreamsApplication] = ()) -> MigrationUnits:
    """Every unit touching the migration's topics (source names) or groups, declared first, then discovered.
    ``applications``: the source's Kafka Streams applications (``provision.streams_apps.source_applications``,
    read by the caller), each a unit."""
    topics, groups = set(selected_topics), set(migrated_groups)
    units: list[CoupledUnit] = []
    notes: list[str] = []
    for unit in spec.coupling.declared_units():
        if unit.topics & topics or unit.groups & groups:
            units.append(unit)
            missing = sorted(unit.topics - topics) + sorted(unit.groups - groups)
            if missing:
                notes.append(f"unit {unit.name}: {', '.join(missing[:5])} not part of this migration (the unit "
                             "can only move whole if the spec selects them too)")
        else:
            notes.append(f"unit {unit.name} (coupling.units) names nothing this migration moves: ignored")
    # Kafka Streams applications (named in the spec or detected from their topics' names): each one unit
    for app in applications:
        unit = app.unit()
        if unit.topics & topics or unit.groups & groups:
            units.append(unit)
    log_read = False
    if not spec.coupling.discover_transactions:
        said = "not read (coupling.discover_transactions: false); only the units the spec declares count"
    else:
        answer = read_transaction_state(source)
        if answer.reading is None:
            said = (f"{TRANSACTION_STATE_TOPIC} could not be read, so topics written in the same transactions are "
                    f"not known: {answer.refused}. Declare them in the spec (coupling.units) or grant the "
                    f"principal DESCRIBE and READ on topic {TRANSACTION_STATE_TOPIC}")
        else:
            reading, log_read = answer.reading, True
            found = transaction_units(reading.writes, topics)
            units += found
            said = (f"{TRANSACTION_STATE_TOPIC} read: {reading.records} record(s), {len(reading.writes)} "
                    f"transactional id(s) with topics, {len(found)} unit(s) among this migration's topics")
            for tid, others in writers_beyond(reading.writes, topics).items():
                notes.append(f"transactional.id {tid} also writes {', '.join(others[:5])}"
                             f"{f' and {len(others) - 5} more' if len(others) > 5 else ''}, which this migration "
                             "does not move: its transactions will span both clusters once its producer moves")
            if reading.undecodable:
                said += (f"; {reading.undecodable} record(s) of an unknown format skipped (first: "
                         f"{reading.first_problem})")
    return MigrationUnits(tuple(units), said, log_read, tuple(notes))


def check_staged_units(spec: MigrationSpec, units: MigrationUnits, step: str, topics: Iterable[str] = (),
                       groups: Iterable[str] = (), promoted_topics: Iterable[str] = (),
                       promoted_groups: Iterable[str] = ()) -> list[UnitSplit]:
    """Refuse a staged step that splits a unit the spec does not accept splitting (``UnitSplitRefused``, one try,
    before any change); log the accepted splits it lets through."""
    accepted = check_unit_splits(units.units, topics, groups, promoted_topics, promoted_groups,
                                 accepted=spec.coupling.accept_split, step=step)
    for split in accepted:
        log.warning("%s splits %s: accepted by the spec (coupling.accept_split)", step, split.describe())
    return accepted
