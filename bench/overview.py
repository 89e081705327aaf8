"""What one GET of the Migrations overview costs the API server, with many migrations (issue 36 case 4).

    .venv/bin/python bench/overview.py [--migrations 200] [--requests 5]

Builds a scratch work dir of N migrations through the real writer (``reports.publish.publish_batch_run``, each
row with a 30-run backlog history and its chart drawn then), and measures, in this process, the CPU seconds of:
  (a) the overview GET as it is now: ``plugin.overview_html`` (read every row and its stored chart, render);
  (b) what the GET did before: the same rows with each chart drawn per request (``overview_backlog_chart`` per
      row, the matplotlib figure the page used to draw), for the ratio.
Prints JSON: migrations, CPU per request of (a) and (b), and (b)/(a). Needs no test bed and no Airflow database.
A quiet machine gives the figures for docs/benchmarks.md; a busy one only proves the bench runs.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path

from kafka_ferry.core.specs.spec import parse_spec
from kafka_ferry.reports.publish import overview_rows, publish_batch_run
from kafka_ferry.reports.render import overview_backlog_chart

T0 = 1_795_000_000_000


def backlog(runs: int = 30) -> dict:
    history = [{"batch_id": f"b{i}", "finished_at_ms": T0 + i * 3_600_000, "backlog_before": 90_000 - 2_000 * i,
                "backlog_after": 88_000 - 2_000 * i, "backlog_bytes_after": (88_000 - 2_000 * i) * 800}
               for i in range(runs)]
    return {"sentence": "at the measured rate, caught up in about 3 h", "history": history}


def build(base: Path, migrations: int) -> list[str]:
    dag_ids = []
    for i in range(migrations):
        name = f"bench-{i:04d}"
        spec = parse_spec({"name": name, "tenant": f"t{i % 7}", "source": {"connection_id": "s", "alias": "a"},
                           "destination": {"connection_id": "d", "alias": "b"}, "topics": {"include": ["x"]},
                           "copy": {"spark_connection_id": "k"}})
        report = {"migration": name, "batch_id": "b29", "status": "succeeded", "started_at_ms": T0,
                  "finished_at_ms": T0 + 29 * 3_600_000, "partitions": [], "gaps": [], "backlog": backlog()}
        publish_batch_run(spec, base / name, "scheduled__1", report, [], [])
        dag_ids.append(spec.dag_id)
    return dag_ids


def cpu_per_call(fn, requests: int) -> float:
    fn()  # warm: imports, caches
    started = time.process_time()
    for _ in range(requests):
        fn()
    return (time.process_time() - started) / requests


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--migrations", type=int, default=200)
    parser.add_argument("--requests", type=int, default=5)
    args = parser.parse_args()
    from kafka_ferry.plugin import overview_html

    scratch = Path(tempfile.mkdtemp(prefix="kferry-bench-overview-"))
    try:
        started = time.process_time()
        readable = set(build(scratch, args.migrations))
        write_cpu = time.process_time() - started

        def drawn_per_request() -> int:  # what the GET did before: a figure per migration, every time
            return sum(len(overview_backlog_chart(r["migration"], r["backlog_history"]))
                       for r in overview_rows(scratch) if r.get("dag_id") in readable)

        now = cpu_per_call(lambda: overview_html(scratch, readable), args.requests)
        before = cpu_per_call(drawn_per_request, max(1, args.requests // 5))
        page_bytes = len(overview_html(scratch, readable))
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print(json.dumps({"migrations": args.migrations, "requests": args.requests,
                      "cpu_s_per_get_now": round(now, 4), "cpu_s_per_get_drawing_charts": round(before, 3),
                      "ratio": round(before / now, 1) if now else None, "page_bytes": page_bytes,
                      "cpu_s_writing_rows_and_charts": round(write_cpu, 2)}))


if __name__ == "__main__":
    main()
