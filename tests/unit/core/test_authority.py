"""Who may cut over (a tenant's promoters, checked against the run's triggering user) and the record of who did
(issue 42): decided in ``core.cutover.authority``, read from the tenants file by ``core.specs.tenants``."""

from __future__ import annotations

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from kafka_ferry.core.common.failures import retry_cannot_help
from kafka_ferry.core.common.state_records import ACT_KIND
from kafka_ferry.core.cutover.authority import (
    ACT_VERSION,
    AUTHORITY_MODES,
    DONE,
    RESET_PROMOTION,
    STARTED,
    Actor,
    NotAllowed,
    act_key,
    act_line,
    act_record,
    acts_newest_first,
    allowed_by,
    authority_problem,
    check_authority,
    finished,
)
from kafka_ferry.core.specs.spec_source import SpecError
from kafka_ferry.core.specs.tenants import Promoters, load_tenants
from kafka_ferry.core.specs.trigger_form import CATCH_UP, DRY_RUN, PROMOTE, PROMOTE_GROUPS, ROLLBACK, ROLLBACK_PLAN

PROMOTERS = Promoters(users=("alice",), roles=("acme-cutover",))


def problem(mode=PROMOTE, promoters=PROMOTERS, **actor):
    return authority_problem(mode, "acme-orders", "acme", promoters, Actor(**{"user": "bob", **actor}),
                             "tenants file /etc/t.yaml")


def test_a_listed_user_may_and_another_is_refused_naming_the_user_and_the_list():
    assert problem(user="alice") is None
    refused = problem(user="bob", roles=("viewer",))
    assert refused.startswith("promote of migration 'acme-orders' refused before any change: user 'bob'")
    assert "roles ['viewer']" in refused and "users ['alice']" in refused and "roles ['acme-cutover']" in refused
    assert "tenant 'acme'" in refused and "tenants file /etc/t.yaml" in refused


def test_a_user_with_a_listed_role_may():
    assert problem(user="carol", roles=("viewer", "acme-cutover")) is None
    assert allowed_by(PROMOTE, PROMOTERS, Actor("carol", roles=("acme-cutover",))) == "role 'acme-cutover' listed"
    assert allowed_by(PROMOTE, PROMOTERS, Actor("alice")) == "user 'alice' listed"


def test_roles_that_cannot_be_read_refuse_a_user_listed_only_by_role_and_say_why():
    refused = problem(user="carol", roles=None)
    assert "user 'carol' (its roles could not be read: no way to read them here; list the user by name" in refused
    why = "no Airflow connection 'kafka_ferry_auth_api' to the auth manager's API"
    named = problem(user="carol", roles=None, unread=why)
    assert named is not None and f"user 'carol' (its roles could not be read: {why}; list the user" in named
    unlooked = problem(promoters=Promoters(users=("alice",)), user="carol", roles=None)
    assert "user 'carol' is not one of tenant 'acme''s promoters (users ['alice'], no role," in unlooked


def test_without_a_list_anyone_may_as_before_but_a_run_no_person_triggered_never_may():
    assert problem(promoters=None, user="bob") is None
    assert problem(promoters=None, user=None) is None  # as before: a manual run without a recorded user
    for run_type in ("scheduled", "asset_triggered", "backfill", "operator_triggered"):
        refused = problem(promoters=None, user="alice", run_type=run_type)
        assert f"this is a {run_type} run, which no person triggered" in refused
        assert problem(user="alice", run_type=run_type) is not None  # a listed user's name changes nothing


def test_a_manual_run_without_a_user_is_refused_when_a_list_exists():
    assert "records no triggering user" in problem(user=None)


@pytest.mark.parametrize("mode", [CATCH_UP, DRY_RUN, ROLLBACK_PLAN])
def test_modes_that_change_no_cutover_need_no_authority(mode):
    assert problem(mode=mode, user="bob") is None
    assert problem(mode=mode, user=None, run_type="scheduled") is None  # a scheduled catch-up runs as ever


def test_every_cutover_mode_is_checked_and_an_empty_list_freezes():
    assert set(AUTHORITY_MODES) == {PROMOTE, PROMOTE_GROUPS, "promote-topics", ROLLBACK, RESET_PROMOTION}
    frozen = Promoters()
    for mode in AUTHORITY_MODES:
        assert problem(mode=mode, promoters=frozen, user="alice") is not None
        assert problem(mode=mode, user="alice") is None


def test_the_refusal_is_permanent():
    with pytest.raises(NotAllowed) as raised:
        check_authority(ROLLBACK, "acme-orders", "acme", PROMOTERS, Actor("bob", roles=()))
    assert retry_cannot_help(raised.value) and "rollback of migration 'acme-orders'" in str(raised.value)


@given(st.text(min_size=1, max_size=30), st.lists(st.text(min_size=1, max_size=10), max_size=4))
def test_only_a_listed_name_or_role_passes(user, roles):
    allowed = user in PROMOTERS.users or "acme-cutover" in roles
    assert (problem(user=user, roles=tuple(roles)) is None) == allowed


def test_the_act_record_is_declared_versioned_and_finished_in_place():
    record = act_record(PROMOTE_GROUPS, "acme-orders", Actor("alice", "manual", ("a",)), "acme-orders",
                        "manual__1", 1_000, groups=["g2", "g1"], allowed="user 'alice' listed")
    assert record["record_version"] == ACT_VERSION and record["status"] == STARTED
    assert record["groups"] == ["g1", "g2"] and record["confirmation"] == "acme-orders"
    key, value = ACT_KIND.encode(act_key(PROMOTE_GROUPS, "manual__1"), record, 5)
    assert key == b"act/promote-groups/manual__1" and value is not None
    assert b'"user":"alice"' in value.replace(b" ", b"")
    done = finished(record, 2_000)
    assert done["status"] == DONE and done["finished_at_ms"] == 2_000 and done["started_at_ms"] == 1_000
    line = act_line(done)
    assert line.startswith("promote-groups of groups g1, g2 by 'alice', confirmed 'acme-orders', run manual__1")
    assert "done 1970-01-01T00:00:02Z" in line
    later = act_record(ROLLBACK, "acme-orders", Actor("bob"), "acme-orders", "manual__2", 3_000)
    assert [r["run_id"] for r in acts_newest_first({"a": record, "b": later})] == ["manual__2", "manual__1"]


def test_the_tenants_file_reads_promoters_and_refuses_a_bad_name(tmp_path):
    path = tmp_path / "tenants.yaml"
    path.write_text(yaml.safe_dump({"tenants": {"acme": {"name_prefixes": ["acme-"], "promoters": {
        "users": ["alice"], "roles": ["acme-cutover"]}}, "globex": {"name_prefixes": ["globex-"]}}}))
    tenants = load_tenants(path)
    assert tenants.tenants["acme"].promoters == PROMOTERS
    assert tenants.tenants["globex"].promoters is None
    path.write_text(yaml.safe_dump({"tenants": {"acme": {"promoters": {"users": ["al\nice"]}}}}))
    with pytest.raises(SpecError, match="promoters"):
        load_tenants(path)
    path.write_text(yaml.safe_dump({"tenants": {"acme": {"promoters": {"user": ["alice"]}}}}))
    with pytest.raises(SpecError, match="user"):
        load_tenants(path)


def test_a_failed_act_keeps_why_and_a_retry_starts_it_again_keeping_the_last_failure():
    from kafka_ferry.core.cutover.authority import FAILED, MAX_ERROR, restarted

    record = act_record(ROLLBACK, "acme-orders", Actor("alice"), "acme-orders", "manual__1", 1_000)
    failed = finished(record, 2_000, FAILED, "RollbackRefused: " + "x" * 2 * MAX_ERROR)
    assert failed["status"] == FAILED and len(failed["error"]) == MAX_ERROR
    again = restarted(failed)
    assert again["status"] == STARTED and again["last_error"] == failed["error"]
    assert "error" not in again and "finished_at_ms" not in again and again["started_at_ms"] == 1_000
    assert act_line(failed).endswith("failed 1970-01-01T00:00:02Z")
