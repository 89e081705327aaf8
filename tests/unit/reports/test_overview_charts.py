"""The overview's backlog charts are drawn when a migration's row is written, never per GET (issue 36 case 4).

Before, the overview redrew a matplotlib chart per migration on every request (1.6 s of CPU for 10 migrations):
any logged-in user tied up the API server by reloading. Now the task that writes a row draws its chart once, into
``<migration>/overview-backlog.svg``, and a GET reads files only.
"""

from __future__ import annotations

import pytest
from matplotlib import pyplot
from test_backlog_pages import REPORT, backlog_section

from kafka_ferry.core.specs.spec import parse_spec
from kafka_ferry.reports.publish import (
    OVERVIEW_CHART_FILE,
    overview_backlog,
    overview_chart,
    overview_rows,
    publish_batch_run,
)
from kafka_ferry.reports.render import overview_page


def spec(name: str):
    return parse_spec({"name": name, "tenant": "acme", "source": {"connection_id": "s", "alias": "a"},
                       "destination": {"connection_id": "d", "alias": "b"}, "topics": {"include": ["x"]},
                       "copy": {"spark_connection_id": "k"}})


@pytest.fixture
def figures(monkeypatch) -> list[int]:
    """Every matplotlib figure drawn while the test runs (the charts call pyplot.subplots once per figure)."""
    drawn = []
    real = pyplot.subplots

    def counted(*args, **kwargs):
        drawn.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(pyplot, "subplots", counted)
    return drawn


def test_writing_a_row_draws_its_chart_once_and_the_overview_get_draws_none(tmp_path, figures):
    from kafka_ferry.plugin import overview_html

    names = ["orders", "payments", "quiet"]
    for name in names[:2]:
        publish_batch_run(spec(name), tmp_path / name, "manual__1", {**REPORT, "backlog": backlog_section()}, [], [])
    publish_batch_run(spec("quiet"), tmp_path / "quiet", "manual__1", REPORT, [], [])  # no backlog: no chart
    drawn_by_tasks = len(figures)
    assert drawn_by_tasks == 2 * 2  # per backlog run: its run page's chart and the overview's, once each
    assert [(tmp_path / n / OVERVIEW_CHART_FILE).is_file() for n in names] == [True, True, False]

    readable = {f"kafka_ferry__{n}" for n in names}
    html = overview_html(tmp_path, readable)
    html_again = overview_html(tmp_path, readable)
    assert len(figures) == drawn_by_tasks  # the GETs drew nothing
    assert html == html_again and html.count("<svg") == 2
    for name in names[:2]:
        assert (tmp_path / name / OVERVIEW_CHART_FILE).read_text() in html
    only_orders = overview_html(tmp_path, {"kafka_ferry__orders"})  # another user's rows and charts stay out
    assert only_orders.count("<svg") == 1 and "payments" not in only_orders


def test_a_row_written_before_charts_were_stored_gets_a_note_not_a_drawing(tmp_path, figures):
    from kafka_ferry.plugin import overview_html

    publish_batch_run(spec("orders"), tmp_path / "orders", "manual__1", {**REPORT, "backlog": backlog_section()},
                      [], [])
    (tmp_path / "orders" / OVERVIEW_CHART_FILE).unlink()  # as an older version left it
    before = len(figures)
    html = overview_html(tmp_path, {"kafka_ferry__orders"})
    assert len(figures) == before and "<svg" not in html
    assert "The backlog chart is drawn when the migration's next run writes its row." in html


@pytest.mark.parametrize("migration", ["../etc", "a/b", "", None, "Orders"])
def test_a_rows_migration_text_never_names_another_file(tmp_path, migration):
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc" / OVERVIEW_CHART_FILE).write_text("<svg>elsewhere</svg>")
    assert overview_chart(tmp_path / "work", {"migration": migration}) is None


def test_overview_rows_are_read_as_written(tmp_path):
    publish_batch_run(spec("orders"), tmp_path / "orders", "manual__1", {**REPORT, "backlog": backlog_section()},
                      [], [])
    (row,) = overview_rows(tmp_path)
    assert row["migration"] == "orders" and len(row["backlog_history"]) == 4


def test_rendering_the_overview_of_many_migrations_draws_no_figure(figures):
    """What failed before: the page itself drew one chart per migration with a backlog, on every request."""
    rows = [{"migration": f"m{i:03d}", "tenant": "acme", "dag_id": f"kafka_ferry__m{i:03d}", "last_run_id": "r",
             **overview_backlog({"backlog": backlog_section()})} for i in range(20)]
    html = overview_page(rows, report_href="/r/{dag_id}/{run_id}")
    assert figures == [] and html.count("<h3>m0") == 20
