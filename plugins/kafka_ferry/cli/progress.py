"""What a run of a migration's DAG is doing, read from Airflow's metadata DB: for ``kafka-ferry status`` (runs in
flight, failed, half-finished) and for the run commands (the task running now, and what it waits for, while
``dag.test`` runs).

Why the metadata DB and not callbacks: it is where the scheduler and ``dag.test`` both record every task's state,
so one reader serves a run of this process and one started from the trigger form. A small daemon thread polls it
while ``dag.test`` runs; it only reads, and a read that fails is skipped (the run's outcome never depends on it).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

# What each waiting task of the DAG waits for (task ids of dag_promotion / dag_factory), in a user's words.
WAITS_FOR = {
    "source_quiesced": "the source topics' end offsets to stay unchanged for the quiesce window (producers stopped "
                       "on the source)",
    "source_groups_inactive": "the migrated groups to have no members on the source (consumers stopped there)",
    "replication_lag": "the copy to reach the source's end (lag at most promotion.max_lag_records)",
    "group_offsets_synced": "the destination groups' committed offsets to equal the final translation",
    "rollback": "the destination to be quiet (no records produced, no group members) for the quiesce window, then "
                "the copy-back",
    "promote_final_copy": "the final copy to reach the source's end",
    "copy_batch": "the Spark copy batch",
}
ACTIVE = ("running", "deferred", "up_for_reschedule", "up_for_retry", "queued", "scheduled", "restarting")
DONE_BAD = ("failed", "upstream_failed")


def _state(value: Any) -> str:
    return str(value).rsplit(".", 1)[-1].lower() if value is not None else "none"


def _iso(value: datetime | None) -> str:
    return value.strftime("%Y-%m-%dT%H:%M:%SZ") if value is not None else "?"


def task_line(task_id: str, state: str, since: datetime | None, try_number: int | None = None) -> str:
    """One task as a user reads it: what it is doing, since when, and what it waits for."""
    verb = {"running": "running", "deferred": "waiting (deferred)", "up_for_reschedule": "waiting (rescheduled)",
            "up_for_retry": "waiting to retry", "queued": "queued", "scheduled": "scheduled",
            "failed": "FAILED", "upstream_failed": "not run (an upstream task failed)"}.get(state, state)
    line = f"{task_id}: {verb} since {_iso(since)}" + (f", try {try_number}" if try_number and try_number > 1 else "")
    if state in ACTIVE and task_id in WAITS_FOR:
        line += f"; waits for {WAITS_FOR[task_id]}"
    return line


def runs(dag_id: str, limit: int = 5, warm_up: bool = False) -> list[dict]:
    """The DAG's last ``limit`` runs, newest first, each with its tasks (id, state, since, try), read-only.
    ``warm_up``: also read one task instance of the DAG even without a run (so its loading code is imported)."""
    from airflow.models.dagrun import DagRun
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        found = session.scalars(select(DagRun).where(DagRun.dag_id == dag_id)
                                .order_by(DagRun.id.desc()).limit(limit)).all()
        if warm_up:
            for ti in session.scalars(select(TaskInstance).where(TaskInstance.dag_id == dag_id).limit(1)).all():
                _state(ti.state), ti.start_date, ti.queued_dttm, ti.end_date, ti.try_number  # noqa: B018
        out = []
        for run in found:
            tis = session.scalars(select(TaskInstance).where(TaskInstance.dag_id == dag_id,
                                                             TaskInstance.run_id == run.run_id)).all()
            out.append({"run_id": run.run_id, "state": _state(run.state), "start": run.start_date,
                        "end": run.end_date, "mode": (run.conf or {}).get("mode", "catch-up"),
                        "tasks": [{"task_id": ti.task_id, "state": _state(ti.state),
                                   "since": ti.start_date or ti.queued_dttm, "end": ti.end_date,
                                   "try": ti.try_number} for ti in tis]})
        return out


def run_lines(run: dict) -> list[str]:
    """A run in a few lines: its state and mode, then each task that is active or failed."""
    lines = [f"run {run['run_id']} (mode {run['mode']}): {run['state']}, started {_iso(run['start'])}"
             + (f", ended {_iso(run['end'])}" if run["end"] else "")]
    for t in sorted(run["tasks"], key=lambda t: (t["since"] is None, t["since"] or 0, t["task_id"])):
        if t["state"] in ACTIVE or t["state"] in DONE_BAD:
            lines.append("  " + task_line(t["task_id"], t["state"], t["since"], t["try"]))
    return lines


class RunWatcher:
    """Prints, while a run goes on, each change of what its active tasks are doing (polls the metadata DB).

    :param dag_id: the DAG whose newest running run is watched.
    :param say: where lines go (``print`` by default).
    :param interval_s: seconds between two reads.
    """

    def __init__(self, dag_id: str, say: Callable[[str], None] = print, interval_s: float = 2.0) -> None:
        self.dag_id, self.say, self.interval_s = dag_id, say, interval_s
        self._stop = threading.Event()
        self._seen: dict[str, str] = {}
        self._thread = threading.Thread(target=self._loop, name="kafka-ferry-watch", daemon=True)

    def __enter__(self) -> RunWatcher:
        # Every import and first query the thread's reads need happens here, in the calling thread, before dag.test
        # starts: a thread importing lazily while dag.test imports can deadlock both (the import lock of a module
        # against a lock the other thread holds; seen with `promote-groups`, a process stuck in two futex waits).
        try:
            runs(self.dag_id, limit=1, warm_up=True)
        except Exception:  # noqa: BLE001, S110 - see the module docstring: a failed read is skipped
            pass
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.poll()
            except Exception:  # noqa: BLE001, S112 - see the module docstring: a failed read is skipped
                continue

    def poll(self) -> None:
        running = [r for r in runs(self.dag_id, limit=1) if r["state"] in ("running", "queued")]
        for run in running:
            self.report(run["tasks"])

    def report(self, tasks: Iterable[dict]) -> None:
        """Say each active task whose state changed since the last report."""
        for t in tasks:
            if t["state"] in ACTIVE and self._seen.get(t["task_id"]) != t["state"]:
                self.say("  ... " + task_line(t["task_id"], t["state"], t["since"], t["try"]))
            self._seen[t["task_id"]] = t["state"]


def wait_lines(records: dict, steps: Iterable[str], what: str) -> list[str]:
    """Steps of a promotion or rollback recorded done while its mark is not: a half-finished run, where it stands."""
    done = [s for s in steps if (records.get(f"step/{s}") or {}).get("status") == "done"]
    todo = [s for s in steps if s not in done]
    if not done or not todo:
        return []
    last = records[f"step/{done[-1]}"]
    finished = last.get("finished_at_ms")
    when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(finished / 1000)) if finished else "?"
    return [f"{what} half-finished: steps done {', '.join(done)} (last at {when}); next: {todo[0]}"]
