"""A Schema Registry reached through an Airflow connection of type `schemaregistry` (the first name,
`schema_registry`, still works: `core.specs.connection_types`); the hook only builds the client
(`registry.client.SchemaRegistry`) from the connection and does nothing else. The connection form's fields are
declared in `provider_info`.

Connection fields:
    host      the registry's base URL, e.g. `https://sr.example:8081` or `http://127.0.0.1:8080/apis/ccompat/v7`
              (a bare host name gets `https://`, plus `port` and `schema` as the path when set)
    login / password   HTTP basic auth (optional)
    Extra     `bearer_token` (instead of basic auth), `ca_path` (a CA bundle for TLS), `timeout_s`

The password and token never leave the client config: not in logs, errors, XCom or repr. A URL with a user part
(``http://user:secret@host``), a query or a fragment is refused, naming the connection and the field, never the
value (as object-store work dir URLs are: storage/workdir.py): errors name the URL, and credentials come from
login/password or Extra ``bearer_token`` only.
"""

from __future__ import annotations

from typing import Any

from airflow.sdk import BaseHook

from kafka_ferry.core.common.failures import Permanent
from kafka_ferry.core.specs.connection_types import SCHEMA_REGISTRY
from kafka_ferry.registry.client import RegistryConnection, SchemaRegistry, url_problem

CONN_TYPE = SCHEMA_REGISTRY


class RegistryConnectionError(Permanent, ValueError):
    """The Airflow connection cannot describe a registry; names the connection and the field, never a secret.

    Named apart from confluent-kafka's ``SchemaRegistryError`` (an error the registry answered, which
    ``registry.client`` reads): this one is raised before any request, from the connection's fields."""


class SchemaRegistryHook(BaseHook):
    """One registry per Airflow connection.

    :param schema_registry_conn_id: the Airflow connection (type ``schemaregistry``): host is the registry URL,
        login/password or Extra ``bearer_token`` the credentials.
    """

    conn_name_attr = "schema_registry_conn_id"
    default_conn_name = "schema_registry_default"
    conn_type = CONN_TYPE
    hook_name = "Schema Registry (kafka-ferry)"

    def __init__(self, schema_registry_conn_id: str = default_conn_name) -> None:
        super().__init__()
        self.schema_registry_conn_id = schema_registry_conn_id

    def registry_connection(self) -> RegistryConnection:
        conn = self.get_connection(self.schema_registry_conn_id)
        return registry_connection(self.schema_registry_conn_id, conn.host, conn.port, conn.schema, conn.login,
                                   conn.password, conn.extra_dejson)

    def get_conn(self) -> SchemaRegistry:
        return SchemaRegistry(self.registry_connection())


def registry_connection(conn_id: str, host: str | None, port: int | None, path: str | None, login: str | None,
                        password: str | None, extra: dict[str, Any]) -> RegistryConnection:
    """The registry a connection's fields describe; a missing or malformed field is named (never its secret)."""
    if not host:
        raise RegistryConnectionError(f"connection {conn_id!r}: field 'host' is empty; set it to the registry's URL")
    url = host.rstrip("/") if "://" in host else f"https://{host}"
    if "://" not in host and port:
        url += f":{port}"
    if path and "://" not in host:
        url += "/" + path.strip("/")
    problem = url_problem(url)
    if problem:  # never echo the value: it may hold a secret
        raise RegistryConnectionError(f"connection {conn_id!r}: field 'host' is refused: {problem}; credentials go in "
                                  "'login'/'password' (or Extra 'bearer_token'), never in the URL")
    if bool(login) != bool(password):
        raise RegistryConnectionError(f"connection {conn_id!r}: basic auth needs both 'login' and 'password'")
    token = extra.get("bearer_token")
    if token and login:
        raise RegistryConnectionError(f"connection {conn_id!r}: set either 'login'/'password' or Extra 'bearer_token'")
    try:
        timeout_s = float(extra.get("timeout_s", 30.0))
    except (TypeError, ValueError):
        raise RegistryConnectionError(f"connection {conn_id!r}: Extra 'timeout_s' = {extra.get('timeout_s')!r} "
                                  f"is not a number of seconds") from None
    return RegistryConnection(name=conn_id, url=url, basic_auth=(login, password) if login and password else None,
                              bearer_token=token or None, ca_path=extra.get("ca_path") or None, timeout_s=timeout_s)
