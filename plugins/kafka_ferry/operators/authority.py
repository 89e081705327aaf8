"""Who may cut over, for tasks and the CLI: the tenant's promoters from the tenants file, the run's triggering user
and, when the list names roles, that user's roles (``core.cutover.authority`` decides; this module only finds).

Where the roles come from: the FAB auth manager keeps users and roles in the metadata DB, which Airflow 3 closes to
task workers (``block_orm_access``), and the Task SDK offers no user lookup. So a task asks the auth manager's own
REST API, as any client would: it logs in (``POST /auth/token``) with the credentials of an Airflow connection of
ours (``kafka_ferry_auth_api`` by default, ``[kafka_ferry] auth_api_connection_id``: type http, the API server's
URL, a service user whose only permission is ``can_read`` on ``Users``) and reads the user
(``GET /auth/fab/v1/users/<name>``). The CLI (``kafka-ferry``, ``dag.test`` in one process) reads the metadata DB
directly and needs no connection. A user whose roles cannot be read either way (no connection, a refused login, a
server that does not answer, an inactive user) has no roles: ``Actor.unread`` says why, and a user the list names
only through a role is refused saying so, never allowed. Credentials stay in the connection: never logged, never in
a message.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

import httpx
from airflow.sdk import BaseHook, conf
from airflow.sdk.exceptions import AirflowNotFoundException

from kafka_ferry.core.cutover.authority import Actor
from kafka_ferry.core.specs.spec import MigrationSpec
from kafka_ferry.core.specs.tenants import AIRFLOW_CONFIG, Promoters, load_tenants, tenants_file_path


def promoters_of(spec: MigrationSpec) -> tuple[Promoters | None, str]:
    """The spec's tenant's promoters (None: no tenants file, or no list) and where they were read."""
    path = tenants_file_path(configured=conf.get(*AIRFLOW_CONFIG, fallback=None))
    if path is None:
        return None, "no tenants file"
    grant = load_tenants(path).tenants.get(spec.tenant)
    return (grant.promoters if grant is not None else None), f"tenants file {path}"


log = logging.getLogger(__name__)

AUTH_API_CONFIG = ("kafka_ferry", "auth_api_connection_id")  # the connection to the auth manager's API
AUTH_API_CONN_ID = "kafka_ferry_auth_api"
AUTH_API_TIMEOUT_S = 30.0


def user_roles(user: str | None) -> tuple[tuple[str, ...] | None, str]:
    """The user's roles and, when they could not be read (None), why: from the FAB auth manager's tables where the
    metadata DB is readable (the CLI), else from its REST API (a task worker). () for an unknown user: no role."""
    if not user:
        return None, "the run records no user"
    roles = db_user_roles(user)
    if roles is not None:
        log.info("roles of user %r read from the metadata DB: %s", user, list(roles))
        return roles, ""
    return api_user_roles(user, conf.get(*AUTH_API_CONFIG, fallback=None) or AUTH_API_CONN_ID)


def db_user_roles(user: str) -> tuple[str, ...] | None:
    """The user's roles in the FAB auth manager's tables; () for an unknown user; None where they cannot be read
    (a task worker, another auth manager): never a guess."""
    try:
        from airflow import settings
        from airflow.providers.fab.auth_manager.models import User

        make_session = settings.Session
        if make_session is None:  # no ORM configured here: the roles are unknown
            return None
        session = make_session()
    except Exception:  # noqa: BLE001 - a worker's blocked ORM, no FAB provider: the roles are unknown here
        return None
    try:
        found = session.query(User).filter(User.username == user).one_or_none()
        return () if found is None else tuple(sorted(r.name for r in found.roles))
    except Exception:  # noqa: BLE001 - no FAB tables (another auth manager), a blocked ORM: unknown, not "no role"
        return None
    finally:
        session.close()


def api_base_url(connection: Any) -> str:
    """The API server's URL from an http connection: its host as a URL, or scheme (``schema``), host and port."""
    host = (connection.host or "").rstrip("/")
    if "://" in host:
        return host
    port = f":{connection.port}" if connection.port else ""
    return f"{connection.schema or 'http'}://{host}{port}"


def api_user_roles(user: str, conn_id: str) -> tuple[tuple[str, ...] | None, str]:
    """The user's roles as the FAB auth manager's REST API gives them, logged in as connection ``conn_id``'s user;
    (None, why) when they cannot be read. The password goes only into the login request's body."""
    try:
        connection = BaseHook.get_connection(conn_id)
    except AirflowNotFoundException:
        return None, (f"no Airflow connection {conn_id!r} to the auth manager's API, which a task needs to read a "
                      "user's roles (docs/security.md)")
    base = api_base_url(connection)
    if not connection.host or not connection.login:
        return None, f"connection {conn_id!r} needs the API server's URL as host and a login"
    try:
        with httpx.Client(base_url=base, timeout=AUTH_API_TIMEOUT_S) as client:
            login = client.post("/auth/token", json={"username": connection.login,
                                                     "password": connection.password or ""})
            if login.status_code not in (200, 201):
                return None, (f"connection {conn_id!r}'s user {connection.login!r} could not log in to {base} "
                              f"(HTTP {login.status_code})")
            answer = client.get(f"/auth/fab/v1/users/{quote(user, safe='')}",
                                headers={"Authorization": f"Bearer {login.json()['access_token']}"})
    except (httpx.HTTPError, ValueError, KeyError) as exc:
        return None, f"the auth manager's API at {base} did not answer ({type(exc).__name__})"
    log.info("roles of user %r read through the auth manager's API at %s: HTTP %s", user, base, answer.status_code)
    if answer.status_code == 404:
        return (), ""  # no such user: no role
    if answer.status_code in (401, 403):
        return None, (f"connection {conn_id!r}'s user {connection.login!r} may not read users at {base} (HTTP "
                      f"{answer.status_code}): give its role can_read on Users")
    if answer.status_code != 200:
        return None, f"the auth manager's API at {base} answered HTTP {answer.status_code} for user {user!r}"
    try:
        found = answer.json()
        if found.get("active") is False:
            return None, f"user {user!r} is inactive in the auth manager"
        return tuple(sorted(str(r["name"]) for r in found.get("roles") or [])), ""
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        return None, f"the auth manager's API at {base} gave an unreadable user ({type(exc).__name__})"


def run_type_of(dag_run: Any) -> str | None:
    run_type = getattr(dag_run, "run_type", None)
    return None if run_type is None else str(getattr(run_type, "value", run_type))


def actor(user: str | None, run_type: str | None, promoters: Promoters | None) -> Actor:
    """Who asks; the roles are looked up only when the list names roles and not the user (no DB read otherwise)."""
    needs_roles = promoters is not None and promoters.roles and user not in promoters.users
    if not needs_roles:
        return Actor(user, run_type)
    roles, unread = user_roles(user)
    return Actor(user, run_type, roles, unread)


def actor_of_run(context: Mapping[str, Any], promoters: Promoters | None) -> Actor:
    """The task's run: its triggering user (Airflow records it: the UI's or REST caller's user, ``--as`` of the
    CLI) and run type."""
    dag_run = context.get("dag_run")
    return actor(getattr(dag_run, "triggering_user_name", None), run_type_of(dag_run), promoters)
