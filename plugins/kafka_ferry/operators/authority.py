"""Who may cut over, for tasks and the CLI: the tenant's promoters from the tenants file, the run's triggering user
and, where Airflow's metadata DB is readable, that user's roles (``core.authority`` decides; this module only finds).

Why roles only "where readable": the FAB auth manager keeps users and roles in the metadata DB, which Airflow 3
closes to task workers (``block_orm_access``). The CLI (``kafka-ferry``, ``dag.test`` in one process) reads it; a
worker started by a scheduler does not, and then a user the list names only through a role is refused, saying so.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow.sdk import conf

from kafka_ferry.core.authority import Actor
from kafka_ferry.core.spec import MigrationSpec
from kafka_ferry.core.tenants import AIRFLOW_CONFIG, Promoters, load_tenants, tenants_file_path


def promoters_of(spec: MigrationSpec) -> tuple[Promoters | None, str]:
    """The spec's tenant's promoters (None: no tenants file, or no list) and where they were read."""
    path = tenants_file_path(configured=conf.get(*AIRFLOW_CONFIG, fallback=None))
    if path is None:
        return None, "no tenants file"
    grant = load_tenants(path).tenants.get(spec.tenant)
    return (grant.promoters if grant is not None else None), f"tenants file {path}"


def user_roles(user: str | None) -> tuple[str, ...] | None:
    """The user's roles in the FAB auth manager's tables; () for an unknown user; None where they cannot be read
    (a task worker, another auth manager): never a guess."""
    if not user:
        return None
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
    except Exception:  # noqa: BLE001 - no FAB tables (another auth manager): unknown, not "no role"
        return None
    finally:
        session.close()


def run_type_of(dag_run: Any) -> str | None:
    run_type = getattr(dag_run, "run_type", None)
    return None if run_type is None else str(getattr(run_type, "value", run_type))


def actor(user: str | None, run_type: str | None, promoters: Promoters | None) -> Actor:
    """Who asks; the roles are looked up only when the list names roles and not the user (no DB read otherwise)."""
    needs_roles = promoters is not None and promoters.roles and user not in promoters.users
    return Actor(user, run_type, user_roles(user) if needs_roles else None)


def actor_of_run(context: Mapping[str, Any], promoters: Promoters | None) -> Actor:
    """The task's run: its triggering user (Airflow records it: the UI's or REST caller's user, ``--as`` of the
    CLI) and run type."""
    dag_run = context.get("dag_run")
    return actor(getattr(dag_run, "triggering_user_name", None), run_type_of(dag_run), promoters)
