"""The exact spark-submit command and confs the copy task builds per master: no secret in any of them.

Kubernetes: the pods read the configs from a Secret (secretKeyRef confs). YARN: a 0600 credentials file in a
directory of its own, shipped with --files, named by a (public) env var, removed after the run. Local and
spark://: the spark-submit process's environment only.
"""

from __future__ import annotations

import json
import os
import re
import stat
import zipfile
from pathlib import Path

import pytest
import yaml

BATCH_ID = "batch-" + "0" * 20  # the shape the planner gives (copy.plan.BATCH_ID)
PASSWORD = "pw-never-on-a-command-line-7c1f"
SECURE_RPC = {"spark.authenticate": "true", "spark.network.crypto.enabled": "true"}  # spark:// off the loopback
DRIVER_OPTIONS = "spark.driver.extraJavaOptions"


class _TI:
    def __init__(self, value):
        self.value = value

    def xcom_pull(self, task_ids):
        return self.value


@pytest.fixture()
def submitted(monkeypatch, tmp_path):
    """Runs the copy task for a master; returns what spark-submit would have been given (nothing runs)."""
    from airflow.providers.apache.spark.hooks import spark_submit
    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

    # The provider checks for the cncf-kubernetes provider's client on k8s:// masters (a deployment installs it);
    # nothing here talks to Kubernetes.
    monkeypatch.setattr(spark_submit, "kube_client", object(), raising=False)

    monkeypatch.setenv("KFERRY_WORK_DIR", str(tmp_path / "work"))
    monkeypatch.setenv("KFERRY_JVM_ARCHIVE_DIR", str(tmp_path / "jvm"))
    install = tmp_path / "spark"  # a Spark install as spark-submit finds it: jars, and its Python library as a zip
    (install / "jars").mkdir(parents=True)
    (install / "python" / "lib").mkdir(parents=True)
    with zipfile.ZipFile(install / "python" / "lib" / "pyspark.zip", "w") as zf:
        zf.writestr("pyspark/__init__.py", "VERSION = 'test'\n")
    monkeypatch.setenv("SPARK_HOME", str(install))
    for conn in ("kf_u_source", "kf_u_destination"):
        monkeypatch.setenv(f"AIRFLOW_CONN_{conn.upper()}", json.dumps({"conn_type": "kafka", "extra": {
            "bootstrap.servers": "b:9094", "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": "mig", "sasl.password": PASSWORD}}))
    seen = {}

    def fake_submit(hook, application="", **kwargs):
        seen["command"] = hook._build_spark_submit_command(application)
        seen["env"] = dict(hook._env or {})
        path = seen["env"].get("KFERRY_CLUSTER_CONFIGS_FILE")
        if path:
            seen["file_mode"] = stat.S_IMODE(os.stat(path).st_mode)
            seen["dir_mode"] = stat.S_IMODE(os.stat(Path(path).parent).st_mode)
            seen["file_text"] = Path(path).read_text()
        dump = re.search(r"-XX:ArchiveClassesAtExit=(\S+)", _conf(seen["command"]).get(DRIVER_OPTIONS, ""))
        if dump:  # what the driver JVM writes when it exits
            Path(dump.group(1)).write_bytes(b"archived classes")
        return None

    monkeypatch.setattr(SparkSubmitHook, "submit", fake_submit)

    def run(master: str, conf: dict | None = None, summary: dict | None = None, **copy_settings) -> dict:
        from kafka_ferry.operators.copy import CopyBatchSparkOperator

        if master.startswith("spark://") and conf is None:
            conf = dict(SECURE_RPC)  # what a standalone master off the loopback needs (tested on its own below)

        monkeypatch.setenv("AIRFLOW_CONN_KF_U_SPARK", json.dumps({"conn_type": "spark", "host": master}))
        spec_path = tmp_path / "m.yaml"
        spec_path.write_text(yaml.safe_dump({
            "name": "m", "tenant": "t", "source": {"connection_id": "kf_u_source", "alias": "a"},
            "destination": {"connection_id": "kf_u_destination", "alias": "b"}, "topics": {"include": ["x"]},
            "copy": {"spark_connection_id": "kf_u_spark", **copy_settings}}))
        summary = summary or {"empty": False, "batch_id": BATCH_ID}  # files derived from the spec and the batch id
        op = CopyBatchSparkOperator(task_id="copy_batch", spec_path=str(spec_path), conn_id="kf_u_spark", conf=conf)
        op.execute({"ti": _TI(summary)})
        seen["operator_after"] = (op.env_vars, op.conf, op.files)
        return seen

    return run


def _conf(command: list[str]) -> dict[str, str]:
    return dict(command[i + 1].split("=", 1) for i, arg in enumerate(command) if arg == "--conf")


def test_kubernetes_reads_the_configs_from_a_secret_and_no_secret_reaches_the_command(submitted):
    seen = submitted("k8s://https://k8s.example:6443", kubernetes_credentials_secret="kafka-ferry-creds:configs")
    conf = _conf(seen["command"])
    assert conf["spark.kubernetes.driver.secretKeyRef.KFERRY_CLUSTER_CONFIGS"] == "kafka-ferry-creds:configs"
    assert conf["spark.kubernetes.executor.secretKeyRef.KFERRY_CLUSTER_CONFIGS"] == "kafka-ferry-creds:configs"
    assert seen["command"][seen["command"].index("--master") + 1] == "k8s://https://k8s.example:6443"
    assert PASSWORD not in " ".join(seen["command"]) and PASSWORD not in json.dumps(seen["env"])
    assert "KFERRY_CLUSTER_CONFIGS" not in seen["env"]  # the worker never even builds the value


def test_kubernetes_without_a_secret_is_refused_naming_the_field(submitted):
    from airflow.sdk.exceptions import AirflowFailException

    with pytest.raises(AirflowFailException, match="copy.kubernetes_credentials_secret"):
        submitted("k8s://https://k8s.example:6443")


def test_yarn_ships_a_0600_credentials_file_and_removes_it(submitted):
    seen = submitted("yarn")
    command = seen["command"]
    path = seen["env"]["KFERRY_CLUSTER_CONFIGS_FILE"]
    assert command[command.index("--files") + 1].split(",")[0] == path
    assert Path(path).name == "kferry-credentials.json"
    assert _conf(command)["spark.yarn.appMasterEnv.KFERRY_CLUSTER_CONFIGS_FILE"] == path  # a path, not a secret
    assert (seen["file_mode"], seen["dir_mode"]) == (0o600, 0o700)
    assert json.loads(seen["file_text"])["source"]["sasl.password"] == PASSWORD
    assert PASSWORD not in " ".join(command) and PASSWORD not in json.dumps(seen["env"])
    assert not Path(path).exists() and not Path(path).parent.exists()  # removed after the run
    assert seen["operator_after"] == (None, {}, None) or PASSWORD not in json.dumps(seen["operator_after"])


def test_local_master_passes_the_configs_in_the_process_environment_only(submitted):
    seen = submitted("local[2]")
    assert json.loads(seen["env"]["KFERRY_CLUSTER_CONFIGS"])["destination"]["sasl.password"] == PASSWORD
    assert PASSWORD not in " ".join(seen["command"]) and "--files" not in seen["command"]


def test_the_job_reads_the_file_by_path_or_by_its_name_in_the_container_cwd(tmp_path, monkeypatch):
    from kafka_ferry.kafka.configs import load_cluster_configs

    configs = {"source": {"bootstrap.servers": "s:1"}, "destination": {"bootstrap.servers": "d:1"}}
    (tmp_path / "kferry-credentials.json").write_text(json.dumps(configs))
    assert load_cluster_configs({"KFERRY_CLUSTER_CONFIGS_FILE": str(tmp_path / "kferry-credentials.json")}) == configs
    monkeypatch.chdir(tmp_path)  # YARN cluster mode: --files localizes it into the container's cwd
    assert load_cluster_configs({"KFERRY_CLUSTER_CONFIGS_FILE": "/gone/on/the/worker/kferry-credentials.json"}) == \
        configs


# --- the driver JVM's start (kafka_ferry/core/batches/driver_jvm.py)
# ------------------------------------------------------
def test_a_local_driver_writes_its_class_archive_once_and_later_batches_read_it(submitted, tmp_path):
    first = _conf(submitted("local[2]")["command"])[DRIVER_OPTIONS]
    found = re.search(r"-XX:ArchiveClassesAtExit=(\S+)", first)
    assert found is not None, first
    dump = found.group(1)
    assert first.startswith("-XX:TieredStopAtLevel=1 ") and Path(dump).parent == tmp_path / "jvm"
    entries = sorted((tmp_path / "jvm").iterdir(), key=lambda p: p.suffix)
    archives = [e for e in entries if e.suffix == ".jsa"]
    assert [e.suffix for e in entries] == ["", ".jsa"] and archives[0].read_bytes() == b"archived classes"
    seen = submitted("local[2]")
    assert _conf(seen["command"])[DRIVER_OPTIONS] == f"-XX:TieredStopAtLevel=1 -XX:SharedArchiveFile={archives[0]}"
    assert seen["operator_after"][1] in (None, {})  # the operator's own conf is as it was before the run
    assert sorted((tmp_path / "jvm").iterdir(), key=lambda p: p.suffix) == entries  # nothing built twice


def test_a_local_driver_runs_from_the_installs_compiled_mirror(submitted, tmp_path):
    """spark-submit gets SPARK_HOME = the install's mirror: its zips carry bytecode, everything else is the
    install's own (copy/spark_home.py); the operator's own environment is as it was after the run."""
    seen = submitted("local[2]")
    home = Path(seen["env"]["SPARK_HOME"])
    assert home.parent == tmp_path / "jvm" and home.name.startswith("spark-home-")
    assert (home / "jars").resolve() == (tmp_path / "spark" / "jars").resolve() and (home / "jars").is_symlink()
    names = zipfile.ZipFile(home / "python" / "lib" / "pyspark.zip").namelist()
    assert names == ["pyspark/__init__.py", "pyspark/__init__.pyc"]
    assert "SPARK_HOME" not in (seen["operator_after"][0] or {})


@pytest.mark.parametrize("master", ["yarn", "k8s://https://k8s.example:6443"])
def test_a_driver_elsewhere_keeps_the_installs_spark_home(submitted, master):
    settings = {"kubernetes_credentials_secret": "kafka-ferry-creds:configs"} if master.startswith("k8s") else {}
    assert "SPARK_HOME" not in submitted(master, **settings)["env"]


def test_the_tasks_own_driver_options_are_kept_after_ours(submitted):
    theirs = {DRIVER_OPTIONS: "-Xmx3g -Dwho=ops", "spark.ui.enabled": "false", **SECURE_RPC}
    seen = submitted("spark://m:7077", conf=theirs)
    conf = _conf(seen["command"])
    assert conf[DRIVER_OPTIONS].startswith("-XX:TieredStopAtLevel=1 -XX:ArchiveClassesAtExit=")
    assert conf[DRIVER_OPTIONS].endswith(" -Xmx3g -Dwho=ops") and conf["spark.ui.enabled"] == "false"
    assert seen["operator_after"][1] == theirs


def test_spark_defaults_driver_options_are_kept_after_ours(submitted, tmp_path, monkeypatch):
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "spark-defaults.conf").write_text("spark.driver.extraJavaOptions -Dfrom=defaults\n")
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path / "conf"))
    assert _conf(submitted("local[2]")["command"])[DRIVER_OPTIONS].endswith(" -Dfrom=defaults")


@pytest.mark.parametrize(("master", "settings"), [
    ("k8s://https://k8s.example:6443", {"kubernetes_credentials_secret": "kafka-ferry-creds:configs"}),
    ("yarn", {}), ("local[2]", {"fast_driver_start": False})])
def test_a_driver_elsewhere_or_a_spec_that_says_no_gets_no_driver_options(submitted, tmp_path, master, settings):
    assert DRIVER_OPTIONS not in _conf(submitted(master, **settings)["command"])
    assert not (tmp_path / "jvm").exists()


def test_a_failure_after_the_secret_was_built_leaves_no_credentials_dir_behind(
        submitted, tmp_path, monkeypatch):
    import tempfile

    from kafka_ferry.copy.jvm_archive import DriverArchive

    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))

    def broken(self, *args):
        raise RuntimeError("archive dir not writable")

    monkeypatch.setattr(DriverArchive, "start", broken)
    with pytest.raises(RuntimeError, match="not writable"):
        submitted("local[2]")
    with pytest.raises(Exception, match="copy.kubernetes_credentials_secret"):
        submitted("k8s://https://k8s.example:6443")
    assert list(scratch.iterdir()) == []  # both runs' credentials dirs are gone


# --- every master kind, decided as the Spark provider's hook resolves the master (issue 24) --------------------
SECRET_REF = {"kubernetes_credentials_secret": "kafka-ferry-creds:configs"}


@pytest.mark.parametrize(("master", "settings", "mode"), [
    ("local[*]", {}, "env"),
    ("local[2]", {"credentials_file": True}, "file"),
    ("spark://m.corp:7077", {}, "env"),
    # the provider treats any master containing "yarn" as YARN and copies env_vars onto the command line
    ("spark://yarn-gw01.corp:7077", {}, "file"),
    ("spark://local-yarn.corp:7077", {}, "file"),
    ("yarn", {}, "file"),
    ("yarn-client", {}, "file"),
    ("k8s://https://k8s.example:6443", SECRET_REF, "kubernetes-secret"),
    # "yarn" in a k8s master's host: the hook calls it both; the pods still read the Secret, nothing in env_vars
    ("k8s://https://yarn-api.corp:6443", SECRET_REF, "kubernetes-secret"),
])
def test_no_secret_reaches_the_command_conf_or_a_shared_environment_on_any_master(submitted, master, settings, mode):
    seen = submitted(master, **settings)
    command, env = seen["command"], seen["env"]
    assert PASSWORD not in " ".join(command)  # --conf values (Spark conf) are part of the command
    assert all(PASSWORD not in str(v) for v in _conf(command).values())
    if mode == "env":  # only the spark-submit process's own environment (/proc/<pid>/environ: its user only)
        assert not any(arg.startswith(("spark.yarn.appMasterEnv", "spark.kubernetes.driverEnv")) for arg in command)
        assert PASSWORD in env["KFERRY_CLUSTER_CONFIGS"]
    else:
        assert PASSWORD not in json.dumps(env) and "KFERRY_CLUSTER_CONFIGS" not in env
    if mode == "file":
        assert env["KFERRY_CLUSTER_CONFIGS_FILE"].endswith("/kferry-credentials.json")
        assert seen["file_mode"] == 0o600 and PASSWORD in seen["file_text"]
    if mode == "kubernetes-secret":
        assert _conf(command)["spark.kubernetes.driver.secretKeyRef.KFERRY_CLUSTER_CONFIGS"] == \
            "kafka-ferry-creds:configs"
    assert PASSWORD not in json.dumps(seen["operator_after"], default=str)


@pytest.mark.parametrize("master", ["spark://k8s-gw01.corp:7077", "local-k8s"])
def test_a_master_the_provider_misreads_as_kubernetes_is_refused(submitted, master):
    from airflow.sdk.exceptions import AirflowFailException

    with pytest.raises(AirflowFailException, match="the Spark provider treats it as Kubernetes"):
        submitted(master, **SECRET_REF)


@pytest.mark.parametrize(("extra", "password", "refused"), [
    ({}, None, "lacks TLS (use_ssl: true in the connection's extra) and a token"),
    ({"use_ssl": True}, None, "lacks a token"),
    ({}, "tok-1", "lacks TLS"),
])
def test_a_spark_connect_server_off_the_loopback_needs_tls_and_a_token(monkeypatch, tmp_path, extra, password,
                                                                       refused):
    from airflow.sdk.exceptions import AirflowFailException

    from kafka_ferry.core.batches.spark_credentials import check_connect_url
    from kafka_ferry.operators.copy import CopyBatchSparkOperator

    monkeypatch.setenv("AIRFLOW_CONN_KF_U_CONNECT", json.dumps(
        {"conn_type": "spark_connect", "host": "spark.corp", "port": 15002, "password": password, "extra": extra}))
    spec_path = tmp_path / "m.yaml"
    spec_path.write_text(yaml.safe_dump({
        "name": "m", "tenant": "t", "source": {"connection_id": "kf_u_nowhere_source", "alias": "a"},
        "destination": {"connection_id": "kf_u_nowhere_destination", "alias": "b"}, "topics": {"include": ["x"]},
        "copy": {"spark_connection_id": "kf_u_connect"}}))
    op = CopyBatchSparkOperator(task_id="copy_batch", spec_path=str(spec_path), conn_id="kf_u_connect")
    summary = {"empty": False, "batch_id": BATCH_ID}
    with pytest.raises(AirflowFailException, match="off the loopback") as raised:
        op.execute({"ti": _TI(summary)})  # refused before the plan is read or a connection looked up
    assert refused in str(raised.value) and "tok-1" not in str(raised.value)
    check_connect_url("sc://127.0.0.1:15002")  # loopback needs neither
    check_connect_url("sc://spark.corp:15002/;use_ssl=true;token=t")


# --- a standalone master off the loopback: RPC authentication and encryption on, or refused (issue 36 case 6) ----
@pytest.mark.parametrize(("master", "conf", "missing"), [
    ("spark://m.corp:7077", {}, "spark.authenticate and spark.network.crypto.enabled"),
    ("spark://m.corp:7077", {"spark.authenticate": "true"}, "spark.network.crypto.enabled"),
    ("spark://m.corp:7077", {"spark.authenticate": "false", "spark.network.crypto.enabled": "true"},
     "spark.authenticate"),
    # an HA list: one host off the loopback is enough for the configs to cross the network
    ("spark://127.0.0.1:7077,m2.corp:7077", {"spark.network.crypto.enabled": "TRUE"}, "spark.authenticate"),
    ("spark://10.0.0.7:7077", {}, "spark.authenticate and spark.network.crypto.enabled"),
])
def test_a_standalone_master_off_the_loopback_needs_rpc_authentication_and_encryption(submitted, tmp_path, master,
                                                                                     conf, missing):
    from airflow.sdk.exceptions import AirflowFailException

    with pytest.raises(AirflowFailException) as err:
        submitted(master, conf=conf)
    message = str(err.value)
    assert message.startswith(f"Spark connection 'kf_u_spark': standalone master {master!r} is off the loopback (")
    assert f"and the Spark conf lacks {missing}: both clusters' configs" in message
    assert "set spark.authenticate=true and spark.network.crypto.enabled=true" in message  # both, always named
    assert PASSWORD not in message
    assert not (tmp_path / "work").exists() and not (tmp_path / "jvm").exists()  # refused before anything is written


def test_spark_defaults_can_turn_rpc_security_on_and_loopback_needs_none(submitted, tmp_path, monkeypatch):
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "spark-defaults.conf").write_text(
        "spark.authenticate true\nspark.network.crypto.enabled=true\n")
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path / "conf"))
    seen = submitted("spark://m.corp:7077", conf={})
    assert json.loads(seen["env"]["KFERRY_CLUSTER_CONFIGS"])["source"]["sasl.password"] == PASSWORD
    monkeypatch.delenv("SPARK_CONF_DIR")
    for loopback in ("spark://127.0.0.1:7077", "spark://localhost:7077", "spark://[::1]:7077"):
        assert "KFERRY_CLUSTER_CONFIGS" in submitted(loopback, conf={})["env"]


def test_the_standalone_check_reads_every_host_of_the_master():
    from kafka_ferry.core.batches.spark_credentials import (
        InsecureChannelRefused,
        check_standalone_master,
        standalone_hosts,
    )

    assert standalone_hosts("spark://A.corp:7077, [::1]:7078,127.0.0.2") == ["a.corp", "::1", "127.0.0.2"]
    check_standalone_master("spark://127.0.0.1:7077,localhost:7078", {})
    check_standalone_master("local[2]", {})  # not a standalone master: not this check's
    check_standalone_master("yarn", {})
    with pytest.raises(InsecureChannelRefused):
        check_standalone_master("spark://127.0.0.1.corp:7077", {"spark.authenticate": "true"})
