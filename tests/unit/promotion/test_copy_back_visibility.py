"""After a rollback, later runs read the copy-back's progress and syncs on the source (``state.rollback``,
``translation.translate.copied_back``). A missing DESCRIBE hides a topic, which looked like "no rollback ran" and
let groups resume past copied-back records; where the destination records a copy-back that copied, a hidden or
empty source topic now fails once, naming the topic and the ACL. The clusters are the in-memory ones of ``tests/fakes``
(their authorizer hides a topic the principal may not describe, as the brokers' metadata does)."""

from __future__ import annotations

import pytest
from fakes.cluster import FakeCluster
from fakes.state import FakeStateStore

from kafka_ferry.core.acls.acl_plan import AclEntry
from kafka_ferry.core.batches.progress import PartitionProgress
from kafka_ferry.core.common.failures import retry_cannot_help
from kafka_ferry.core.common.state_records import ROLLBACK_KIND
from kafka_ferry.core.specs.spec import parse_spec
from kafka_ferry.state import rollback as rb
from kafka_ferry.state.progress import save_progress
from kafka_ferry.translation import translate

STATE, SYNCS = "kafka-ferry.m1.state.rollback", "mm2-offset-syncs.a.internal"  # the spec's copy-back topics
PRINCIPAL = "User:ferry-src"


def spec():
    return parse_spec({"name": "m1", "tenant": "t", "source": {"connection_id": "src", "alias": "a"},
                       "destination": {"connection_id": "dst", "alias": "b"}, "topics": {"include": ["orders.*"]}})


def source(visible=(), progress=()) -> FakeCluster:
    """The source as the migration's SASL principal sees it: the copy-back topics exist (``progress`` written to the
    copy-back's state topic), and the principal may describe and read only ``visible`` ones (the others hidden)."""
    admin = FakeCluster("source")
    for topic in (STATE, SYNCS):
        admin.create_topic(topic, 1, 1, {})
    save_progress(rb.copy_back_store(spec(), admin), progress)
    admin.grant(*(AclEntry(PRINCIPAL, "TOPIC", t, op) for t in visible for op in ("DESCRIBE", "READ")))
    return admin.as_principal(PRINCIPAL)


def store(records=None) -> FakeStateStore:
    """The destination's state topic holding ``rollback`` records only."""
    s = FakeStateStore(topic="kafka-ferry.m1.state").created()
    s.put_many(ROLLBACK_KIND, records or {})
    return s


def whole(partitions, records_copied, status="done"):
    return {"step/copy_back": {"status": status, "promoted_at_ms": 1,
                               "summary": {"partitions": partitions, "records_copied": records_copied}}}


def staged(partitions, records_copied):
    return {"topic/orders.a": {"status": "rolled-back", "promoted_at_ms": 1, "steps": {"copy_back": {
        "summary": {"partitions": partitions, "records_copied": records_copied}}}}}


@pytest.mark.parametrize("records", [whole(2, 5), staged(1, 3)], ids=["whole", "staged-topic"])
@pytest.mark.parametrize("visible", [(), (STATE,)], ids=["hidden", "empty"])
def test_a_recorded_copy_back_whose_progress_the_source_does_not_show_fails_once_naming_topic_and_acl(records,
                                                                                                      visible):
    with pytest.raises(rb.CopyBackNotVisible) as failure:
        rb.copy_back_progress(spec(), source(visible), store(records))
    message = str(failure.value)
    assert retry_cannot_help(failure.value)  # no retry grants an ACL
    assert f"source topic '{STATE}'" in message and "kafka-ferry.m1.state records" in message
    assert f"grant ALLOW DESCRIBE on TOPIC '{STATE}' for {PRINCIPAL}" in message
    assert f"grant ALLOW READ on TOPIC '{STATE}' for {PRINCIPAL}" in message


@pytest.mark.parametrize("records", [{}, whole(0, 0), whole(2, 5, status="in-progress"), staged(0, 0)],
                         ids=["no-rollback", "nothing-to-copy", "step-not-done", "staged-nothing-to-copy"])
def test_without_a_recorded_copy_back_that_copied_an_absent_topic_means_none_ran(records):
    """A copy-back with nothing to copy creates no topic, and one killed before its step was recorded resumes by
    itself: neither is a hidden topic."""
    assert rb.copy_back_progress(spec(), source(), store(records)) == {}


def test_syncs_the_source_does_not_show_fail_once_when_the_recorded_copy_back_copied_records():
    progress = [PartitionProgress("orders.a", 0, "orders.a", 7, 6, 16, 3)]
    visible_progress = source([STATE], progress)  # progress visible, syncs hidden
    with pytest.raises(rb.CopyBackNotVisible) as failure:
        translate.copied_back(spec(), visible_progress, store(whole(1, 3)))
    assert f"source topic '{SYNCS}'" in str(failure.value) and "offset syncs" in str(failure.value)
    assert f"grant ALLOW DESCRIBE on TOPIC '{SYNCS}' for {PRINCIPAL}" in str(failure.value)
    # every record skipped as a forward copy: no sync to expect, the progress alone stands
    back = translate.copied_back(spec(), visible_progress, store(whole(1, 0)))
    assert list(back) == [("orders.a", 0)] and back[("orders.a", 0)].offset_map.syncs[-1] == (6, 16)


def test_a_translation_that_read_the_state_already_decides_from_it_without_reading_again():
    """``translate_migration`` passes its snapshot: each catch-up batch reads the destination's state once."""
    unread = store()
    before = unread.fake.calls["consumers"]
    with pytest.raises(rb.CopyBackNotVisible):
        translate.copied_back(spec(), source(), unread, {ROLLBACK_KIND: whole(1, 1)})
    assert translate.copied_back(spec(), source(), unread, {}) == {}
    assert unread.fake.calls["consumers"] == before  # the state topic was not read again
