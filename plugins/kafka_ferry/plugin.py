"""The Airflow UI plugin: a "Migrations" page in the navigation and a report tab on every DAG run.

A FastAPI app mounted by the API server under ``/kafka-ferry`` serves the HTML the migration tasks wrote
into the work dir (``kafka_ferry.reports.publish``): the API server needs the work dir, not the clusters - a
shared volume, or the object store the work dir is on (``kafka_ferry.storage.workdir``: the same setting and
connection as the workers). Both pages go through Airflow's own authentication
(the session cookie or a bearer token) and authorization: a run's report needs read access to that DAG's
runs, and the overview lists only the DAGs the user may read.

Registered through the ``airflow.plugins`` entry point, so a plain ``pip install`` of the package is enough.
"""

from __future__ import annotations

from collections.abc import Collection
from html import escape

from airflow.api_fastapi.app import get_auth_manager
from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity
from airflow.api_fastapi.core_api.security import GetUserDep, requires_access_dag
from airflow.plugins_manager import AirflowPlugin
from fastapi import Depends, FastAPI, Request
from fastapi.responses import HTMLResponse

from kafka_ferry.core.specs.patterns import MIGRATION_NAME
from kafka_ferry.promotion.evidence import run_bundles, verify
from kafka_ferry.reports.publish import detail_page_path, overview_chart, overview_rows, run_page_path
from kafka_ferry.reports.render import DETAIL_SECTIONS, charted, evidence_page, overview_page, page
from kafka_ferry.storage.workdir import StoragePath, fresh, work_base

URL_PREFIX = "/kafka-ferry"
DAG_ID_PREFIX = "kafka_ferry__"
RUN_REPORT_HREF = URL_PREFIX + "/runs/{dag_id}/{run_id}"

# The pages are static HTML with inline CSS and inline SVG charts: they need no script, no fetch, no form and no
# frame of their own. They are served on the Airflow API's origin, so the policy forbids all of that (a page that
# ever quoted hostile text unescaped still could not run it), and only Airflow's own UI may frame them.
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:; "
                               "base-uri 'none'; form-action 'none'; frame-ancestors 'self'",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "SAMEORIGIN",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}

app = FastAPI(title="kafka-ferry reports", docs_url=None, redoc_url=None, openapi_url=None)


@app.middleware("http")
async def _security_headers(request: Request, call_next):
    response = await call_next(request)
    response.headers.update(SECURITY_HEADERS)  # every response: pages, 404s and the auth layer's 401/403
    return response


def _work_base() -> StoragePath:
    return fresh(work_base())  # the setting is read per request; an object store's listings are read anew


@app.get("/", response_class=HTMLResponse)
def migrations_overview(user: GetUserDep) -> HTMLResponse:
    readable = get_auth_manager().get_authorized_dag_ids(user=user)
    return HTMLResponse(overview_html(_work_base(), readable))


def overview_html(base: StoragePath, readable: Collection[str]) -> str:
    """The overview a user may read: the rows of their DAGs, each with the chart stored beside it. Reads files
    only (a JSON row and an SVG per migration): the charts are drawn when the rows are written, so a GET - which
    any logged-in user may repeat - never draws one (bench/overview.py measures its CPU)."""
    rows = [r for r in overview_rows(base) if r.get("dag_id") in readable]
    shown = charted(rows)  # the charts of the migrations with the largest lag only: a bounded page
    rows = [{**r, "backlog_chart": overview_chart(base, r)} if r["migration"] in shown else r for r in rows]
    return overview_page(rows, report_href=RUN_REPORT_HREF)


@app.get("/runs/{dag_id}/{run_id}", response_class=HTMLResponse,
         dependencies=[Depends(requires_access_dag("GET", DagAccessEntity.RUN))])
def run_report(dag_id: str, run_id: str) -> HTMLResponse:
    if dag_id.startswith(DAG_ID_PREFIX) and MIGRATION_NAME.fullmatch(dag_id[len(DAG_ID_PREFIX):]):
        path = run_page_path(_work_base() / dag_id[len(DAG_ID_PREFIX):], run_id)
        if path.is_file():
            return HTMLResponse(path.read_text())
    return HTMLResponse(page("no report", f"<p>No kafka-ferry report for run <code>{escape(run_id)}</code> of "
                                          f"<code>{escape(dag_id)}</code> (yet): reports are written by the "
                                          "catch-up translation and the promotion tasks.</p>"), status_code=404)


@app.get("/runs/{dag_id}/{run_id}/evidence", response_class=HTMLResponse,
         dependencies=[Depends(requires_access_dag("GET", DagAccessEntity.RUN))])
def run_evidence(dag_id: str, run_id: str) -> HTMLResponse:
    """The run's evidence bundles, verified now against their manifests and signatures (the API server reads the
    work dir, not the clusters: ``kafka-ferry verify-evidence`` re-reads those), under the run page's own check."""
    if not (dag_id.startswith(DAG_ID_PREFIX) and MIGRATION_NAME.fullmatch(dag_id[len(DAG_ID_PREFIX):])):
        return HTMLResponse(page("no evidence", "<p>Not a kafka-ferry DAG.</p>"), status_code=404)
    bundles = []
    for folder in run_bundles(_work_base() / dag_id[len(DAG_ID_PREFIX):], run_id):
        verdict = verify(folder)
        bundles.append((folder.name, verdict.lines(), verdict.manifest.as_dict() if verdict.manifest else None))
    return HTMLResponse(evidence_page(run_id, bundles), status_code=200 if bundles else 404)


@app.get("/runs/{dag_id}/{run_id}/{section}", response_class=HTMLResponse,
         dependencies=[Depends(requires_access_dag("GET", DagAccessEntity.RUN))])
def run_report_detail(dag_id: str, run_id: str, section: str) -> HTMLResponse:
    """Every row of a table the run's page summarizes (``render.Details``), under the run page's own check: a
    user reads it only where they may read the DAG's runs; ``section`` is one of ``DETAIL_SECTIONS``, never a path."""
    if (section in DETAIL_SECTIONS and dag_id.startswith(DAG_ID_PREFIX)
            and MIGRATION_NAME.fullmatch(dag_id[len(DAG_ID_PREFIX):])):
        path = detail_page_path(_work_base() / dag_id[len(DAG_ID_PREFIX):], run_id, section)
        if path.is_file():
            return HTMLResponse(path.read_text())
    return HTMLResponse(page("no detail", f"<p>No detail page <code>{escape(section)}</code> for run "
                                          f"<code>{escape(run_id)}</code> of <code>{escape(dag_id)}</code>.</p>"),
                        status_code=404)


class KafkaFerryPlugin(AirflowPlugin):
    name = "kafka_ferry"
    fastapi_apps = [{"app": app, "url_prefix": URL_PREFIX, "name": "kafka-ferry reports"}]
    external_views = [
        {"name": "Migrations", "href": URL_PREFIX + "/", "destination": "nav", "category": "browse",
         "url_route": "kafka-ferry-migrations"},
        {"name": "Migration report", "href": RUN_REPORT_HREF.format(dag_id="{DAG_ID}", run_id="{RUN_ID}"),
         "destination": "dag_run", "url_route": "kafka-ferry-run-report"},
    ]
