"""Build a Go command once from the Go module proxy into the test bed's binary cache (the AxonOps registry, SeaweedFS).

The module's source is downloaded with `go mod download` (the proxy this workplace reaches), copied to a writable
directory, built there and renamed into place, so a build killed half-way never leaves a binary that looks done.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path


def go_binary(target: Path, module: str, version: str, package: str, build_flags: Sequence[str] = ()) -> Path:
    """``target`` if built before; otherwise ``go build <build_flags> -o target <package>`` in ``module@version``."""
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    go = os.environ.get("KFERRY_GO", shutil.which("go") or "go")
    print(f"building {module} {version} from the Go module proxy ...", flush=True)
    info = json.loads(subprocess.run([go, "mod", "download", "-json", f"{module}@{version}"],
                                     check=True, capture_output=True, text=True, cwd=tempfile.gettempdir()).stdout)
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "src"
        shutil.copytree(info["Dir"], src)
        subprocess.run(["chmod", "-R", "u+w", str(src)], check=True)
        partial = target.with_suffix(".partial")
        subprocess.run([go, "build", *build_flags, "-o", str(partial), package], check=True, cwd=src)
        partial.rename(target)
    return target
