"""The designed outcome of every mode in every state (core.cutover.routes): complete, walkable, and the manual's table
is it."""

from __future__ import annotations

from pathlib import Path

import pytest

from kafka_ferry.core.cutover import routes
from kafka_ferry.core.specs.trigger_form import CONFIRM_FIELD, MODES, check_trigger

OPERATIONS = Path(__file__).resolve().parents[3] / "docs" / "operations.md"


def test_the_committed_table_is_not_stale(capsys):
    """Fails when core/cutover/routes.py changed and the table was not regenerated:
    python -m kafka_ferry.core.cutover.routes write docs/operations.md (make routes-table)."""
    assert routes.main(["check", str(OPERATIONS)]) == 0, capsys.readouterr().out


def test_a_changed_outcome_makes_the_check_fail(tmp_path, monkeypatch, capsys):
    page = tmp_path / "operations.md"
    page.write_text(OPERATIONS.read_text())
    monkeypatch.setitem(routes.ROUTES[routes.NEW], routes.DRY_RUN, routes.Outcome(routes.NO_OP, note="changed"))
    assert routes.main(["check", str(page)]) == 1
    assert "make routes-table" in capsys.readouterr().out
    assert routes.main(["write", str(page)]) == 0 and routes.main(["check", str(page)]) == 0
    assert "no-op" in page.read_text().split(routes.BEGIN)[1]


def test_every_state_has_one_outcome_per_mode_of_the_form_and_the_walk_covers_them():
    assert routes.validate() == []
    assert len(routes.cells()) == len(routes.STATES) * len(MODES) == 56
    assert set(routes.STATE_MEANINGS) == set(routes.STATES)


def test_every_cell_has_a_row_in_the_table():
    table = routes.render_table()
    rows = [line for line in table.splitlines() if line.startswith("| *")]
    assert [r.split("|")[1].strip() for r in rows] == [f"*{s}*" for s in routes.STATES]
    assert all(len(r.strip("|").split("|")) == 1 + len(MODES) for r in rows)
    for state, mode, outcome in routes.cells():
        assert f"- `{mode}` in *{state}* ({outcome.kind}): " in table


def test_the_issues_cells():
    """Issue 35: a rollback after a whole promotion works; a run that cannot go on says how to go back, never only to
    reset the promotion; reset-promotion is no mode of the form."""
    for promoted in (routes.PROMOTED, routes.PROMOTED_AGAIN):
        assert routes.outcome(promoted, routes.ROLLBACK).kind == routes.WORKS
        assert routes.outcome(promoted, routes.ROLLBACK_PLAN).kind == routes.PLAN
        for mode in (routes.CATCH_UP, routes.PROMOTE, routes.PROMOTE_GROUPS, routes.PROMOTE_TOPICS, routes.DRY_RUN):
            o = routes.outcome(promoted, mode)
            assert o.kind == routes.REFUSED and "rollback" in o.way_out, (promoted, mode)
    assert "reset-promotion" not in MODES


def test_a_refusal_needs_its_task_reason_and_way_out_and_a_working_cell_its_next_state():
    with pytest.raises(ValueError, match="task, why and way out"):
        routes.Outcome(routes.REFUSED, task="preflight", why="promoted")
    with pytest.raises(ValueError, match="state to go to"):
        routes.Outcome(routes.WORKS, changes="copies", to="somewhere")
    with pytest.raises(ValueError, match="outcome kind"):
        routes.Outcome("maybe")
    with pytest.raises(KeyError, match="state 'gone'"):
        routes.outcome("gone", routes.CATCH_UP)
    with pytest.raises(KeyError, match="mode 'reset-promotion'"):
        routes.outcome(routes.NEW, "reset-promotion")


def test_validate_names_a_broken_walk_and_an_unaccounted_change(monkeypatch):
    broken = {s: dict(cells) for s, cells in routes.ROUTES.items()}
    broken[routes.CAUGHT_UP][routes.PROMOTE_TOPICS] = routes.works("moves the topic", routes.TOPICS_STAGED)
    broken[routes.PROMOTED][routes.ROLLBACK] = routes.Outcome(routes.NO_OP, note="nothing")
    problems = routes.validate(broken)
    assert "'promote-topics' in 'caught up' changes the migration but is neither on the chain nor in OFF_CHAIN" \
        in problems
    assert "chain step 'rollback' in 'promoted' is no 'works' cell" in problems
    del broken[routes.NEW][routes.DRY_RUN]
    assert "state 'new': no cell for mode 'dry-run'" in routes.validate(broken)


@pytest.mark.parametrize("mode", MODES)
def test_the_conf_of_each_cell_is_one_the_pre_flight_accepts(mode):
    conf = routes.conf(mode, "orders", "orders-g", "orders.t")
    params = {"mode": routes.CATCH_UP, CONFIRM_FIELD: None, "allow_rewind": False, "groups": [], "topics": [],
              "waive_groups": [], **conf}
    assert check_trigger("orders", params, conf.keys(), params.keys()) == mode


def test_message_fragments_name_the_forms_group_and_topic():
    o = routes.outcome(routes.CAUGHT_UP, routes.PROMOTE_TOPICS)
    assert o.message_fragments("m-ga", "m.a") == ("read by unpromoted group(s) m-ga", "Promote those groups first")


def test_a_page_without_the_markers_is_refused_naming_them(tmp_path):
    page = tmp_path / "operations.md"
    page.write_text("# Operations\n")
    with pytest.raises(ValueError, match="BEGIN route matrix"):
        routes.main(["write", str(page)])


def test_a_destination_group_ahead_stops_the_promote_modes_in_the_pre_flight_naming_the_rewind():
    table = routes.render_table()
    assert set(routes.GROUP_AHEAD) == {routes.PROMOTE, routes.PROMOTE_GROUPS}
    assert routes.outcome(routes.AHEAD_STATE, routes.PROMOTE).kind == routes.WORKS  # without the group ahead
    for mode, o in routes.GROUP_AHEAD.items():
        assert (o.kind, o.task) == (routes.REFUSED, "preflight")
        assert f"kafka-ferry {mode} --allow-rewind" in o.way_out and "reset-promotion" not in o.way_out
        assert f"- `{mode}` naming a group that is ahead (refused): fails in one try of `preflight`" in table
