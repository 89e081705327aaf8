"""SIGTERM and SIGINT while a command runs the spec's DAG: stop promptly, say what became of the run, exit non-zero.

Why not a plain signal handler: ``dag.test`` runs every task in this process, and the Task SDK's task runner
installs its own SIGTERM handler for each task (it calls the operator's ``on_kill`` and returns), so a handler set
before the run is replaced, and a TERM was swallowed: `kafka-ferry promote` went on waiting in its sensor. Python's
wakeup fd survives that: whichever Python handler is installed, the C-level handler writes the signal's number to
the fd. A thread reads it and does the stopping; the main thread is never interrupted mid-write by an exception.

What the stop does, in order: kill the processes this command started (a spark-submit, a local Spark JVM, and what
they started: the task runner's handler runs the copy operator's ``on_kill`` in the main thread at the same time,
and the provider's kills the spark-submit process alone, so its Python driver and workers could be orphaned before
this thread looked; the command is their reaper while it runs, ``process_tree.adopt_orphans``, and sees them), mark the
run and its active tasks failed in Airflow's metadata DB (no one else will finish a ``dag.test`` run: left
"running", it would read as in flight in `status` and the UI forever), print one line on stderr (the run, its
task, and the way to continue: the same command again, since every step records itself in the state topic and a
new run resumes after the last one done, or `kafka-ferry status` to see where it stands), and exit 128 + the
signal's number. A second signal, or a stop that does not finish in ``grace_s``, exits at once.
"""

from __future__ import annotations

import os
import shlex
import signal
import socket
import sys
import threading
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

import psutil

from kafka_ferry.process_tree import adopt_orphans, end_processes

SIGNALS = (signal.SIGTERM, signal.SIGINT)


def stop_line(signame: str, run: dict | None, marked: bool, command: Sequence[str], spec_path: str) -> str:
    """The one line said on a stop: what became of the run, which task, and how to continue or watch it.

    :param run: the run this command started (``progress.runs``' shape) or None if none had started yet.
    :param marked: whether the run was marked failed in the metadata DB.
    """
    again = shlex.join(["kafka-ferry", *command])
    status = shlex.join(["kafka-ferry", "status", spec_path])
    if run is None:
        return (f"kafka-ferry: stopped by {signame} before the DAG run started; nothing ran. To start again: "
                f"`{again}`")
    from kafka_ferry.cli.progress import ACTIVE

    active = [t["task_id"] for t in run["tasks"] if t["state"] in ACTIVE]
    where = f"at task {', '.join(sorted(active))}" if active else "between tasks"
    if marked:
        fate = "marked failed in Airflow's metadata DB (nothing runs it any more)"
    elif run["state"] in ("running", "queued"):
        fate = "still recorded as running in Airflow's metadata DB, though nothing runs it any more"
    else:
        fate = f"had already ended ({run['state']})"
    return (f"kafka-ferry: stopped by {signame} {where}; run {run['run_id']} (mode {run['mode']}) {fate}; nothing "
            f"was undone: each step done is recorded in the migration's state topic. To continue, run the same "
            f"command again (`{again}`: it resumes after the last step done); `{status}` shows where it stands")


def mark_failed(dag_id: str, run_id: str) -> bool:
    """The run and its active task instances -> failed (what a scheduler does to a run whose runner died)."""
    from airflow.models.dagrun import DagRun
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session
    from airflow.utils.state import DagRunState, TaskInstanceState
    from sqlalchemy import update

    from kafka_ferry.cli.progress import ACTIVE

    now = datetime.now(UTC)
    with create_session() as session:
        session.execute(update(TaskInstance)
                        .where(TaskInstance.dag_id == dag_id, TaskInstance.run_id == run_id,
                               TaskInstance.state.in_(ACTIVE))
                        .values(state=TaskInstanceState.FAILED, end_date=now)
                        .execution_options(synchronize_session=False))
        session.execute(update(DagRun).where(DagRun.dag_id == dag_id, DagRun.run_id == run_id)
                        .values(state=DagRunState.FAILED, end_date=now)
                        .execution_options(synchronize_session=False))
    return True


def stop_children(timeout_s: float = 10.0) -> None:
    """TERM, then KILL, every process this one started (a spark-submit and its JVM, a local Spark gateway), and
    anything started meanwhile (``process_tree.end_processes``). What was orphaned below this process is among
    them: ``RunInterrupts`` makes the command their reaper."""
    me = psutil.Process()
    end_processes(me.children(recursive=True), timeout_s, late=lambda: me.children(recursive=True))


class RunInterrupts:
    """While a command runs the DAG: a TERM or INT stops it as the module docstring says.

    :param dag_id: the spec's DAG.
    :param command: the command's arguments (to name the way to continue).
    :param spec_path: the spec as given (for `kafka-ferry status`).
    :param current_run: reads the run this command started, or None (default: the DAG's newest run, if it is not
        one of those that existed when the command began).
    :param mark: marks a run failed (default: ``mark_failed``).
    :param grace_s: how long the stop may take before the process exits regardless.
    """

    def __init__(self, dag_id: str, command: Sequence[str], spec_path: str,
                 current_run: Callable[[], dict | None] | None = None,
                 mark: Callable[[str, str], bool] = mark_failed, grace_s: float = 60.0,
                 say: Callable[[str], Any] | None = None) -> None:
        self.dag_id, self.command, self.spec_path = dag_id, list(command), spec_path
        self.mark, self.grace_s = mark, grace_s
        self.say = say or (lambda line: print(line, file=sys.stderr, flush=True))
        self._current_run = current_run
        self._before: set[str] = set()
        self._fired = threading.Event()

    def newest_run(self) -> dict | None:
        from kafka_ferry.cli.progress import runs

        found = runs(self.dag_id, limit=1)
        return found[0] if found and found[0]["run_id"] not in self._before else None

    def __enter__(self) -> RunInterrupts:
        self._active = threading.current_thread() is threading.main_thread()  # signals reach the main thread only
        if not self._active:
            return self
        if self._current_run is None:
            from kafka_ferry.cli.progress import runs

            self._before = {r["run_id"] for r in runs(self.dag_id, limit=1)}
            self._current_run = self.newest_run
        self._adopted = adopt_orphans()  # an orphaned descendant stays below this process: the stop ends it too
        self._reader, writer = socket.socketpair()
        writer.setblocking(False)
        self._writer = writer
        self._old_fd = signal.set_wakeup_fd(writer.fileno(), warn_on_full_buffer=False)
        # a Python handler that does nothing: the wakeup fd carries the signal (see the module docstring)
        self._old = {s: signal.signal(s, lambda *_: None) for s in SIGNALS}
        threading.Thread(target=self._watch, name="kafka-ferry-signals", daemon=True).start()
        return self

    def __exit__(self, *_exc: object) -> None:
        if not self._active:
            return
        signal.set_wakeup_fd(self._old_fd)
        if self._adopted:
            adopt_orphans(False)
        for s, handler in self._old.items():
            signal.signal(s, handler)
        self._writer.close()  # the reader sees end-of-file and its thread ends

    def _watch(self) -> None:
        while True:
            try:
                data = self._reader.recv(64)
            except OSError:
                return
            if not data:
                return
            for signum in data:
                if signum not in SIGNALS:
                    continue
                if self._fired.is_set():  # a second signal: out now
                    os._exit(128 + signum)
                self._fired.set()
                threading.Thread(target=self._stop, args=(signum,), name="kafka-ferry-stop", daemon=True).start()
                threading.Timer(self.grace_s, os._exit, args=(128 + signum,)).start()

    def _stop(self, signum: int) -> None:
        signame = signal.Signals(signum).name
        run, marked = None, False
        try:
            stop_children()
        except Exception:  # noqa: BLE001, S110 - the stop goes on: the line and the exit matter more
            pass
        try:
            current = self._current_run or self.newest_run  # set on entering; the newest run otherwise
            run = current()
            if run is not None and run["state"] in ("running", "queued"):
                marked = self.mark(self.dag_id, run["run_id"])
        except Exception:  # noqa: BLE001, S110 - an unreadable DB: the line says the run may still read running
            pass
        try:
            self.say(stop_line(signame, run, marked, self.command, self.spec_path))
        finally:
            sys.stdout.flush()
            os._exit(128 + signum)
