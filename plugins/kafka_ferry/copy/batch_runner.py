"""One copy batch, whatever engine copies its partitions: lease -> state clients -> engine -> run -> finish.

spark-submit's driver (``copy.spark_job``), the Airflow task on Spark Connect (``operators.copy``) and the
promotion's final copy (``copy.catch_up``) all go through here; only the step that runs the partition tasks
differs (``Engine``). The order is what keeps a batch exact and cheap:

1. the lease's and the report's idempotent producers are made first, so they get their producer ids while the
   engine starts (a producer made just before its first write waits for its id; librdkafka retries the
   request only some time later);
2. the engine starts (a SparkContext, a Connect session, nothing in process) while, in a thread of its own, the
   lease is claimed (one copy job per migration at a time, whoever started it; ``CopyLeaseHeld`` if not) and
   the planned partitions are checked (a topic deleted after planning fails the batch, before any record). Why
   at once: the engine's start is seconds the claim's round trips need not add to; no record moves before both
   are done, and a claim the batch does not get to use (the engine failed to start) is withdrawn;
3. the engine runs the partition tasks; a failure no retry heals (``core.common.failures.Permanent``, a refused
   record) comes back as a failure record and is raised as ``CopyFailed``, once, with its cause; anything
   else propagates and the task's retry resumes exactly-once;
4. ``finish_batch`` measures lag and keeps the report; its lines are logged.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path
from typing import Any, Protocol

from kafka_ferry.copy.batch import BatchClients, finish_batch
from kafka_ferry.copy.copy_failures import CopyFailed, failure_path_for, failure_record, first_failure
from kafka_ferry.copy.faults import FAULT_ENV
from kafka_ferry.copy.lease import CopyLease, copy_lease
from kafka_ferry.copy.plan import CopyPlan
from kafka_ferry.copy.report import report_lines
from kafka_ferry.copy.runner import check_planned_topics, copy_plan_in_process
from kafka_ferry.storage.workdir import StoragePath, as_path, copy_file, is_local, local_dir, remove

Configs = Mapping[str, Mapping[str, Any]]
# The engine-specific step: a plan, both clusters' configs and the fault spec -> one result row per partition
# (a row {"failure": record} when a task stopped on a failure no retry heals).
RunTasks = Callable[[CopyPlan, Configs, "str | None"], list[dict]]
# An engine: entered once the state producers exist, it starts what runs the tasks and stops it after the batch.
Engine = Callable[[], AbstractContextManager[RunTasks]]

log = logging.getLogger("kafka_ferry.copy_batch")


class LineLogger(Protocol):
    """Where a batch logs its report's lines: this module's stdlib logger, or a task's ``self.log`` (Airflow's
    structlog logger, which is no ``logging.Logger``)."""

    def info(self, msg: str, /, *args: object) -> object: ...


def in_process_engine() -> AbstractContextManager[RunTasks]:
    """The copy without Spark: the plan's partitions one after another in this process."""
    return nullcontext(copy_plan_in_process)


def run_batch(plan: CopyPlan, configs: Configs, engine: Engine, report_path: str | Path | StoragePath,
              started_at_ms: int | None = None, logger: LineLogger = log,
              clients: BatchClients | None = None) -> dict[str, Any]:
    """Copy the plan's batch with ``engine`` and keep its report; raises ``CopyLeaseHeld`` (nothing copied) or
    ``CopyFailed`` (a failure no retry heals, with its record). ``clients``: default, made from ``configs``."""
    started_at_ms = int(time.time() * 1000) if started_at_ms is None else started_at_ms
    clients = clients or BatchClients(configs)
    if plan.is_empty:  # nothing to copy: no lease, no engine; the report still says the lag
        report = finish_batch(plan, [], configs, started_at_ms, report_path, source=clients.source)
    else:
        lease = copy_lease(plan, configs, clients.lease)
        closing = clients.closing
        entered = False
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="kafka-ferry-claim") as pool:
            claim = pool.submit(_claim, lease, plan, configs, clients)
            try:
                with engine() as run_tasks:
                    topics_problem = claim.result()  # raises CopyLeaseHeld: nothing claimed, nothing copied
                    entered = True
                    with lease:
                        results = run_partitions(plan, configs, run_tasks, topics_problem=topics_problem)
                        report = finish_batch(plan, results, configs, started_at_ms, report_path, closing,
                                              clients.source)
            finally:
                if not entered and claim.exception() is None:  # claimed for a batch that never ran: withdrawn
                    lease.release()
    for line in report_lines(report):
        logger.info("%s", line)
    return report


def _claim(lease: CopyLease, plan: CopyPlan, configs: Configs, clients: BatchClients) -> Exception | None:
    """Claim the lease (``CopyLeaseHeld`` raised), then check the planned topics: their problem is returned, for
    ``run_partitions`` to report like any other failure, with the lease held."""
    lease.acquire()
    try:
        check_planned_topics(plan, configs, {"source": clients.source, "destination": clients.destination})
    except Exception as exc:  # noqa: BLE001 - handed on, raised by run_partitions in the caller's thread
        return exc
    return None


def run_partitions(plan: CopyPlan, configs: Configs, run_tasks: RunTasks,
                   topics_problem: Exception | None = None) -> list[dict]:
    """Run the plan's partition tasks (the caller holds the lease and checked the planned topics: their problem,
    if any, is ``topics_problem``); a failure no retry heals, raised in this process or returned as a row by a
    Spark task, becomes one ``CopyFailed``."""
    try:
        if topics_problem is not None:
            raise topics_problem
        results = run_tasks(plan, configs, os.environ.get(FAULT_ENV))
        failure = first_failure(results)
    except Exception as exc:
        failure = failure_record(exc)
        if failure is None:
            raise  # may heal: the task's retry resumes exactly-once
        raise CopyFailed(failure) from exc
    if failure is not None:
        raise CopyFailed(failure)
    return results



def clear_outputs(report_path: str | Path | StoragePath) -> None:
    """Before a run: no report or failure record of an earlier try stays for the report task to read."""
    remove(as_path(report_path))
    remove(failure_path_for(report_path))


@contextmanager
def staged_for_spark(migration: str, plan_path: str | Path | StoragePath, report_path: str | Path | StoragePath
                     ) -> Iterator[tuple[Path, Path]]:
    """The plan and report paths a spark-submit job reads and writes: local files.

    Why stage: the job's driver opens them as files and must get no credentials of the work dir's store. With the
    work dir in object storage the plan is copied to ``local_dir(migration)/staging`` first, and the report and the
    failure record the job leaves there are copied back after it, whether it succeeded or failed (the task reads
    the failure record to fail once with its cause). A local work dir is used as it is.
    """
    plan, report = as_path(plan_path), as_path(report_path)
    if is_local(plan) and is_local(report):
        yield plan, report
        return
    scratch = local_dir(migration) / "staging"
    local_plan, local_report = scratch / plan.name, scratch / report.name
    copy_file(plan, local_plan)
    clear_outputs(local_report)
    try:
        yield local_plan, local_report
    finally:
        for local, stored in ((local_report, report), (failure_path_for(local_report), failure_path_for(report))):
            if local.exists():
                copy_file(local, stored)
                local.unlink()
        local_plan.unlink(missing_ok=True)
