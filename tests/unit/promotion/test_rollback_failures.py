"""Which rollback failures a retry can heal: a destination still in use or a group still consuming on the source may
be gone on the next try (retryable); a refusal by the rules, contradicting sync logs or a copy-back that differs
are the same on every try (Permanent, the task fails once with the message naming object and cause)."""

from __future__ import annotations

import pytest

from kafka_ferry.core.common.failures import retry_cannot_help
from kafka_ferry.core.cutover.rollback_plan import RollbackPlanError, resume_on_source
from kafka_ferry.core.cutover.staged_cutover import StagedCutoverError, validate_selection
from kafka_ferry.promotion.rollback import DestinationNotQuiet, RollbackMismatch, RollbackRefused, SourceGroupBusy
from kafka_ferry.promotion.rollback_rights import RollbackAclsMissing


@pytest.mark.parametrize("exc", [DestinationNotQuiet("group g has 1 member(s) on the destination"),
                                 SourceGroupBusy("group g has 1 member(s) on the source")])
def test_what_a_later_try_can_heal_is_retried(exc):
    assert not retry_cannot_help(exc)


@pytest.mark.parametrize("exc", [RollbackRefused("topic t is not promoted"),
                                 RollbackMismatch("t-0: 3 records after the cutover vs 2 copied back"),
                                 RollbackAclsMissing("grant ALLOW WRITE on TOPIC 't' for User:s"),
                                 StagedCutoverError("topics ['x'] are not part of this migration")])
def test_what_no_retry_heals_is_permanent(exc):
    assert retry_cannot_help(exc)


def test_an_unknown_topic_and_contradicting_logs_fail_once_naming_the_cause():
    with pytest.raises(StagedCutoverError, match=r"topics \['orders.x'\] are not part of this migration") as err:
        validate_selection("topics", ["orders.x"], ["orders.a"])
    assert retry_cannot_help(err.value)
    with pytest.raises(RollbackPlanError, match="offset 5 is claimed by both sync logs") as contradicted:
        resume_on_source([(0, 5)], [(5, 9)], 5, 10)
    assert retry_cannot_help(contradicted.value)


def test_the_refusal_docstring_lists_no_retryable_case():
    assert RollbackRefused.__doc__ is not None
    doc = RollbackRefused.__doc__.lower()
    assert "still consuming" not in doc and "no retry" in doc
