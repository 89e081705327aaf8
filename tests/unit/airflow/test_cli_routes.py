"""The `kafka-ferry` commands of every trigger-form mode: the conf each sends (the form's fields, the mode's own filled
in, checked by the same trigger check as the form), the rollback plan printed from the task's return value, and the
lines a run's watcher and `status` print."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from kafka_ferry.cli import CONFIRMED, MODES, parser, run_conf
from kafka_ferry.cli.progress import RunWatcher, task_line, wait_lines
from kafka_ferry.cli.summary import rollback_lines
from kafka_ferry.core.specs.trigger_form import MODES as FORM_MODES
from kafka_ferry.core.specs.trigger_form import check_trigger
from kafka_ferry.dag_promotion import trigger_params

FORM_FIELDS = set(trigger_params("shop"))


def conf_of(*argv: str, confirmed: str | None = "shop") -> dict:
    args = parser().parse_args(list(argv))
    return run_conf(args, confirmed if args.command in CONFIRMED else None)


def test_every_mode_of_the_form_has_a_command():
    assert set(MODES.values()) == set(FORM_MODES)


@pytest.mark.parametrize(("argv", "mode", "fields"), [
    (("run", "s.yaml"), "catch-up", {}),
    (("dry-run", "s.yaml"), "dry-run", {}),
    (("promote", "s.yaml", "--allow-rewind"), "promote", {"allow_rewind": True}),
    (("promote-groups", "s.yaml", "billing", "audit"), "promote-groups", {"groups": ["billing", "audit"]}),
    (("promote-groups", "s.yaml", "billing", "--allow-rewind"), "promote-groups",
     {"groups": ["billing"], "allow_rewind": True}),
    (("promote-topics", "s.yaml", "orders", "--waive-groups", "audit"), "promote-topics",
     {"topics": ["orders"], "waive_groups": ["audit"]}),
    (("rollback", "s.yaml"), "rollback", {}),
    (("rollback", "s.yaml", "--groups", "billing", "--topics", "orders"), "rollback",
     {"groups": ["billing"], "topics": ["orders"]}),
    (("rollback-plan", "s.yaml", "--topics", "orders"), "rollback-plan", {"topics": ["orders"]}),
])
def test_each_command_sends_the_forms_fields_and_passes_the_forms_check(argv, mode, fields):
    conf = conf_of(*argv)
    assert set(conf) == FORM_FIELDS  # exactly the form's fields: none unknown, none left out
    assert conf["mode"] == mode
    assert {k: v for k, v in conf.items() if v not in ([], None, False) and k not in ("mode", "confirm_migration")} \
        == fields
    assert conf["confirm_migration"] == ("shop" if mode in ("promote", "promote-groups", "promote-topics", "rollback")
                                         else None)
    assert check_trigger("shop", conf, conf, FORM_FIELDS) == mode


def test_a_promotion_of_groups_needs_a_name_and_reset_takes_the_give_up_flag():
    with pytest.raises(SystemExit):
        parser().parse_args(["promote-groups", "s.yaml"])
    assert parser().parse_args(["reset-promotion", "s.yaml", "--give-up-rollback"]).give_up_rollback
    assert not parser().parse_args(["reset-promotion", "s.yaml"]).give_up_rollback


PLAN = {"migration": "shop", "records": 3, "copy_back": [
    {"destination_topic": "orders", "partition": 0, "start": 10, "end": 13, "records": 3, "reason": "after cutover"}],
    "groups": {"billing": [{"source_topic": "orders", "partition": 0, "destination_topic": "orders",
                            "destination_offset": 12, "source_offset": 22, "method": "copied-back-record",
                            "reason": "r"}]},
    "schema_ids": {"unmapped_ids": [{"schema_id": 7, "subject_versions": ["x-value/2"], "records": 1}]},
    "acls": {"needed": ["source: ALLOW WRITE on TOPIC 'orders'"], "missing": ["source: ALLOW WRITE on TOPIC 'orders'"]}}


def test_the_rollback_plan_is_printed_in_readable_lines():
    assert rollback_lines(PLAN) == [
        "rollback plan: 3 record(s) to copy back to the source",
        "  copy back orders-0 [10, 13): 3 record(s); after cutover",
        "  group billing resumes on the source at orders-0@22 (destination orders-0@12; copied-back-record)",
        "  REFUSED: destination schema id 7 (['x-value/2']): 1 record(s) the forward map never knew",
        "  needs source: ALLOW WRITE on TOPIC 'orders'",
        "  missing now (grant before the rollback): source: ALLOW WRITE on TOPIC 'orders'"]
    done = rollback_lines({"status": "rolled-back", "report_path": "/w/rollback-report.json",
                           "this_run": {"quiesce": {"status": "done", "duration_s": 1.5}, "copy_back": {
                               "status": "resumed"}}})
    assert done == ["rollback: rolled-back", "  step quiesce: done in 1.5 s", "  step copy_back: resumed",
                    "  report: /w/rollback-report.json"]
    assert rollback_lines(None) == []


SINCE = datetime(2026, 11, 26, 22, 0, 5, tzinfo=UTC)


def test_a_waiting_task_says_what_it_waits_for_and_a_failed_one_since_when():
    assert task_line("group_offsets_synced", "up_for_reschedule", SINCE) == (
        "group_offsets_synced: waiting (rescheduled) since 2026-11-26T22:00:05Z; waits for the destination groups' "
        "committed offsets to equal the final translation")
    assert task_line("preflight", "failed", SINCE, 2) == "preflight: FAILED since 2026-11-26T22:00:05Z, try 2"


def test_the_watcher_says_each_change_of_an_active_task_once():
    said: list[str] = []
    watcher = RunWatcher("d", say=said.append)
    running = {"task_id": "source_quiesced", "state": "deferred", "since": SINCE, "try": 1}
    watcher.report([running, {"task_id": "preflight", "state": "success", "since": SINCE, "try": 1}])
    watcher.report([running])
    watcher.report([{**running, "state": "success"}, {**running, "task_id": "promote_final_copy",
                                                      "state": "running"}])
    assert [line.split(" since")[0] for line in said] == ["  ... source_quiesced: waiting (deferred)",
                                                          "  ... promote_final_copy: running"]


def test_a_half_finished_promotion_names_its_next_step():
    records = {"step/final_copy": {"status": "done", "finished_at_ms": 1_795_000_000_000},
               "step/final_translation": {"status": "done", "finished_at_ms": 1_795_000_060_000}}
    assert wait_lines(records, ("final_copy", "final_translation", "commit_offsets"), "promotion") == [
        "promotion half-finished: steps done final_copy, final_translation (last at 2026-11-18T11:07:40Z); "
        "next: commit_offsets"]
    assert wait_lines({}, ("final_copy",), "promotion") == []


@pytest.mark.parametrize("command", [*MODES, "reset-promotion"])
def test_every_command_that_acts_runs_as_the_user_it_is_told_and_else_as_the_os_user(command, monkeypatch):
    """``--as`` is who the run is triggered by (the pre-flight checks it against the tenant's promoters, issue 42)."""
    from kafka_ferry.cli import UsageError, user

    extra = ["g"] if command in ("promote-groups", "promote-topics") else []
    assert user(parser().parse_args([command, "s.yaml", *extra, "--as", "alice"])) == "alice"
    monkeypatch.setenv("LOGNAME", "os-user")  # the first place getpass.getuser looks for the OS user
    assert user(parser().parse_args([command, "s.yaml", *extra])) == "os-user"
    for bad in ("", "  ", "al\nice", "x" * 513):
        with pytest.raises(UsageError, match="an Airflow user name is 1-512 printable characters"):
            user(parser().parse_args([command, "s.yaml", *extra, "--as", bad]))


@pytest.mark.parametrize("command", ["check", "status", "acls"])
def test_commands_that_only_read_take_no_user(command):
    with pytest.raises(SystemExit):
        parser().parse_args([command, "s.yaml", "--as", "alice"])
