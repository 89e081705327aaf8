"""Ending a tree of processes a task or a command started, all of it, including what was orphaned on the way.

Why a module: a spark-submit is a tree (the SparkSubmit JVM, the Python driver it starts in local and client mode,
the executors' ``pyspark.daemon`` and its workers), and whoever kills only its root orphans the rest: the
provider's ``SparkSubmitHook.on_kill`` SIGKILLs the spark-submit process alone, so the Python driver and the
workers were re-parented to init and ran on after the task was killed. An orphan is no one's descendant any more,
so it must be seen before its parent goes (``descendants`` first, then the kill), or kept in view by making the
process that started the tree their reaper (``adopt_orphans``: Linux's child subreaper).
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import sys
import time
from collections.abc import Callable, Iterable, Sequence

import psutil

PR_SET_CHILD_SUBREAPER = 36  # <linux/prctl.h>


def descendants(pid: int) -> list[psutil.Process]:
    """Every process below ``pid`` now (none if it is gone)."""
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def end_processes(processes: Iterable[psutil.Process], timeout_s: float = 10.0,
                  late: Callable[[], list[psutil.Process]] = list) -> None:
    """TERM each, wait up to ``timeout_s``; then KILL what is left and what ``late`` finds (started meanwhile: a
    JVM's Python workers forked after the first look), and wait for those up to three times as long (a killed JVM
    of a gigabyte can take seconds to be gone on a loaded machine). Returns when all are gone or the waits end.

    A zombie counts as gone (it runs nothing; its parent or init reaps it, or this process if it is the parent):
    a spark-submit JVM keeps one unreaped, and ``psutil.wait_procs`` would wait out its timeout on it."""
    first = list(processes)
    for process in first:
        try:
            process.terminate()
        except psutil.NoSuchProcess:
            continue
    alive = _wait_gone(first, timeout_s)
    try:
        found = late()
    except psutil.NoSuchProcess:
        found = []
    rest = list({process.pid: process for process in [*alive, *found]}.values())
    for process in rest:
        try:
            process.kill()
        except psutil.NoSuchProcess:
            continue
    _wait_gone(rest, 3 * timeout_s)


def _gone(process: psutil.Process) -> bool:
    try:
        if process.status() == psutil.STATUS_ZOMBIE:
            with contextlib.suppress(psutil.Error, ChildProcessError):
                process.wait(0)  # reaps it if it is this process's child
            return True
        return not process.is_running()
    except psutil.NoSuchProcess:
        return True


def _wait_gone(processes: Sequence[psutil.Process], timeout_s: float) -> list[psutil.Process]:
    """Those of ``processes`` still running when all others are gone or ``timeout_s`` has passed."""
    deadline = time.monotonic() + timeout_s
    while True:
        alive = [process for process in processes if not _gone(process)]
        if not alive or time.monotonic() >= deadline:
            return alive
        time.sleep(0.05)


def adopt_orphans(on: bool = True) -> bool:
    """Make this process the reaper of its orphaned descendants (``PR_SET_CHILD_SUBREAPER``), so a process whose
    parent died stays below this one and is ended with the rest. False where the kernel has no such call."""
    if not sys.platform.startswith("linux"):
        return False
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    return bool(libc.prctl(PR_SET_CHILD_SUBREAPER, int(on), 0, 0, 0) == 0)
