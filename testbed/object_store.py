"""A real S3-compatible server on loopback for the work-dir-in-object-storage tests: SeaweedFS (`weed server -s3`).

Built once from its Go module like the AxonOps registry (`go mod download` of the pinned pseudo-version, then
`go build ./weed`), cached under ~/.cache/kafka-ferry/bin, never committed. One process: master, volume server,
filer and S3 gateway, every port from KFERRY_S3_PORT (the S3 endpoint; the others follow it, +1 .. +9), data and
log under the checkout's `.testbed/object-store-<port>/` (KFERRY_OBJECT_STORE_RUN_DIR). The S3 gateway accepts only the
one identity written to its config at start (KFERRY_S3_ACCESS_KEY / KFERRY_S3_SECRET_KEY, test values), so a
client without the connection's credentials is refused: what the tests check. Standard library only.

    python testbed/object_store.py up | down | status | build
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from go_build import go_binary
from kafka_testbed import recorded_pid, stop_recorded

REPO_DIR = Path(__file__).resolve().parent.parent
# Below Linux's ephemeral range (32768-60999), like the registries: a client socket cannot have taken it.
S3_PORT = int(os.environ.get("KFERRY_S3_PORT", 17300))
# one run dir per port: two lanes of a CI run (each its own port) never share a pid file
RUN_DIR = Path(os.environ.get("KFERRY_OBJECT_STORE_RUN_DIR", REPO_DIR / ".testbed" / f"object-store-{S3_PORT}"))
CACHE = Path(os.environ.get("KFERRY_REGISTRY_CACHE", Path.home() / ".cache" / "kafka-ferry"))
SEAWEEDFS_MODULE = "github.com/seaweedfs/seaweedfs"
SEAWEEDFS_VERSION = os.environ.get("KFERRY_SEAWEEDFS_VERSION", "v0.0.0-20261109003541-7506e5f91cd6")
HOST = "127.0.0.1"
ACCESS_KEY = os.environ.get("KFERRY_S3_ACCESS_KEY", "kferry-testbed")
SECRET_KEY = os.environ.get("KFERRY_S3_SECRET_KEY", "kferry-testbed-secret-0c1f")
ENDPOINT = f"http://{HOST}:{S3_PORT}"
BUCKET = "kferry-tests"  # the tests' bucket; each test works under a prefix of its own
PID_FILE = RUN_DIR / "weed.pid"
LOG_FILE = RUN_DIR / "weed.log"


def weed_binary() -> Path:
    """Build (once) the `weed` binary from the Go module proxy; about 4 minutes with `-p 2` on two cores."""
    return go_binary(CACHE / "bin" / f"weed-{SEAWEEDFS_VERSION}", SEAWEEDFS_MODULE, SEAWEEDFS_VERSION, "./weed",
                     ("-p", "2", "-ldflags", "-s -w"))


def _command(binary: Path) -> list[str]:
    port = S3_PORT
    return [str(binary), "server", f"-dir={RUN_DIR / 'data'}", f"-ip={HOST}", f"-ip.bind={HOST}",
            f"-master.port={port + 1}", f"-master.port.grpc={port + 2}",
            f"-volume.port={port + 3}", f"-volume.port.grpc={port + 4}", "-volume.max=32",
            "-master.volumeSizeLimitMB=64",
            "-filer", f"-filer.port={port + 5}", f"-filer.port.grpc={port + 6}",
            "-s3", f"-s3.port={port}", f"-s3.port.grpc={port + 7}", "-s3.port.iceberg=0", "-s3.port.lance=0",
            f"-s3.config={RUN_DIR / 's3.json'}"]


def running_pid() -> int | None:
    return recorded_pid(PID_FILE)


def answers() -> bool:
    """The S3 gateway answers (an unsigned request is refused with 403: it is up and enforcing credentials)."""
    try:
        with urllib.request.urlopen(f"{ENDPOINT}/", timeout=2) as resp:
            return resp.status < 500
    except urllib.error.HTTPError as exc:
        return exc.code < 500
    except OSError:
        return False


def start() -> None:
    if running_pid():
        print(f"object store: already running ({ENDPOINT})")
        return
    if answers():
        raise SystemExit(f"object store: port {S3_PORT} is taken by another process")
    binary = weed_binary()
    shutil.rmtree(RUN_DIR / "data", ignore_errors=True)  # a test bed's data: every start begins empty
    (RUN_DIR / "data").mkdir(parents=True, exist_ok=True)
    config = RUN_DIR / "s3.json"
    config.write_text(json.dumps({"identities": [{
        "name": "kferry", "credentials": [{"accessKey": ACCESS_KEY, "secretKey": SECRET_KEY}],
        "actions": ["Admin", "Read", "Write", "List", "Tagging"]}]}))
    config.chmod(0o600)
    with open(LOG_FILE, "ab") as out:
        proc = subprocess.Popen(_command(binary), stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                cwd=RUN_DIR, start_new_session=True)
    PID_FILE.write_text(str(proc.pid))
    print(f"object store: started SeaweedFS pid {proc.pid}, S3 on {ENDPOINT}", flush=True)


def wait_ready(timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if running_pid() is None:
            raise SystemExit(f"object store: exited; see {LOG_FILE}")
        if answers():
            print(f"object store: ready on {ENDPOINT}", flush=True)
            return
        time.sleep(0.3)
    raise SystemExit(f"object store: not ready after {timeout_s}s; see {LOG_FILE}")


def up() -> None:
    start()
    wait_ready()


def down(timeout_s: float = 20.0) -> None:
    print(f"object store: {'stopped' if stop_recorded(PID_FILE, timeout_s) else 'not running'}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", choices=["up", "down", "status", "build"])
    args = parser.parse_args(argv)
    if args.action == "up":
        up()
    elif args.action == "build":
        weed_binary()
    elif args.action == "down":
        down()
    else:
        pid = running_pid()
        print(f"object store: SeaweedFS {ENDPOINT} {f'running pid {pid}' if pid else 'stopped'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
