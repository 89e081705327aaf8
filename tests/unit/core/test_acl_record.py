"""The ACL migration's record (``core.acls.acl_record``): what a run created, found present and refused; written only
when it adds something, merged within one run's retries, and shown in the evidence bundle."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from kafka_ferry.core.acls.acl_migration import Refusal
from kafka_ferry.core.acls.acl_plan import AclEntry
from kafka_ferry.core.acls.acl_record import ENTRY_FIELDS, bundle_view, entry_of, entry_row, newest, run_record
from kafka_ferry.core.common.state_records import ACL_MIGRATION_KIND

READ = AclEntry("User:app", "TOPIC", "dst.orders", "READ")
DENY = AclEntry("User:app", "TOPIC", "dst.pay", "READ", permission="DENY")
WIDER = Refusal(AclEntry("User:merged", "TOPIC", "dst.orders", "READ"), "source principal User:b may not")


def test_an_entry_row_names_its_seven_fields_and_reads_back():
    assert entry_row(DENY) == {"resource_type": "TOPIC", "resource_name": "dst.pay", "pattern_type": "LITERAL",
                               "principal": "User:app", "host": "*", "operation": "READ", "permission": "DENY"}
    assert tuple(sorted(entry_row(DENY))) == tuple(sorted(ENTRY_FIELDS))
    assert entry_of(entry_row(DENY)) == DENY


def test_a_first_run_records_what_it_created_sorted_with_the_present_count_and_refusals():
    record = run_record("r1", [READ, DENY], 3, [WIDER], 10, {})
    assert record == {"run_id": "r1", "recorded_at_ms": 10, "created": [entry_row(READ), entry_row(DENY)],
                      "present": 3, "refused": [{"entry": entry_row(WIDER.entry), "reason": WIDER.reason}]}
    assert all(field in record for field in ACL_MIGRATION_KIND.fields)  # the kind's declaration holds


def test_the_records_literal_bytes():
    record = run_record("r1", [READ], 0, [], 10, {})
    assert record is not None
    key, value = ACL_MIGRATION_KIND.encode("r1", record, written_at_ms=11)
    assert key == b"acl-migration/r1"
    assert value == (b'{"created": [{"host": "*", "operation": "READ", "pattern_type": "LITERAL", "permission": '
                     b'"ALLOW", "principal": "User:app", "resource_name": "dst.orders", "resource_type": "TOPIC"}], '
                     b'"present": 0, "recorded_at_ms": 10, "refused": [], "run_id": "r1", "written_at_ms": 11}')


def test_a_run_that_created_and_refused_nothing_new_writes_nothing():
    assert run_record("r1", [], 5, [], 10, {}) is None  # nothing ever recorded, nothing to say
    first = run_record("r1", [READ], 0, [WIDER], 10, {})
    assert first is not None
    assert run_record("r2", [], 1, [WIDER], 20, {"r1": first}) is None  # the same refusals: no noise
    assert run_record("r1", [], 1, [WIDER], 20, {"r1": first}) is None  # a retry of the same run, likewise


def test_another_set_of_refusals_is_recorded_even_without_a_create():
    first = run_record("r1", [READ], 0, [WIDER], 10, {})
    assert first is not None
    cleared = run_record("r2", [], 1, [], 20, {"r1": first})
    assert cleared == {"run_id": "r2", "recorded_at_ms": 20, "created": [], "present": 1, "refused": []}


def test_a_retry_of_the_same_run_keeps_what_an_earlier_try_created():
    first = run_record("r1", [READ], 0, [], 10, {})
    assert first is not None
    again = run_record("r1", [DENY], 1, [], 20, {"r1": first})
    assert again is not None and [entry_of(row) for row in again["created"]] == [READ, DENY]


def test_the_newest_record_is_by_time_then_run_id():
    assert newest({}) is None
    records = {"b": {"recorded_at_ms": 5}, "a": {"recorded_at_ms": 9}, "c": {"recorded_at_ms": 9}}
    assert newest(records) is records["c"]


def test_the_bundle_view_lists_every_created_entry_with_its_run_and_the_newest_present_and_refused():
    first = run_record("r1", [DENY], 0, [WIDER], 10, {})
    assert first is not None
    second = run_record("r2", [READ], 1, [], 20, {"r1": first})
    assert second is not None
    view = bundle_view({"r2": second, "r1": first})
    assert view["created"] == [{**entry_row(READ), "run_id": "r2"}, {**entry_row(DENY), "run_id": "r1"}]
    assert (view["present"], view["refused"]) == (1, [])
    assert [r["run_id"] for r in view["runs"]] == ["r1", "r2"]
    assert bundle_view({}) == {"created": [], "present": 0, "refused": [], "runs": []}


entries = st.builds(AclEntry, st.sampled_from(["User:a", "User:b", "User:*"]), st.sampled_from(["TOPIC", "GROUP"]),
                    st.sampled_from(["x", "y"]), st.sampled_from(["READ", "WRITE", "DESCRIBE"]),
                    st.sampled_from(["ALLOW", "DENY"]))
refusals = st.builds(Refusal, entries, st.sampled_from(["wider", "other"]))


@given(st.lists(st.tuples(st.lists(entries, max_size=4), st.lists(refusals, max_size=3)), min_size=1, max_size=6))
def test_repeating_any_run_adds_no_record_and_the_bundle_lists_each_created_entry(runs):
    records: dict[str, dict] = {}
    for i, (created, refused) in enumerate(runs):
        record = run_record(f"r{i}", created, 0, refused, i, records)
        if record is not None:
            records[record["run_id"]] = record
        # the same run again, creating nothing (its entries are present now): nothing to add
        assert run_record(f"r{i}-again", [], len(created), refused, i, records) is None
    view = bundle_view(records)
    assert {entry_of(row) for row in view["created"]} == {e for created, _ in runs for e in created}
