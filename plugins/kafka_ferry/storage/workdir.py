"""The work dir: plans, batch reports, offset maps, run pages and the overview, in one place every task and the API
server agree on.

Where it is, first set wins:

1. ``$KFERRY_WORK_DIR`` (a path or a URL), with ``$KFERRY_WORK_DIR_CONN_ID``;
2. Airflow's settings ``[kafka_ferry] work_dir`` and ``[kafka_ferry] work_dir_conn_id`` (so also
   ``AIRFLOW__KAFKA_FERRY__WORK_DIR``);
3. ``$AIRFLOW_HOME/kafka-ferry``.

A local path stays a ``pathlib.Path``: files are written to a temporary name and renamed, so a reader never sees
half a file, and a Spark job on the same host reads them directly. A URL (``s3://bucket/prefix`` or any scheme an
fsspec filesystem serves) is an Airflow ``ObjectStoragePath``: a PUT is whole, so a write is one call. Why
ObjectStoragePath and not plain fsspec: credentials come from an Airflow Connection (``conn_id``) and nowhere
else - never the URL (a URL with a user part is refused), never a log or XCom (a path's text names the
connection's id, not its secret).

Which filesystem serves the scheme: the one an installed provider registers (the Amazon provider's ``s3`` reads an
``aws`` Connection itself); without one, ``s3``/``s3a`` is s3fs (a dependency) built here from the same Connection
fields the Amazon provider reads (login = access key id, password = secret key, extra ``endpoint_url``,
``region_name``, ``config_kwargs``), so installing that provider later changes nothing; another scheme without a
connection is fsspec's own filesystem with the host's ambient credentials.

Files that must stay local (the zip and launcher spark-submit is handed, the JVM class archive, a Spark job's plan
and report while it runs) go under ``local_dir``: the work dir itself when it is local, else
``$KFERRY_LOCAL_DIR`` or ``$AIRFLOW_HOME/kafka-ferry-local``.

Imports no Airflow until a URL is used: the Spark job's driver and workers write local files through here.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Union, cast

from kafka_ferry.core.common.failures import Permanent

if TYPE_CHECKING:
    from airflow.sdk import ObjectStoragePath
    from typing_extensions import TypeIs  # typing's is 3.13's; only the checker reads it (no import at run time)

WORK_DIR_ENV = "KFERRY_WORK_DIR"
CONN_ID_ENV = "KFERRY_WORK_DIR_CONN_ID"
LOCAL_DIR_ENV = "KFERRY_LOCAL_DIR"
SECTION = "kafka_ferry"  # Airflow settings: [kafka_ferry] work_dir, work_dir_conn_id

StoragePath = Union[Path, "ObjectStoragePath"]

# scheme://rest; the scheme as RFC 3986 spells it. A Windows drive letter is not a scheme here (no '//').
_URL = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*)://(?P<rest>.*)", re.DOTALL)
_S3_SCHEMES = frozenset({"s3", "s3a"})


class WorkDirError(Permanent, ValueError):
    """The work dir setting cannot be used as it is; the message names the setting, the value and the cause."""


def _airflow_option(key: str) -> str | None:
    try:
        from airflow.sdk.configuration import conf
    except ImportError:  # a Spark job's host without Airflow: the environment is the only setting there
        return None
    return conf.get(SECTION, key, fallback=None) or None


def setting(environ: Mapping[str, str] | None = None) -> tuple[str, str | None]:
    """(the work base as set, the connection id) - see the module's docstring for the order."""
    env = os.environ if environ is None else environ
    base = env.get(WORK_DIR_ENV) or (_airflow_option("work_dir") if environ is None else None)
    conn_id = env.get(CONN_ID_ENV) or (_airflow_option("work_dir_conn_id") if environ is None else None)
    if not base:
        base = str(Path(env.get("AIRFLOW_HOME") or Path.home() / "airflow") / "kafka-ferry")
    return base, conn_id or None


def work_base(environ: Mapping[str, str] | None = None) -> StoragePath:
    """The directory every migration's work dir is in."""
    base, conn_id = setting(environ)
    match = _URL.fullmatch(base)
    if match and match["scheme"].lower() == "file":
        return Path("/" + match["rest"].lstrip("/"))  # a local directory spelled as a URL: written as one
    if match:
        return object_path(base.rstrip("/"), conn_id, origin=f"{WORK_DIR_ENV} / [{SECTION}] work_dir")
    return Path(base)


def work_dir(migration: str, environ: Mapping[str, str] | None = None) -> StoragePath:
    """Where one migration's plans and reports go: ``<work base>/<migration>``."""
    return work_base(environ) / migration


def is_local(path: object) -> TypeIs[Path]:
    """A local file (a ``Path``); else an ``ObjectStoragePath`` (the type checker narrows both ways)."""
    return isinstance(path, Path)


def local_base(environ: Mapping[str, str] | None = None) -> Path:
    """Where files that must be local files go: the work base when it is local, else a local directory."""
    base = work_base(environ)
    if is_local(base):
        return base
    env = os.environ if environ is None else environ
    return Path(env.get(LOCAL_DIR_ENV) or Path(env.get("AIRFLOW_HOME") or Path.home() / "airflow")
                / "kafka-ferry-local")


def local_dir(migration: str, environ: Mapping[str, str] | None = None) -> Path:
    return local_base(environ) / migration


def as_path(path: str | os.PathLike | StoragePath) -> StoragePath:
    """A path given as text (an XCom value, a CLI argument) back as the kind of path that wrote it."""
    if isinstance(path, Path) or type(path).__name__ == "ObjectStoragePath":
        return path  # type: ignore[return-value]
    # an ObjectStoragePath went back above (matched by name: Airflow is not imported here); left: text or PathLike
    text = path if isinstance(path, str) else os.fspath(cast("os.PathLike[str]", path))
    match = _URL.fullmatch(text)
    if not match:
        return Path(text)
    # str() of an ObjectStoragePath with a connection is scheme://<conn id>@bucket/key: the id, never a secret
    netloc = match["rest"].split("/", 1)[0]
    conn_id, _, _ = netloc.rpartition("@")
    if conn_id:
        text = f"{match['scheme']}://{match['rest'][len(conn_id) + 1:]}"
    configured = setting()[1]
    if (conn_id or None) != configured:
        # the connection comes from the configuration only: a path handed between tasks or typed in (XCom, conf)
        # never picks which store's credentials a task uses (issue 36)
        raise WorkDirError(f"a stored path names connection {conn_id or None!r}, not the work dir's "
                           f"({configured!r}, from {CONN_ID_ENV} / [{SECTION}] work_dir_conn_id): refused; the work "
                           "dir's connection is never taken from a path")
    return object_path(text, configured, origin="a stored path")


def object_path(url: str, conn_id: str | None, origin: str) -> ObjectStoragePath:
    """``url`` as an ObjectStoragePath whose filesystem is attached (and authenticated through ``conn_id``)."""
    match = _URL.fullmatch(url)
    if not match:
        raise WorkDirError(f"{origin}: {url!r} is not a URL")
    netloc = match["rest"].split("/", 1)[0]
    if "@" in netloc or "?" in url or "#" in url:
        # never echo the value: it may hold a secret
        raise WorkDirError(f"{origin}: the {match['scheme']}:// URL has a user part, a query or a fragment; "
                           f"credentials and options go in the Airflow connection named by {CONN_ID_ENV} / "
                           f"[{SECTION}] work_dir_conn_id, never in the URL")
    scheme = match["scheme"].lower()
    from airflow.sdk import ObjectStoragePath
    from airflow.sdk.io import attach, has_fs

    if not has_fs(scheme):
        # attach before the path is made: ObjectStoragePath takes the attached store for (scheme, conn_id)
        attach(scheme, conn_id, fs=_filesystem(scheme, conn_id, origin))
    return ObjectStoragePath(url, conn_id=conn_id)


def _filesystem(scheme: str, conn_id: str | None, origin: str):
    """The fsspec filesystem for a scheme no installed Airflow provider serves."""
    if scheme in _S3_SCHEMES:
        return _s3_filesystem(conn_id)
    if conn_id:
        raise WorkDirError(f"{origin}: no Airflow provider installed serves {scheme}:// with a connection "
                           f"('{conn_id}'); install the provider that does, or use s3://")
    import fsspec

    try:
        return fsspec.filesystem(scheme)
    except (ImportError, ValueError) as exc:
        raise WorkDirError(f"{origin}: no filesystem for {scheme}:// ({exc})") from None


def _s3_filesystem(conn_id: str | None):
    """s3fs from an ``aws``-style Connection (the Amazon provider's fields); ambient credentials without one."""
    from s3fs import S3FileSystem

    # no listings cache: the API server lists and stats the work dir for as long as it runs, and a cached listing
    # would hide every page and overview row written after it
    if not conn_id:
        return S3FileSystem(use_listings_cache=False)
    from airflow.sdk import BaseHook

    conn = BaseHook.get_connection(conn_id)
    extra = conn.extra_dejson
    service = (extra.get("service_config") or {}).get("s3") or {}
    endpoint = extra.get("endpoint_url") or service.get("endpoint_url") or None
    client_kwargs = {"region_name": extra["region_name"]} if extra.get("region_name") else {}
    return S3FileSystem(key=conn.login or None, secret=conn.password or None,
                        token=extra.get("aws_session_token") or None, endpoint_url=endpoint,
                        client_kwargs=client_kwargs, config_kwargs=dict(extra.get("config_kwargs") or {}),
                        use_listings_cache=False)


def fresh(path: StoragePath) -> StoragePath:
    """``path`` with its filesystem's cached listings dropped (a provider's filesystem may cache them): for a
    reader that runs long, the API server, so what a task wrote since is seen."""
    if not is_local(path):
        path.fs.invalidate_cache()
    return path


def write_text(path: StoragePath, text: str) -> StoragePath:
    """Write a whole file (UTF-8); a reader sees the old content or the new, never a part."""
    return write_bytes(path, text.encode("utf-8"))


def write_bytes(path: StoragePath, data: bytes) -> StoragePath:
    """Write a whole file of exactly ``data`` (an evidence bundle's files: their digests are of their bytes); a
    reader sees the old content or the new, never a part."""
    if is_local(path):
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_bytes(data)
        tmp.replace(path)
    else:  # one PUT: an object is replaced whole (and "directories" need no creating)
        path.write_bytes(data)
    return path


def read_text(path: StoragePath) -> str:
    return path.read_text()


def remove(path: StoragePath) -> None:
    """Delete a file if it is there."""
    try:
        path.unlink()
    except FileNotFoundError:
        pass


def copy_file(source: StoragePath, target: StoragePath) -> StoragePath:
    """Stage a file between the store and a local directory (either way); the target is written whole."""
    if is_local(target):
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(target.name + ".tmp")
        tmp.write_bytes(source.read_bytes())
        tmp.replace(target)
    else:
        target.write_bytes(source.read_bytes())
    return target
