"""Who may cut a tenant's migration over, and the record of who did (issue 42).

Why: typing the migration's name into the form guards against a slip, not against a person: anyone the platform
lets trigger a tenant's DAG could promote it, roll it back or reset its promotion. The tenants file may list per
tenant the Airflow users and roles allowed to (``promoters``, ``core.specs.tenants.Promoters``); the pre-flight checks
the run's triggering user (Airflow records it on the DAG run: the UI's, the REST caller's, ``kafka-ferry --as``)
before anything changes, and ``kafka-ferry reset-promotion`` (which runs no DAG) checks its ``--as`` user the same
way. Without a list, as before. A run no person triggered (scheduled, asset-triggered, a backfill, another DAG's
operator) never may, list or not: a cutover is always someone's act.

``rollback-plan`` is not in the list: it is a dry run that changes nothing, and the people who sign a cutover off
need the way back before anyone may take it.

Who did: each of those acts writes one ``act`` record in the migration's state topic (``ACT_KIND``, key
``<mode>/<run id>``): the user, the roles seen, the typed confirmation, the run id and type, when it started and
when it finished. ``record_version`` says the shape, so an evidence bundle (and any later reader) can include the
record as it is and know what it holds.

Pure: no Airflow; the operators and the CLI pass the user, the run type and the roles they found.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kafka_ferry.core.common.dates import iso_utc
from kafka_ferry.core.common.failures import Permanent
from kafka_ferry.core.specs.tenants import Promoters
from kafka_ferry.core.specs.trigger_form import PROMOTE, PROMOTE_GROUPS, PROMOTE_TOPICS, ROLLBACK, shown

RESET_PROMOTION = "reset-promotion"  # the CLI's reset (no DAG run): a mode of authority, not of the form
AUTHORITY_MODES = (PROMOTE, PROMOTE_GROUPS, PROMOTE_TOPICS, ROLLBACK, RESET_PROMOTION)
MANUAL = "manual"  # Airflow's DagRunType of a run a person triggered (UI, REST, `airflow dags trigger`, dag.test)
ACT_VERSION = 1
STARTED, DONE, FAILED = "started", "done", "failed"
MAX_ERROR = 1000  # characters of a failed act's message kept in its record


class NotAllowed(Permanent, PermissionError):
    """The run's user may not run this mode of the tenant's migration (or no person triggered it); no retry
    changes who triggered the run."""


@dataclass(frozen=True)
class Actor:
    """Who asks: the run's triggering user, its run type (None: no DAG run, the CLI's reset) and roles (None:
    they could not be read; ``unread`` then says why, for the refusal)."""

    user: str | None
    run_type: str | None = MANUAL
    roles: tuple[str, ...] | None = None
    unread: str = ""


def _listed(promoters: Promoters) -> str:
    users = f"users [{shown(promoters.users, 10)}]" if promoters.users else "no user"
    roles = f"roles [{shown(promoters.roles, 10)}]" if promoters.roles else "no role"
    return f"{users}, {roles}"


def authority_problem(mode: str, migration: str, tenant: str, promoters: Promoters | None, actor: Actor,
                      where: str = "the tenants file") -> str | None:
    """Why ``actor`` may not run ``mode`` of the migration; None when it may (or the mode needs no authority)."""
    if mode not in AUTHORITY_MODES:
        return None
    refused = f"{mode} of migration {migration!r} refused before any change"
    if actor.run_type is not None and str(actor.run_type) != MANUAL:
        return (f"{refused}: this is a {actor.run_type} run, which no person triggered, and a cutover, rollback "
                f"or reset is always a person's act; trigger mode {mode!r} from the form, the REST API or "
                f"`kafka-ferry {mode} --as <user>`")
    if promoters is None:
        return None
    listed = _listed(promoters)
    if not actor.user:
        return (f"{refused}: the run records no triggering user, and tenant {tenant!r} lists who may ({listed}, "
                f"{where}); trigger it as one of them")
    if actor.user in promoters.users:
        return None
    if promoters.roles and actor.roles is not None and set(actor.roles) & set(promoters.roles):
        return None
    if promoters.roles and actor.roles is None:  # never a guess: a user whose roles are unknown is refused
        roles = (f" (its roles could not be read: {actor.unread or 'no way to read them here'}; list the user by "
                 "name, or fix that)")
    elif actor.roles is None:
        roles = ""  # the list names no role: none were looked up
    else:
        roles = f" (roles [{shown(sorted(actor.roles), 10)}])" if actor.roles else " (no role)"
    return (f"{refused}: user {actor.user!r}{roles} is not one of tenant {tenant!r}'s promoters ({listed}, "
            f"{where}); one of them runs it, or the platform team adds the user or a role to the tenant's "
            "promoters")


def check_authority(mode: str, migration: str, tenant: str, promoters: Promoters | None, actor: Actor,
                    where: str = "the tenants file") -> None:
    """``NotAllowed`` naming the user and the list when ``authority_problem`` finds one."""
    problem = authority_problem(mode, migration, tenant, promoters, actor, where)
    if problem:
        raise NotAllowed(problem)


def allowed_by(mode: str, promoters: Promoters | None, actor: Actor) -> str:
    """Why the act was allowed, for its record (call after ``check_authority`` passed)."""
    if mode not in AUTHORITY_MODES:
        return "needs none: changes no cutover"
    if promoters is None:
        return "no promoters list for the tenant"
    if actor.user in promoters.users:
        return f"user {actor.user!r} listed"
    matched = sorted(set(actor.roles or ()) & set(promoters.roles))
    return f"role {matched[0]!r} listed" if matched else "not listed"


def act_key(mode: str, run_id: str) -> str:
    return f"{mode}/{run_id}"


def act_record(mode: str, migration: str, actor: Actor, confirmation: str | None, run_id: str, started_at_ms: int,
               groups: Iterable[str] = (), topics: Iterable[str] = (), allowed: str = "") -> dict[str, Any]:
    """The ``act`` record of one promotion, staged step, rollback or reset, as it starts (``status: started``)."""
    return {"record_version": ACT_VERSION, "action": mode, "migration": migration, "user": actor.user,
            "roles": None if actor.roles is None else sorted(actor.roles), "run_type": actor.run_type,
            "allowed_by": allowed,
            "confirmation": confirmation, "run_id": run_id, "started_at_ms": int(started_at_ms),
            "groups": sorted(groups), "topics": sorted(topics), "status": STARTED}


def finished(record: Mapping[str, Any], at_ms: int, status: str = DONE, error: str | None = None) -> dict[str, Any]:
    """The same act once its run's work is done, or failed (``error``: why, cut to ``MAX_ERROR`` characters; a
    retry's start sets it ``started`` again and keeps the error as ``last_error``)."""
    out = {**record, "status": status, "finished_at_ms": int(at_ms)}
    if error is not None:
        out["error"] = error[:MAX_ERROR]
    return out


def restarted(record: Mapping[str, Any]) -> dict[str, Any]:
    """A failed act tried again (a task retry, a task cleared): started again, the last failure kept."""
    out = {k: v for k, v in record.items() if k not in ("error", "finished_at_ms")}
    return {**out, "status": STARTED, **({"last_error": record["error"]} if record.get("error") else {})}


def act_line(record: Mapping[str, Any]) -> str:
    """One act as ``status`` and the pages show it."""
    units = [f"groups {', '.join(record.get('groups') or [])}" if record.get("groups") else "",
             f"topics {', '.join(record.get('topics') or [])}" if record.get("topics") else ""]
    what = " ".join(u for u in units if u)
    done = (f", {record.get('status')} {iso_utc(record.get('finished_at_ms'))}" if record.get("finished_at_ms")
            else f", {record.get('status')}")
    return (f"{record.get('action')}{' of ' + what if what else ''} by {record.get('user')!r}, confirmed "
            f"{record.get('confirmation')!r}, run {record.get('run_id')}, started "
            f"{iso_utc(record.get('started_at_ms'))}{done}")


def acts_newest_first(records: Mapping[str, Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The act records of a state snapshot (by key), newest first."""
    return sorted((dict(r) for r in records.values()), key=lambda r: r.get("started_at_ms") or 0, reverse=True)
