"""Zip the kafka_ferry package for spark-submit's ``--py-files``, so executors import exactly this code.

Executors on a cluster do not have the Airflow host's install; the zip is rebuilt from the package the
submitting process imports, named after its content hash so concurrent or repeated builds never
overwrite a zip a running job reads.

    python -m kafka_ferry.copy.packaging OUT_DIR
"""

from __future__ import annotations

import hashlib
import io
import os
import sys
import zipfile
from pathlib import Path

import kafka_ferry

FIXED_TIME = (2020, 1, 1, 0, 0, 0)  # same sources -> same bytes -> same name


def package_files(root: Path | None = None) -> list[tuple[Path, str]]:
    """(file, name inside the zip) of every .py file of the package, sorted."""
    root = Path(kafka_ferry.__file__).resolve().parent if root is None else root
    files = []
    for path in sorted(root.rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        files.append((path, f"{root.name}/{path.relative_to(root).as_posix()}"))
    return files


def build_package_zip(out_dir: str | Path) -> Path:
    """Write ``kafka_ferry-<hash>.zip`` into out_dir (reused when present) and return its path."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
        for path, name in package_files():
            info = zipfile.ZipInfo(name, FIXED_TIME)
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, path.read_bytes())
    data = buffer.getvalue()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / f"kafka_ferry-{hashlib.sha256(data).hexdigest()[:16]}.zip"
    if not target.exists():
        tmp = target.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_bytes(data)
        tmp.replace(target)
    return target


LAUNCHER = "kafka_ferry_copy_batch.py"
LAUNCHER_SOURCE = ("# spark-submit's application file: the copy job is in the package (--py-files or installed)\n"
                   "import sys\n\nfrom kafka_ferry.copy.spark_job import main\n\nsys.exit(main())\n")


def write_launcher(out_dir: str | Path) -> Path:
    """The application file spark-submit runs: two lines importing the packaged job.

    Why not the module's own path: run as a script, a file's folder comes first on sys.path, and a
    package folder's modules would shadow same-named ones elsewhere; a launcher in its own folder cannot.
    """
    target = Path(out_dir) / LAUNCHER
    target.parent.mkdir(parents=True, exist_ok=True)
    if not target.exists() or target.read_text() != LAUNCHER_SOURCE:
        tmp = target.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(LAUNCHER_SOURCE)
        tmp.replace(target)
    return target


if __name__ == "__main__":
    print(build_package_zip(sys.argv[1] if len(sys.argv) > 1 else "."))
