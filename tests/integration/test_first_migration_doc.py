"""docs/first-migration.md, run as written: its fenced ``bash first-migration`` blocks, extracted from the doc.

Two walks from an empty directory to a promoted tenant on the test bed: the common steps plus the blocks marked
``command`` (the kafka-ferry command) or ``airflow`` (plain Airflow). The doc's own variables point it at the test
bed's clusters; ``kafka-ferry`` is ``python -m kafka_ferry.cli`` here (the shared venv is not reinstalled).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.integration, pytest.mark.airflow, pytest.mark.spark, pytest.mark.long]

DOC = Path(__file__).resolve().parents[2] / "docs" / "first-migration.md"
FENCE = re.compile(r"^```([^\n`]*)\n(.*?)^```\s*$", re.M | re.S)
TOPICS = ("shop.orders", "shop.customers")
# what the doc's spec creates on the destination (its section 4 lists them), removed before and after each walk
INTERNAL = ("kafka-ferry.shop.state", "mm2-offset-syncs.shop-new.internal", "shop-old.checkpoints.internal",
            "shop-old.heartbeats")


def doc_script(path: str) -> str:
    """The doc's common blocks and those of one path, in doc order, as one script."""
    blocks = []
    for info, body in FENCE.findall(DOC.read_text()):
        words = info.split()
        if words[:2] == ["bash", "first-migration"] and (len(words) == 2 or words[2] == path):
            blocks.append(body)
    return "\n".join(blocks)


def test_the_doc_marks_both_paths_and_lists_every_internal_topic():
    assert "kafka-ferry promote" in doc_script("command") and "airflow dags test" in doc_script("airflow")
    assert not [line for line in doc_script("airflow").splitlines() if line.startswith("kafka-ferry ")]
    for topic in INTERNAL:
        assert f"`{topic}`" in DOC.read_text()


def wipe(clusters) -> None:
    """Remove what a walk made on the shared test bed (its topics, its group), and wait until they are gone."""
    for side, names in (("source", TOPICS), ("destination", TOPICS + INTERNAL)):
        admin = clusters.admin(side)
        present = [t for t in names if t in admin.list_topics(timeout=30).topics]
        for future in (admin.delete_topics(present, operation_timeout=30).values() if present else []):
            future.result(60)
        groups = [g.group_id for g in admin.list_consumer_groups(request_timeout=30).result(30).valid
                  if g.group_id == "shop-billing"]
        for future in (admin.delete_consumer_groups(groups, request_timeout=30).values() if groups else []):
            future.result(60)
        deadline = time.monotonic() + 60
        while set(names) & set(admin.list_topics(timeout=30).topics):
            assert time.monotonic() < deadline, f"{side}: topics of the walk not deleted in 60 s"
            time.sleep(0.5)


@pytest.mark.parametrize("path", ["command", "airflow"])
def test_the_first_migration_runs_as_written_to_a_promoted_tenant(clusters, tmp_path, path):
    script = doc_script(path)
    shim = tmp_path / "bin" / "kafka-ferry"
    shim.parent.mkdir()
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m kafka_ferry.cli "$@"\n')
    shim.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AIRFLOW", "KFERRY_WORK_DIR"))}
    env.update(PATH=os.pathsep.join([str(shim.parent), str(Path(sys.executable).parent), env.get("PATH", "")]),
               SOURCE_BOOTSTRAP=clusters.source_bootstrap, DESTINATION_BOOTSTRAP=clusters.destination_bootstrap)
    wipe(clusters)
    try:
        done = subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=tmp_path, env=env, capture_output=True,
                              text=True, timeout=1500)
        out = done.stdout + done.stderr
        assert done.returncode == 0, out[-6000:]

        home = tmp_path / "shop-migration"
        report = (home / "airflow" / "kafka-ferry" / "shop" / "promotion-report.json").read_text()
        assert '"status": "promoted"' in report
        if path == "command":
            assert "ok: connection 'shop_old_kafka'" in done.stdout and "2 source topic(s) selected" in done.stdout
            assert "  promoted: no" in done.stdout
            assert re.search(r"  promoted: yes, at \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", done.stdout), done.stdout[-3000:]
            assert "DAG run " in done.stdout and "promotion: promoted (" in done.stdout
        else:
            assert "kafka_ferry__shop" in done.stdout
        # the group resumes on the destination where it stopped on the source (offsets are kept one to one)
        committed = clusters.cluster("destination").group_offsets("shop-billing")
        assert committed == {("shop.orders", p): 5 for p in range(6)}
        assert set(clusters.cluster("destination").describe_topics(TOPICS)) == set(TOPICS)
    finally:
        wipe(clusters)
