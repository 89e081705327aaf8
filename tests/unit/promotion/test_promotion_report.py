"""The promotion report and page for people: steps in the order they ran, the whole run's seconds, 'unchanged'."""

from __future__ import annotations

from kafka_ferry.core.common.state_records import STEP_PREFIX
from kafka_ferry.core.specs.spec import parse_spec
from kafka_ferry.promotion.promotion_report import build_report
from kafka_ferry.reports.render import promotion_page

SPEC = parse_spec({"name": "orders", "tenant": "acme", "source": {"connection_id": "a", "alias": "a"},
                   "destination": {"connection_id": "b", "alias": "b"}, "topics": {"include": ["orders\\..*"]}})
T0 = 1_795_596_600_000
# each step ran in its own task; the last task (mark_promoted) took 0.2 s of a promotion of 12.5 s
STEPS = {"final_copy": (T0 + 4_000, 4.0), "final_translation": (T0 + 6_000, 2.0), "commit_offsets": (T0 + 7_000, 1.0),
         "reconcile": (T0 + 12_000, 4.5), "switch_timestamps": (T0 + 12_300, 0.3), "mark_promoted": (T0 + 12_500, 0.2)}


def report() -> dict:
    state = {STEP_PREFIX + name: {"status": "done", "finished_at_ms": at, "duration_s": s}
             for name, (at, s) in sorted(STEPS.items())}  # the state topic hands them back by key
    timestamps = {"orders.events": {"destination_topic": "orders.events", "status": "switched", "at_promotion": {}},
                  "orders.audit": {"destination_topic": "orders.audit", "status": "switched",
                                   "at_promotion": {"message.timestamp.type": "LogAppendTime"}}}
    return build_report(SPEC, state, {}, None, 0.2, timestamps)


def test_steps_come_in_the_order_they_ran_with_the_whole_runs_seconds():
    built = report()
    assert list(built["steps"]) == list(STEPS)  # not alphabetical (commit_offsets, final_copy, ...)
    assert built["total_s"] == 12.5 and built["duration_s"] == 0.2


def test_a_mirror_whose_promotion_set_nothing_reads_unchanged():
    built = report()
    assert built["timestamps"]["orders.events"]["status"] == "unchanged"
    assert built["timestamps"]["orders.audit"]["status"] == "switched"


def test_the_page_lists_steps_in_run_order_with_seconds_and_the_total():
    html = promotion_page(report(), [])
    positions = [html.index(f'<td class="l">{name}</td>') for name in STEPS]
    assert positions == sorted(positions)
    assert "<b>12.5</b>seconds, all steps" in html
    timestamps = html.split("Timestamp types")[1].split("</table>")[0]
    assert '<td class="l">unchanged</td><td class="l">unchanged</td>' in timestamps
    assert "message.timestamp.type = LogAppendTime" in timestamps
