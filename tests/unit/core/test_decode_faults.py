"""Whose fault is a record that does not decode on the destination (core.schemas.decode_faults)."""

from __future__ import annotations

from types import SimpleNamespace

from hypothesis import given
from hypothesis import strategies as st

from kafka_ferry.core.common.failures import retry_cannot_help
from kafka_ferry.core.schemas.decode_faults import (
    MIGRATION_FAULT_FIELD,
    DecodeCheckFailed,
    FaultClassifier,
    MigrationFaultsFound,
    blocking,
    describe,
    skip_reason,
    verdict,
)
from kafka_ferry.core.schemas.schema_wire import schema_id_of, with_schema_id

BODY = b"\x02ok"


def source_knows(*ids):
    """The source registry's verdict: decoded for these ids, failed for others."""
    return lambda payload: SimpleNamespace(outcome="decoded" if schema_id_of(payload) in ids else "failed")


def test_remap_a_destination_id_is_traced_back_through_the_id_map():
    blame = FaultClassifier(source_knows(46), {46: 7})
    assert blame.source_id(with_schema_id(b"\0" * 5, 7) + BODY) == 46


def test_an_id_the_map_lacks_was_passed_through_and_is_its_own_source_id():
    blame = FaultClassifier(source_knows(46), {1: 2})
    assert blame.source_id(with_schema_id(b"\0" * 5, 46) + BODY) == 46


def test_preserve_ids_are_the_same_on_both_sides():
    assert FaultClassifier(source_knows(9)).source_id(with_schema_id(b"\0" * 5, 9) + BODY) == 9


@given(st.integers(0, 2**31 - 1), st.dictionaries(st.integers(0, 1000), st.integers(0, 1000), max_size=5))
def test_a_payload_the_source_cannot_decode_is_never_the_migrations_fault(schema_id, id_map):
    blame = FaultClassifier(source_knows(), id_map)
    assert blame.source_id(with_schema_id(b"\0" * 5, schema_id) + BODY) is None
    assert blame.source_id(b"plain") is None


def test_standing_faults_block_and_name_subject_version_and_offsets():
    fault = {"topic": "t", "partition": 1, "offsets": [3, 5], "field": "value", "schema_id": 46, "source_id": 46,
             "source_versions": [["t-value", 3, True]], "reason": "schema id 46 is not in the registry"}
    text = describe(fault)
    assert "t-1 offsets [3, 5]" in text and "subject 't-value' version 3 (soft-deleted on the source)" in text
    marks: dict[str, dict[str, object]] = {"t:1": {MIGRATION_FAULT_FIELD: text}, "t:0": {"checked_through": 9},
                                          "u:0": {}}
    assert blocking(marks) == [f"t:1: {text}"]


FAULT = {"records": 3, "description": "orders-0 offsets [4, 6]: the value carries schema id 7 on the destination"}


@given(st.lists(st.just(FAULT), max_size=7), st.integers(0, 50), st.sampled_from(["off", "report", "enforce"]))
def test_the_verdict_blocks_on_migration_faults_always_and_on_failures_only_when_enforced(faults, failed, policy):
    failure = verdict(faults, failed, "orders-0@5: unknown id 9", policy)
    if faults:  # the migration damaged them: whatever decode_check says
        assert isinstance(failure, MigrationFaultsFound) and retry_cannot_help(failure)
        assert str(failure).startswith(f"{3 * len(faults)} copied record(s) decode against the source registry")
        assert str(failure).count("offsets [4, 6]") == min(len(faults), 5)  # the first five named
    elif failed and policy == "enforce":
        assert isinstance(failure, DecodeCheckFailed) and retry_cannot_help(failure)
        assert str(failure) == (f"{failed} record(s) copied to the destination do not decode against its registry: "
                                "orders-0@5: unknown id 9")
    else:
        assert failure is None


def test_the_check_is_skipped_when_off_in_a_dry_run_or_once_promoted_asking_the_state_last():
    asked = []

    def status(value):
        def ask():
            asked.append(value)
            return value
        return ask

    assert skip_reason(None, False, status(None)) == "decode_check is off"
    assert skip_reason("off", False, status(None)) == "decode_check is off"
    assert skip_reason("enforce", True, status(None)) == "dry run"
    assert asked == []  # the state topic is read only when nothing else skips the check
    assert skip_reason("report", False, status({"status": "promoted"})) == "promoted"
    assert skip_reason("report", False, status({"status": "copying"})) is None
    assert skip_reason("enforce", False, status(None)) is None
    assert len(asked) == 3
