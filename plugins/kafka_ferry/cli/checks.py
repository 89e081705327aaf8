"""`kafka-ferry check`: every connection the spec names, one verdict each, then what the spec selects.

Why per connection: a registry or a Spark master that does not answer otherwise shows only in the middle of the
first run (after provisioning). Each connection is looked up (a missing id gets "did you mean" among the ids this
user's Airflow knows), then reached the cheapest way that proves it answers: Kafka by TCP, then the listener's
protocol (`kafka.bootstrap.listener_speaks`) and DescribeCluster; a registry by listing its subjects; a Spark
master or Connect server by TCP. Changes nothing anywhere.

``check_report`` returns the verdicts as data (``--json``); ``check`` prints them as lines.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from kafka_ferry.core.specs.connection_types import SCHEMA_REGISTRY_TYPES, SPARK_CONNECT


@dataclass
class Verdict:
    field: str  # the spec field that names the connection
    connection_id: str
    ok: bool
    detail: str
    conn_type: str | None = None


@dataclass
class CheckReport:
    spec: str
    ok: bool = True
    dag_id: str | None = None
    connections: list[Verdict] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    selected_topics: list[str] = field(default_factory=list)
    selected_groups: list[str] = field(default_factory=list)

    def fail(self, problem: str) -> CheckReport:
        self.ok = False
        self.problems.append(problem)
        return self

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def known_connection_ids() -> list[str]:
    """The connection ids this user's Airflow knows: ``AIRFLOW_CONN_<ID>`` variables and the metadata DB's."""
    ids = [k[len("AIRFLOW_CONN_"):].lower() for k in os.environ if k.startswith("AIRFLOW_CONN_")]
    try:
        from airflow.models.connection import Connection
        from airflow.utils.session import create_session
        from sqlalchemy import select

        with create_session() as session:
            ids += list(session.scalars(select(Connection.conn_id)))
    except Exception:  # noqa: BLE001 - suggestions only: a DB that cannot be read suggests from the env alone
        pass
    return sorted(set(ids))


def check_report(spec_path: Path) -> CheckReport:
    from airflow.sdk.exceptions import AirflowNotFoundException

    from kafka_ferry.cli import migrate_db
    from kafka_ferry.cli.commands import check_bindings, cluster, connection
    from kafka_ferry.core.specs.selection_check import EmptySelection
    from kafka_ferry.core.specs.spec import SpecError, load_spec
    from kafka_ferry.core.specs.spec_check import check_connections, connection_refs
    from kafka_ferry.kafka.errors import KafkaClusterError
    from kafka_ferry.provision.preflight import reach, selected

    report = CheckReport(spec=str(spec_path))
    try:
        spec = load_spec(spec_path)
        check_bindings(spec, spec_path)
    except SpecError as exc:
        return report.fail(str(exc))
    report.dag_id = spec.dag_id
    migrate_db()
    found: dict[str, Any] = {}
    for _, conn_id, _ in connection_refs(spec):
        try:
            found[conn_id] = connection(conn_id)
        except AirflowNotFoundException:
            continue
    try:
        check_connections(spec, spec_path, {k: c.conn_type for k, c in found.items()}, known_connection_ids())
    except SpecError as exc:
        return report.fail(str(exc))

    source = destination = None
    for location, conn_id, _ in connection_refs(spec):
        where = ".".join(location)
        conn = found[conn_id]
        if conn.conn_type == "kafka":
            side = cluster(conn_id)
            try:
                [info] = reach(side)  # as the pre-flight reaches it
            except KafkaClusterError as exc:
                report.connections.append(Verdict(where, conn_id, False, str(exc), conn.conn_type))
                report.ok = False
                continue
            detail = f"cluster {info.cluster_id}, {info.broker_count} broker(s)"
            report.connections.append(Verdict(where, conn_id, True, detail, conn.conn_type))
            if location[0] == "source":
                source = side
            else:
                destination = side
        elif conn.conn_type in SCHEMA_REGISTRY_TYPES:
            report.connections.append(_registry_verdict(where, conn_id, conn))
        else:
            report.connections.append(_spark_verdict(where, conn_id, conn))
    if not all(v.ok for v in report.connections):
        report.ok = False
        return report
    del destination  # reached above; what the spec selects is read from the source
    if source is None:  # check_connections requires the source cluster's connection: not reached without one
        return report.fail("the spec names no source cluster connection")
    try:
        report.selected_topics, report.selected_groups = selected(spec, source)  # as the pre-flight selects
    except (EmptySelection, KafkaClusterError) as exc:
        return report.fail(str(exc))
    return report


def _registry_verdict(where: str, conn_id: str, conn) -> Verdict:
    from kafka_ferry.hooks.schema_registry import RegistryConnectionError, registry_connection
    from kafka_ferry.registry.client import SchemaRegistry, SchemaRegistryUnavailable

    try:
        registry = SchemaRegistry(registry_connection(conn_id, conn.host, conn.port, conn.schema, conn.login,
                                                      conn.password, conn.extra_dejson))
    except RegistryConnectionError as exc:
        return Verdict(where, conn_id, False, str(exc), conn.conn_type)
    try:
        subjects = registry.subjects(include_deleted=False)
    except SchemaRegistryUnavailable as exc:
        return Verdict(where, conn_id, False, str(exc), conn.conn_type)
    finally:
        registry.close()
    return Verdict(where, conn_id, True, f"registry {registry.conn.url} answers: {len(subjects)} subject(s)",
                   conn.conn_type)


def _spark_verdict(where: str, conn_id: str, conn) -> Verdict:
    """A Spark master or Connect server that takes a TCP connection; local mode has nothing to reach."""
    from urllib.parse import urlparse

    from kafka_ferry.kafka.bootstrap import unreachable

    host = (conn.host or "").strip()
    if conn.conn_type == SPARK_CONNECT:
        url = urlparse(host if "://" in host else f"sc://{host}")
        address, what = f"{url.hostname}:{conn.port or url.port or 15002}", "Spark Connect server"
    elif host.startswith("local") or not host:
        return Verdict(where, conn_id, True, f"Spark master {host or 'local[*]'}: runs on the worker itself, "
                                             "nothing to reach", conn.conn_type)
    elif host.startswith(("spark://", "k8s://")):
        url = urlparse(host.removeprefix("k8s://") if host.startswith("k8s://") else host)
        default = 443 if url.scheme == "https" else 7077
        address, what = f"{url.hostname}:{conn.port or url.port or default}", f"Spark master {host}"
    else:
        return Verdict(where, conn_id, True, f"Spark master {host!r}: not reachable by address from here "
                                             "(spark-submit resolves it); not checked", conn.conn_type)
    reasons = unreachable(address)
    if reasons:
        return Verdict(where, conn_id, False, f"{what} at {address} does not answer ({reasons[address]}): check the "
                                              "connection's host and port, and that the server runs",
                       conn.conn_type)
    return Verdict(where, conn_id, True, f"{what} at {address} answers", conn.conn_type)


def _some(names: list[str], limit: int = 8) -> str:
    if not names:
        return "none"
    return ", ".join(names[:limit]) + (f" and {len(names) - limit} more" if len(names) > limit else "")


def check(spec_path: Path) -> int:
    """The report as lines: one per connection, then what the spec selects; exit 1 on any problem."""
    report = check_report(spec_path)
    for v in report.connections:
        print(f"{'ok' if v.ok else 'FAILED'}: connection {v.connection_id!r} ({v.conn_type}, {v.field}): {v.detail}")
    for problem in report.problems:
        print(problem)
    if report.ok:
        print(f"ok: {spec_path} (DAG {report.dag_id}): {len(report.selected_topics)} source topic(s) selected: "
              f"{_some(report.selected_topics)}; groups selected by name: {_some(report.selected_groups)}")
    return 0 if report.ok else 1
