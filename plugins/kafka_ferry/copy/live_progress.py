"""Live progress of a running batch on its run page: the copy task rewrites the page while the batch runs.

Why from the copy task and not the UI plugin: the API server serves files from the work dir and needs no Kafka
connection (``plugin.py``); the Airflow task that waits for spark-submit or drives Spark Connect has the clusters,
so a thread beside it reads the progress records the partition copiers write to the state topic
(``state.progress``), builds the view (``core.batches.live_progress``) and writes the run's page every
``INTERVAL_S``. The translation task later replaces the page with the batch's report. A failure to read or write
is logged and never touches the copy.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict

from kafka_ferry.copy.plan import CopyPlan
from kafka_ferry.core.batches.live_progress import live_view
from kafka_ferry.reports.publish import publish_live_batch
from kafka_ferry.state.progress import read_progress_records
from kafka_ferry.state.store import MigrationStateStore
from kafka_ferry.storage.workdir import StoragePath

log = logging.getLogger(__name__)

INTERVAL_S = 10.0


def batch_view(plan: CopyPlan, store: MigrationStateStore, started_at_ms: int, now_ms: int | None = None) -> dict:
    """The batch's in-progress view from the state topic's progress records."""
    return live_view(plan.migration, plan.batch_id, [asdict(t) for t in plan.tasks], read_progress_records(store),
                     started_at_ms, int(time.time() * 1000) if now_ms is None else now_ms)


def publish_progress(plan: CopyPlan, store: MigrationStateStore, migration_dir: StoragePath, run_id: str,
                     started_at_ms: int, stopped: str | None = None) -> StoragePath:
    """Write the run's page as the batch stands now; ``stopped``: why the copy task ended before the batch did."""
    view = batch_view(plan, store, started_at_ms)
    if stopped:
        view = {**view, "stopped": stopped}
    return publish_live_batch(migration_dir, run_id, view)


@contextmanager
def live_progress_page(plan: CopyPlan, store: MigrationStateStore, migration_dir: StoragePath, run_id: str,
                       interval_s: float = INTERVAL_S) -> Iterator[threading.Event]:
    """While the body runs (the batch), rewrite the run's page every ``interval_s``, the first time at once; the
    thread is joined on exit. Yields an event set once the first page is written (the batch never waits for it:
    a slow state read must not delay the copy)."""
    started_at_ms = int(time.time() * 1000)
    stop, written = threading.Event(), threading.Event()

    def publish(stopped: str | None = None) -> None:
        try:
            publish_progress(plan, store, migration_dir, run_id, started_at_ms, stopped)
            written.set()
        except Exception as exc:  # a page is a view: the copy goes on without it
            log.warning("live progress page of batch %s not written: %s", plan.batch_id, exc)

    def loop() -> None:
        publish()  # at once: the run's page says that the batch is copying, and what
        while not stop.wait(interval_s):
            publish()

    thread = threading.Thread(target=loop, name=f"kafka-ferry-progress-{plan.batch_id}", daemon=True)
    thread.start()
    try:
        yield written
    except BaseException as exc:
        stop.set()
        thread.join(timeout=interval_s + 70)
        # the page must not say "copying" for a task that ended: what the partitions recorded, and why it stopped
        publish(f"the copy task stopped before the batch finished ({type(exc).__name__}: {exc}); what is recorded "
                "above is kept, and the task's retry resumes from it exactly once")
        raise
    finally:
        stop.set()
        thread.join(timeout=interval_s + 70)  # a state read is bounded (60 s): never left writing after the batch
