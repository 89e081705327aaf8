"""What every kafka-ferry operator shares: the spec it works for and both clusters, from their connections."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Sequence
from typing import Any

from airflow.sdk import BaseHook, BaseOperator, conf
from airflow.sdk.exceptions import AirflowNotFoundException

from kafka_ferry.core.common.flags import parse_bool
from kafka_ferry.core.common.state_records import ACT_KIND, OWNER_KIND
from kafka_ferry.core.cutover.authority import (
    FAILED,
    STARTED,
    Actor,
    act_key,
    act_record,
    allowed_by,
    check_authority,
    finished,
    restarted,
)
from kafka_ferry.core.provisioning.provisioning_plan import select_topics
from kafka_ferry.core.specs.spec_check import check_connections, check_tenant, connection_refs
from kafka_ferry.core.specs.tenants import (
    AIRFLOW_CONFIG,
    OWNER_KEY,
    OwnerRefused,
    TenantsFile,
    load_tenants,
    owner_problem,
    owner_record,
    tenants_file_path,
)
from kafka_ferry.core.specs.trigger_form import CONFIRM_FIELD, GROUPS_FIELD, TOPICS_FIELD, names
from kafka_ferry.operators.authority import actor_of_run, promoters_of
from kafka_ferry.task_support import MigrationContext

AUTHORITY_KEY = "authority"  # the pre-flight's XCom: who triggered the run, and why they may


class MigrationOperator(MigrationContext, BaseOperator):
    """Base for operators that act for one migration spec.

    :param spec_path: path of the migration's YAML spec, read at run time (data, never rendered).
    :param kwargs: passed to ``BaseOperator`` (``task_id``, ``retries``, ...).
    """

    # spec_path is no template field: a file name is data, never rendered (issue 24: `{{ 7*7 }}` in a name)
    template_fields: Sequence[str] = ()
    ui_color = "#d8e8f8"

    def __init__(self, *, spec_path: str, **kwargs) -> None:
        super().__init__(**kwargs)
        if not spec_path:
            raise ValueError("spec_path is required")
        self.spec_path = spec_path

    def check_connections_exist(self) -> None:
        """Fail before anything changes, naming every connection the spec names that is missing or mistyped."""
        found: dict[str, str | None] = {}
        for _, conn_id, _ in connection_refs(self.spec):
            try:
                found[conn_id] = BaseHook.get_connection(conn_id).conn_type
            except AirflowNotFoundException:
                continue
        check_connections(self.spec, self.spec_path, found)

    def check_tenant(self) -> None:
        """With the platform's tenants file configured, refuse what the spec's tenant is not granted (by name),
        a spec file outside its tenant's spec paths, and a state topic another spec file owns; reads only.

        Identity rename: the destination names are the selected source topics, known only from the cluster.
        """
        path = tenants_file_path(configured=conf.get(*AIRFLOW_CONFIG, fallback=None))
        if path is None:
            return
        tenants = load_tenants(path)
        destination_topics = select_topics(self.spec, self.source_cluster.list_topic_names())
        check_tenant(self.spec, self.spec_path, tenants, path, destination_topics)
        self._recorded_owner(tenants, path)

    def record_owner(self) -> None:
        """With the tenants file: the first writing task records this spec file and tenant as the state topic's
        owner (after refusing, again, another owner: two first runs may race to here). Call once the state topic
        exists and before the task's first change."""
        path = tenants_file_path(configured=conf.get(*AIRFLOW_CONFIG, fallback=None))
        if path is None:
            return
        tenants = load_tenants(path)
        if self._recorded_owner(tenants, path) is None:
            self.state_store.put(OWNER_KIND, OWNER_KEY,
                                 owner_record(self.spec, tenants.owner_path(self.spec_path, path)))

    def check_authority(self, context: Any, mode: str) -> dict:
        """Refuse (once, before any change) a run of a cutover mode whose triggering user the tenant's promoters do
        not list, and any such run no person triggered (``core.cutover.authority``); reads only. Returns who asked and
        why they may, for the act's record."""
        promoters, where = promoters_of(self.spec)
        asking = actor_of_run(context, promoters)
        check_authority(mode, self.spec.name, self.spec.tenant, promoters, asking, where)
        return {"user": asking.user, "run_type": asking.run_type,
                "roles": None if asking.roles is None else list(asking.roles),
                "allowed_by": allowed_by(mode, promoters, asking)}

    @contextlib.contextmanager
    def acting(self, context: Any, mode: str) -> Iterator[ActStart]:
        """Around a task's work: an ``ActStart`` the work calls as its ``before_change`` (after its last refusal,
        before its first change), which records the act as started (``record_act``); when the work raises after
        that, the act is recorded failed with the message. A refusal (raised before) and a no-op (nothing to
        change) record nothing: the state topic stays as it was."""
        act = ActStart(self, context, mode)
        try:
            yield act
        except Exception as exc:
            if act.record is not None:
                self.record_act(context, mode, FAILED, error=f"{type(exc).__name__}: {exc}")
            raise

    def record_act(self, context: Any, mode: str, status: str = STARTED, error: str | None = None) -> dict:
        """Who did it (state kind ``act``, key ``<mode>/<run id>``): written as the act's first task starts, before
        its first change (a retry, or the promotion's next task, finds it and keeps it), and again with ``status``
        when it is done. The user and why they may come from the pre-flight's check; the confirmation and the
        names from the run's form."""
        params = context.get("params") or {}
        run_id = str(context.get("run_id") or self.task_id)
        key = act_key(mode, run_id)
        recorded = self.state_store.read_kind(ACT_KIND).get(key)
        now_ms = int(time.time() * 1000)
        if recorded is not None:
            if status == STARTED and recorded.get("status") == STARTED:
                return recorded
            record = restarted(recorded) if status == STARTED else finished(recorded, now_ms, status, error)
        else:
            ti = context.get("ti")
            checked = ti.xcom_pull(task_ids="preflight") if ti is not None else None
            who = (checked or {}).get(AUTHORITY_KEY) if isinstance(checked, dict) else None
            if not who:  # no pre-flight result (a task run alone): the run's own user, roles unread
                dag_run = context.get("dag_run")
                who = {"user": getattr(dag_run, "triggering_user_name", None), "roles": None,
                       "run_type": str(getattr(getattr(dag_run, "run_type", None), "value", "") or "") or None,
                       "allowed_by": "not checked: no pre-flight in this run"}
            record = act_record(mode, self.spec.name, Actor(who.get("user"), who.get("run_type"), who.get("roles")),
                                params.get(CONFIRM_FIELD), run_id, now_ms, names(params.get(GROUPS_FIELD)),
                                names(params.get(TOPICS_FIELD)), who.get("allowed_by") or "")
            if status != STARTED:
                record = finished(record, now_ms, status, error)
        self.state_store.put(ACT_KIND, key, record)
        return record

    def _recorded_owner(self, tenants: TenantsFile, path) -> dict | None:
        recorded = self.state_store.read_kind(OWNER_KIND).get(OWNER_KEY)
        problem = owner_problem(recorded, self.spec, tenants.owner_path(self.spec_path, path),
                                self.spec.state_topic_name)
        if problem:
            raise OwnerRefused(problem)
        return recorded


class ActStart:
    """The act's start (``MigrationOperator.record_act``), recorded at the first call only; handed to a mode's
    work as its ``before_change``, so who acted is written after every refusal and before the first change.
    ``record``: the act as recorded (None: not started, nothing changed in this task)."""

    def __init__(self, operator: MigrationOperator, context: Any, mode: str) -> None:
        self.operator, self.context, self.mode = operator, context, mode
        self.record: dict | None = None

    def __call__(self) -> dict:
        if self.record is None:
            self.record = self.operator.record_act(self.context, self.mode)
        return self.record


class DryRunOperator(MigrationOperator):
    """Base for the tasks a run's ``mode: dry-run`` reaches: with ``dry_run`` they plan and report only, and change
    nothing anywhere (no topic, state record, checkpoint, ACL, registry write or group offset).

    :param dry_run: plan and report only (a bool, or a template such as the DAG's ``DRY_RUN_TEMPLATE``, read with
        ``parse_bool`` at run time). Kept as ``dry_run_flag`` (the template field): ``BaseOperator.dry_run()`` is
        Airflow's method (render the template fields), which an attribute of that name would shadow.
    :param kwargs: passed to ``MigrationOperator`` (``spec_path``) and ``BaseOperator``.
    """

    template_fields: Sequence[str] = (*MigrationOperator.template_fields, "dry_run_flag")

    def __init__(self, *, dry_run: bool | str = False, **kwargs) -> None:
        super().__init__(**kwargs)
        self.dry_run_flag = dry_run

    @property
    def is_dry_run(self) -> bool:
        """The rendered ``dry_run_flag`` as a bool."""
        return parse_bool(self.dry_run_flag)
