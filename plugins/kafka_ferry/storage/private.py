"""Directories the copy task runs code from or hands to a JVM: this user's own and writable by no one else, or refused.

Why: the work dir is shared (the API server reads it, other services mount it, another user of the host may write
it), and what spark-submit runs from there - the Spark home mirror and the driver's class-data archive under
``<local base>/jvm``, the launcher and package zip under ``<local dir>/packages`` - runs with both clusters'
credentials in its environment. A directory someone else made (or can write) under the expected name would have
been used as it was (``mkdir(exist_ok=True)`` accepts any owner and mode), so a planted ``spark-home-<digest>``
ran its ``bin/spark-class``. Now each such directory is made 0700 when missing and, whether made or found, must
be a real directory (not a symlink) owned by this process's user with no group or other write bit: anything else
is refused, naming the path, its owner and its mode, before anything in it is used.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from kafka_ferry.core.common.failures import Permanent


class UntrustedDirectory(Permanent, RuntimeError):
    """A directory the copy would run code from is not this user's alone; no retry changes that."""


def _owner(uid: int) -> str:
    try:
        import pwd

        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except (ImportError, KeyError):
        return f"uid {uid}"


def problem(path: Path, st: os.stat_result, directory: bool = True) -> str | None:
    """Why ``path`` (as ``os.lstat`` saw it) cannot be trusted, or None: a symlink, the wrong kind of entry,
    another owner, or a group/other write bit."""
    mode = stat.S_IMODE(st.st_mode)
    where = f"{path} (owner {_owner(st.st_uid)}, mode {mode:04o})"
    if stat.S_ISLNK(st.st_mode):
        return f"{where} is a symbolic link"
    if directory and not stat.S_ISDIR(st.st_mode):
        return f"{where} is not a directory"
    if not directory and not stat.S_ISREG(st.st_mode):
        return f"{where} is not a regular file"
    if st.st_uid != os.geteuid():
        return f"{where} is not owned by this user ({_owner(os.geteuid())})"
    if mode & 0o022:
        return f"{where} is writable by its group or by others"
    return None


def refuse(reason: str, what: str, way_out: str) -> UntrustedDirectory:
    return UntrustedDirectory(f"{what}: {reason}; the copy runs code from it with both clusters' credentials, so it "
                              f"must be this user's alone; refused. {way_out}")


def private_directory(path: str | Path, what: str, way_out: str) -> Path:
    """``path``, made 0700 when missing, else checked as found (``problem``); ``UntrustedDirectory`` names
    ``what`` it is for, the path, its owner and mode, and ``way_out``. An OSError making it (a read-only disk, a
    file of this user's in the way) is the caller's to handle."""
    path = Path(path)
    try:
        path.mkdir(mode=0o700, parents=True)
    except FileExistsError:
        pass
    st = os.lstat(path)
    if st.st_uid == os.geteuid() and stat.S_ISREG(st.st_mode):  # this user's own file in the way: not a planted one
        raise NotADirectoryError(f"{path} is a file")
    reason = problem(path, st)
    if reason:
        raise refuse(reason, what, way_out)
    return path


def check_entry(path: str | Path, what: str, way_out: str, directory: bool) -> bool:
    """True when ``path`` exists and is trusted, False when it does not exist; refused when it is not trusted."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return False
    reason = problem(Path(path), st, directory=directory)
    if reason:
        raise refuse(reason, what, way_out)
    return True
