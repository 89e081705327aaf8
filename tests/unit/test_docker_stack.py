"""docker/: the image's steps replayed without Docker, and compose.yaml checked against that image and the test bed.

There is no Docker engine here. What can be checked is: the Dockerfile's COPY steps and its install step
(``pip install -c constraints.txt .``, non-editable) replayed into a scratch root, the package and the Spark
job found from that install alone, and every compose service's command resolvable in that image (or, for
the vendors' images, pinned to what the test bed runs), with ports, hosts and credentials consistent.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
DOCKER = REPO / "docker"
VENV_BIN = Path(sys.executable).parent
OUR_IMAGE = "kafka-ferry:dev"
INSTALL = "pip install --no-cache-dir -c constraints.txt ."  # the image's install step, exactly
SECRET_WORDS = ("PASSWORD", "SECRET", "FERNET", "TOKEN")


# --- the Dockerfile -------------------------------------------------------------------------------------
def dockerfile_steps() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    steps, pending = [], ""
    for line in (DOCKER / "Dockerfile").read_text().splitlines():
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        pending += line.rstrip("\\").rstrip() + " " if line.endswith("\\") else line
        if not line.endswith("\\"):
            instruction, _, args = pending.strip().partition(" ")
            steps.append((instruction.upper(), " ".join(args.split())))
            pending = ""
    return steps


def _env_of(steps) -> dict[str, str]:
    env = {}
    for instruction, args in steps:
        if instruction == "ENV":
            env.update(dict(part.split("=", 1) for part in shlex.split(args)))
    return env


@pytest.fixture(scope="module")
def image(tmp_path_factory) -> dict:
    """The image's filesystem as far as its own steps make it: COPY from the repo, the install, the cleanup.

    The install runs as in the Dockerfile (build isolation: the build backend comes from the index, as in the
    image), except that the dependencies are the constraints-pinned ones already in this venv (--no-deps) and
    the package goes to a target dir: a wheel built from the copied sources, non-editable, nothing pointing back.
    """
    root = tmp_path_factory.mktemp("image-root")
    site = root / "site-packages"
    workdir = Path("/")
    for instruction, args in dockerfile_steps():
        if instruction == "WORKDIR":
            workdir = workdir / args
        elif instruction == "COPY":
            *sources, dest = args.split()
            target = root / (workdir / dest).relative_to("/") if not dest.startswith("/") else \
                root / Path(dest).relative_to("/")
            for source in sources:
                src = REPO / source
                if src.is_dir():
                    shutil.copytree(src, target if len(sources) == 1 and not dest.endswith("/") else
                                    target / src.name, dirs_exist_ok=True)
                else:
                    to = target / src.name if dest.endswith("/") else target
                    to.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(src, to)
        elif instruction == "RUN" and "pip install" in args:
            cwd = root / workdir.relative_to("/")
            for command in args.split("&&"):
                command = command.strip()
                if command.startswith("pip install"):
                    assert command == INSTALL, command
                    extra = ["--no-deps", "--target", str(site)]
                    done = subprocess.run([sys.executable, "-m", *shlex.split(command), *extra], cwd=cwd,
                                          capture_output=True, text=True, timeout=300)
                    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
                elif command.startswith("rm -rf"):
                    for name in command.split()[2:]:
                        shutil.rmtree(cwd / name, ignore_errors=True)
    env = _env_of(dockerfile_steps())
    return {"root": root, "site": site, "env": env,
            "run_env": {**os.environ, "PYTHONPATH": str(site), "PATH": f"{VENV_BIN}{os.pathsep}{os.environ['PATH']}"}}


def in_image(image: dict, path: str) -> Path:
    return image["root"] / Path(path).relative_to("/")


def test_the_install_step_is_cis_install_without_editable_and_test_extras():
    make_install = next(line for line in (REPO / "Makefile").read_text().splitlines()
                        if "pip install" in line and "constraints.txt" in line)
    ci = shlex.split(make_install.split("-m", 1)[1])
    image = shlex.split(INSTALL)
    strip = {"-q", "--no-cache-dir", "-e"}
    assert [a for a in ci if a not in strip] == ["pip", "install", "-c", "constraints.txt", ".[test]"]
    assert [a for a in image if a not in strip] == ["pip", "install", "-c", "constraints.txt", "."]
    runs = [args for instruction, args in dockerfile_steps() if instruction == "RUN" and "pip install" in args]
    assert len(runs) == 1 and runs[0].startswith(INSTALL + " &&"), runs


def test_the_package_comes_from_the_non_editable_install_whole(image):
    installed = image["site"] / "kafka_ferry"
    ours = {p.relative_to(REPO / "plugins" / "kafka_ferry") for p in (REPO / "plugins" / "kafka_ferry").rglob("*.py")}
    theirs = {p.relative_to(installed) for p in installed.rglob("*.py")}
    assert ours == theirs, sorted(ours ^ theirs)
    assert not (in_image(image, "/opt/kafka-ferry") / "plugins").exists()  # the sources are gone from the image
    done = subprocess.run([sys.executable, "-c", "import kafka_ferry; print(kafka_ferry.__file__)"],
                          env=image["run_env"], cwd=image["root"], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == str(installed / "__init__.py"), done.stderr
    entry_points = next(image["site"].glob("kafka_ferry-*.dist-info")) / "entry_points.txt"
    assert "[airflow.plugins]\nkafka_ferry = kafka_ferry.plugin:KafkaFerryPlugin" in entry_points.read_text()


def test_the_spark_job_is_found_and_runs_from_the_installed_package(image, tmp_path):
    assert "KFERRY_COPY_APPLICATION" not in image["env"]  # nothing but the install: the job is in the package
    probe = ("import sys; from pathlib import Path; from kafka_ferry.operators.copy import _application; "
             "print(_application(Path(sys.argv[1]))); "
             "from kafka_ferry.copy.packaging import build_package_zip; print(build_package_zip(sys.argv[1]))")
    env = {k: v for k, v in image["run_env"].items() if k != "KFERRY_COPY_APPLICATION"}
    done = subprocess.run([sys.executable, "-c", probe, str(tmp_path / "packages")], capture_output=True,
                          text=True, timeout=120, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    application, package_zip = done.stdout.split()[-2:]
    assert Path(application).parent == tmp_path / "packages"  # written at run time, no repository path
    assert "kafka_ferry/copy/spark_job.py" in zipfile.ZipFile(package_zip).namelist()  # executors get the install
    job = subprocess.run([sys.executable, application, "--help"], env=env, cwd=tmp_path, capture_output=True,
                         text=True, timeout=60)
    assert job.returncode == 0 and "--plan" in job.stdout, job.stderr[-2000:]


# --- compose.yaml ---------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load((DOCKER / "compose.yaml").read_text())


def _services(compose) -> dict[str, dict]:
    return compose["services"]


def _ours(service: dict) -> bool:
    return service.get("image") == OUR_IMAGE


BIND = "${KFERRY_BIND_ADDRESS:-127.0.0.1}"


def _ports(service: dict) -> list[str]:
    """'host:container' of every published port, the bind address (checked separately) stripped."""
    return [p.removeprefix(BIND + ":") for p in service.get("ports", [])]


def _host_port(url: str) -> tuple[str, int]:
    m = re.match(r"^(?:[a-z+]+://)?(?:[^@/]*@)?([A-Za-z0-9_.-]+):(\d+)", url)
    assert m, url
    return m.group(1), int(m.group(2))


def test_every_service_of_our_image_is_built_from_the_dockerfile_and_its_command_exists_in_it(compose, image):
    airflow_argvs = []
    for name, service in _services(compose).items():
        if not _ours(service):
            continue
        assert service["build"] == {"context": "..", "dockerfile": "docker/Dockerfile"}, name
        command = service.get("command") or json.loads(image_cmd(image))
        assert isinstance(command, list), f"{name}: exec form only (no shell in between)"
        assert shutil.which(command[0], path=str(VENV_BIN)), f"{name}: {command[0]} is not installed in the image"
        if command[0] == "airflow":
            airflow_argvs.append(command[1:])
        elif command[0] == "spark-class":
            assert spark_class_exists(command[1]), f"{name}: {command[1]} is not in pyspark's jars"
        else:
            raise AssertionError(f"{name}: unexpected command {command}")
    parse = ("import json, sys\nfrom airflow.cli.cli_parser import get_parser\n"
             "for argv in json.loads(sys.argv[1]):\n    get_parser().parse_args(argv)\n")
    done = subprocess.run([sys.executable, "-c", parse, json.dumps(airflow_argvs)], capture_output=True, text=True,
                          timeout=180, env={**image["run_env"], "AIRFLOW_HOME": str(image["root"] / "airflow-home")})
    assert done.returncode == 0, f"airflow CLI refused one of {airflow_argvs}: {done.stderr[-2000:]}"
    assert sorted(a[0] for a in airflow_argvs) == ["api-server", "dag-processor", "db", "scheduler", "triggerer"]


def image_cmd(image: dict) -> str:
    return next(args for instruction, args in dockerfile_steps() if instruction == "CMD")


def spark_class_exists(class_name: str) -> bool:
    import pyspark

    entry = class_name.replace(".", "/") + ".class"
    return any(entry in zipfile.ZipFile(jar).namelist() for jar in (Path(pyspark.__file__).parent / "jars").glob(
        "spark-core_*.jar"))


def test_vendor_images_are_pinned_to_what_the_test_bed_runs(compose):
    import kafka_testbed

    images = {name: s["image"] for name, s in _services(compose).items() if not _ours(s)}
    assert images == {"postgres": "postgres:17",
                      "kafka-source": f"apache/kafka:{kafka_testbed.SOURCE.kafka_version}",
                      "kafka-destination": f"apache/kafka:{kafka_testbed.DESTINATION.kafka_version}",
                      "schema-registry": "apicurio/apicurio-registry:3.3.3",
                      "schema-registry-destination": "apicurio/apicurio-registry:3.3.3"}


def test_ports_hosts_and_connections_are_consistent(compose):
    services = _services(compose)
    published = [p.split(":")[0] for s in services.values() for p in _ports(s)]
    assert len(published) == len(set(published)), published
    for name, service in services.items():
        for dependency in service.get("depends_on", {}):
            assert dependency in services, f"{name} depends on unknown {dependency}"

    airflow = [s for n, s in services.items() if n.startswith("airflow-")]
    env = airflow[0]["environment"]
    assert all(s["environment"] == env for s in airflow), "every Airflow service shares one configuration"
    # metadata DB: the postgres service, its user, database and password variable
    pg = services["postgres"]["environment"]
    m = re.match(r"postgresql\+psycopg2://([^:]+):(\$\{[A-Z_]+[^}]*\})@([^:]+):(\d+)/(\w+)$",
                 env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"])
    assert m and (m.group(1), m.group(3), m.group(4), m.group(5)) == (pg["POSTGRES_USER"], "postgres", "5432",
                                                                       pg["POSTGRES_DB"])
    assert m.group(2).split(":")[0] == pg["POSTGRES_PASSWORD"].split(":")[0]
    # the execution API: the api-server's port, published
    api = services["airflow-api-server"]["command"]
    api_port = int(api[api.index("--port") + 1])
    assert _host_port(env["AIRFLOW__CORE__EXECUTION_API_SERVER_URL"]) == ("airflow-api-server", api_port)
    assert f"{api_port}:{api_port}" in _ports(services["airflow-api-server"])
    assert env["AIRFLOW__API__PORT"] == str(api_port)
    # Spark: the worker and the connection reach the master where it listens
    master = services["spark-master"]["command"]
    master_at = (master[master.index("--host") + 1], int(master[master.index("--port") + 1]))
    assert _host_port(services["spark-worker"]["command"][2]) == master_at
    spark_conn = json.loads(env["AIRFLOW_CONN_SPARK_LOCAL"])
    assert (spark_conn["host"].removeprefix("spark://"), spark_conn["port"]) == master_at
    webui = master[master.index("--webui-port") + 1]
    assert f"{webui}:{webui}" in _ports(services["spark-master"])
    # Kafka: each connection's bootstrap is a listener its broker advertises and binds
    for conn, side in (("AIRFLOW_CONN_KAFKA_SOURCE", "kafka-source"), ("AIRFLOW_CONN_KAFKA_DESTINATION",
                                                                        "kafka-destination")):
        bootstrap = json.loads(env[conn])["extra"]["bootstrap.servers"]
        assert bootstrap in kafka_advertised(services[side]).values(), (conn, bootstrap)
    # each registry stores on its own side's cluster, and its connection reaches its host and container port
    for registry, side, conn in (("schema-registry", "kafka-source", "AIRFLOW_CONN_SCHEMA_REGISTRY_SOURCE"),
                                 ("schema-registry-destination", "kafka-destination",
                                  "AIRFLOW_CONN_SCHEMA_REGISTRY_DESTINATION")):
        registry_bootstrap = services[registry]["environment"]["APICURIO_KAFKASQL_BOOTSTRAP_SERVERS"]
        assert registry_bootstrap in kafka_advertised(services[side]).values()
        url = json.loads(env[conn])["host"]
        assert url == f"http://{services[registry]['hostname']}:8080/apis/ccompat/v7", (conn, url)
        assert any(p.endswith(":8080") for p in _ports(services[registry])), registry
    for side in ("kafka-source", "kafka-destination"):
        kenv = services[side]["environment"]
        advertised = kafka_advertised(services[side])
        listeners = {n: int(a.rsplit(":", 1)[1]) for n, a in _listeners(kenv["KAFKA_LISTENERS"]).items()}
        for listener, address in advertised.items():
            assert listeners[listener] == _host_port(address)[1], (side, listener)
        assert _host_port(advertised["PLAINTEXT"])[0] == services[side]["hostname"] == side
        external = listeners["EXTERNAL"]
        assert f"{external}:{external}" in _ports(services[side]) and advertised["EXTERNAL"] == f"localhost:{external}"
        voter = kenv["KAFKA_CONTROLLER_QUORUM_VOTERS"]
        assert voter == f"{kenv['KAFKA_NODE_ID']}@{side}:{listeners['CONTROLLER']}"
        assert set(listeners) == set(kenv["KAFKA_LISTENER_SECURITY_PROTOCOL_MAP"].replace(":", ",").split(",")[::2])


def _listeners(value: str) -> dict[str, str]:
    return dict(part.split("://", 1) for part in value.split(","))


def kafka_advertised(service: dict) -> dict[str, str]:
    return _listeners(service["environment"]["KAFKA_ADVERTISED_LISTENERS"])


def test_the_demo_specs_connections_are_defined_and_no_secret_is_written_in_the_file(compose):
    services = _services(compose)
    env = services["airflow-scheduler"]["environment"]
    wanted = set()
    for spec in (REPO / "dags" / "migrations").glob("*.yaml"):
        text = yaml.safe_load(spec.read_text())
        registries = text.get("schema_registry") or {}
        wanted |= {registries[k] for k in ("source_connection_id", "destination_connection_id") if k in registries}
        wanted |= {text["source"]["connection_id"], text["destination"]["connection_id"],
                   text["copy"]["spark_connection_id"]}
    assert {f"AIRFLOW_CONN_{c.upper()}" for c in wanted} <= set(env)
    variables = set()
    for name, service in services.items():
        for key, value in (service.get("environment") or {}).items():
            for var in re.findall(r"\$\{([A-Z_]+)", str(value)):
                variables.add(var)
            if any(word in key for word in SECRET_WORDS):
                assert re.fullmatch(r"\$\{[A-Z_]+:\?[^}]+\}", str(value)), f"{name}: {key} is written in the file"
            elif "://" in str(value) and "@" in str(value):
                assert re.search(r":\$\{[A-Z_]+:\?[^}]+\}@", str(value)), f"{name}: {key} carries a password"
    example = dict(line.split("=", 1) for line in (DOCKER / "env.example").read_text().splitlines()
                   if line and not line.startswith("#"))
    assert set(example) == variables
    assert "docker/.env" in (REPO / ".gitignore").read_text().split()


# --- hardening (issue 24) ---------------------------------------------------------------------------------
def test_every_published_port_is_bound_to_the_loopback_by_default(compose):
    ports = [(name, p) for name, s in _services(compose).items() for p in s.get("ports", [])]
    assert ports, "the stack publishes the API server, Kafka's external listeners, the registries and the UI"
    for name, port in ports:
        assert isinstance(port, str) and port.startswith(BIND + ":") and port.count(":") == 3, (name, port)


def test_every_container_runs_as_a_non_root_user(compose):
    for name, service in _services(compose).items():
        user = str(service.get("user", "root"))
        assert user.split(":")[0] not in ("root", "0", ""), f"{name} runs as root"
    steps = dockerfile_steps()
    users = [args for instruction, args in steps if instruction == "USER"]
    assert users and users[-1] not in ("root", "0"), "the image's last USER is root"
    assert _services(compose)["airflow-scheduler"]["user"] == f"{users[-1]}:0"


def test_only_the_scheduler_mounts_the_work_dir_read_write(compose):
    for name, service in _services(compose).items():
        for volume in service.get("volumes", []):
            if volume.startswith("kferry-work:"):
                writable = not volume.endswith(":ro")
                assert writable == (name == "airflow-scheduler"), (name, volume)
    assert "kferry-work:/opt/airflow/kafka-ferry:ro" in _services(compose)["airflow-api-server"]["volumes"]


# --- Spark's RPC (issue 36 case 6) ---------------------------------------------------------------------------
def test_spark_rpc_is_authenticated_and_encrypted_wherever_spark_runs_so_the_copy_task_accepts_the_master(compose,
                                                                                                      tmp_path):
    """The connection's master (spark://spark-master:7077) is off the loopback: the copy task refuses it unless
    the conf spark-submit reads turns on spark.authenticate and spark.network.crypto.enabled. The same
    spark-defaults.conf reaches the tasks, the master and the worker, with the secret from docker/.env."""
    from kafka_ferry.copy.jvm_archive import spark_defaults
    from kafka_ferry.core.batches.spark_credentials import check_standalone_master

    services = _services(compose)
    content = compose["configs"]["spark-defaults"]["content"]
    spark_users = [n for n, s in services.items() if _ours(s) and n != "airflow-init"]
    assert sorted(spark_users) == ["airflow-api-server", "airflow-dag-processor", "airflow-scheduler",
                                   "airflow-triggerer", "spark-master", "spark-worker"]
    for name in spark_users:
        env, configs = services[name]["environment"], services[name]["configs"]
        conf_dir = Path(env["SPARK_CONF_DIR"])
        assert {"source": "spark-defaults", "target": str(conf_dir / "spark-defaults.conf")} in configs, name
        assert re.fullmatch(r"\$\{SPARK_AUTH_SECRET:\?[^}]+\}", env["_SPARK_AUTH_SECRET"]), name
    (tmp_path / "spark-defaults.conf").write_text(content)
    conf = spark_defaults({"SPARK_CONF_DIR": str(tmp_path)})
    assert conf == {"spark.authenticate": "true", "spark.network.crypto.enabled": "true"}
    spark_conn = json.loads(services["airflow-scheduler"]["environment"]["AIRFLOW_CONN_SPARK_LOCAL"])
    master = f"{spark_conn['host']}:{spark_conn['port']}"
    check_standalone_master(master, conf)  # accepted: what the copy task checks before submitting
    with pytest.raises(ValueError, match="spark.authenticate and spark.network.crypto.enabled"):
        check_standalone_master(master, {})  # and without the file it would be refused


# --- a real auth manager (issue 36 case 9) --------------------------------------------------------------------
def test_the_stack_uses_an_auth_manager_with_per_dag_roles_and_no_built_in_users(compose):
    """SimpleAuthManager (dev-only, every user sees every DAG, admin:admin) is gone: the FAB provider's manager,
    installed with the package, whose roles carry per-DAG permissions (tests/e2e/test_tenant_roles.py)."""
    import importlib.util

    from airflow_stack import FAB_AUTH_MANAGER  # what the e2e stack runs with auth="fab"

    env = _services(compose)["airflow-api-server"]["environment"]
    assert env["AIRFLOW__CORE__AUTH_MANAGER"] == FAB_AUTH_MANAGER
    module, _, name = FAB_AUTH_MANAGER.rpartition(".")
    spec = importlib.util.find_spec(module)  # installed (not imported here: its Flask app warns on import)
    assert spec is not None and spec.origin is not None and f"class {name}(" in Path(spec.origin).read_text()
    assert not any(key.startswith("AIRFLOW__CORE__SIMPLE_AUTH_MANAGER") for key in env)
    pins = dict(line.split("==") for line in (REPO / "constraints.txt").read_text().splitlines()
                if "==" in line and not line.startswith("#"))
    assert "apache-airflow-providers-fab" in pins and "apache-airflow-providers-fab" in (
        REPO / "pyproject.toml").read_text()
