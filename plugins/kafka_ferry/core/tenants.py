"""The platform's tenants file: what each tenant's migration specs may use, checked before anything changes.

Why: specs come from tenants' repositories, and a spec names Airflow connections, a Kubernetes Secret and a state
topic by id. Without a binding, one tenant's spec can migrate with another team's connection (its credentials,
its clusters) or write into another migration's state topic. The platform team keeps one file (path from the
Airflow config ``[kafka_ferry] tenants_file`` or ``KFERRY_TENANTS_FILE``); the pre-flight task and
``spec_check check --tenants FILE`` refuse a spec that uses anything its tenant is not given, naming it. Without
the file, nothing is bound (as before).

    tenants:
      acme:
        connections: [kafka_acme_source, kafka_acme_destination, spark_default]
        kubernetes_secrets: [acme-kafka-ferry]          # Secret names (copy.kubernetes_credentials_secret)
        state_topics: ["kafka-ferry.acme-*"]            # exact names, or a prefix ending in '*'
        destination_topic_prefixes: ["acme."]           # every destination topic starts with one ('' = any)

Pure: no Airflow; the operators pass the path they resolved.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

from kafka_ferry.core.patterns import CONNECTION_ID, TENANT, TOPIC_NAME
from kafka_ferry.core.spec import MigrationSpec
from kafka_ferry.core.spec_source import Location, SpecError, SpecProblem, located, read_yaml, validation_problems

TENANTS_FILE_ENV = "KFERRY_TENANTS_FILE"
AIRFLOW_CONFIG = ("kafka_ferry", "tenants_file")


def _checked(rule, what: str):
    def check(value: str) -> str:
        if not rule.fullmatch(value):
            raise ValueError(f"not a valid {what}")
        return value
    return AfterValidator(check)


def _topic_rule(value: str) -> str:
    name = value[:-1] if value.endswith("*") else value
    if not TOPIC_NAME.fullmatch(name):
        raise ValueError("a state topic is a Kafka topic name, or a prefix of one ending in '*'")
    return value


def _prefix_rule(value: str) -> str:
    if value and not TOPIC_NAME.fullmatch(value):
        raise ValueError("a destination topic prefix holds only topic characters ('' allows any name)")
    return value


class TenantGrant(BaseModel):
    """What one tenant's specs may name; an empty list grants nothing of that kind."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    connections: tuple[Annotated[str, _checked(CONNECTION_ID, "connection id")], ...] = ()
    kubernetes_secrets: tuple[str, ...] = ()
    state_topics: tuple[Annotated[str, AfterValidator(_topic_rule)], ...] = ()
    destination_topic_prefixes: tuple[Annotated[str, AfterValidator(_prefix_rule)], ...] = ()

    def allows_state_topic(self, topic: str) -> bool:
        return any(topic.startswith(t[:-1]) if t.endswith("*") else topic == t for t in self.state_topics)

    def allows_destination_topic(self, topic: str) -> bool:
        return any(topic.startswith(p) for p in self.destination_topic_prefixes)


class TenantsFile(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    tenants: dict[Annotated[str, _checked(TENANT, "tenant name")], TenantGrant] = Field(default_factory=dict)


def tenants_file_path(environ: Mapping[str, str] | None = None, configured: str | None = None) -> Path | None:
    """The tenants file to enforce: the Airflow config's, else ``KFERRY_TENANTS_FILE``; None when neither is set."""
    environ = os.environ if environ is None else environ
    value = (configured or environ.get(TENANTS_FILE_ENV) or "").strip()
    return Path(value) if value else None


def load_tenants(path: str | Path) -> TenantsFile:
    """Read and validate the tenants file (bounded like a spec: no aliases, size cap); SpecError naming file/line."""
    data, positions = read_yaml(Path(path))
    if not isinstance(data, dict):
        raise SpecError(path, [SpecProblem("<root>", data, "the tenants file is a mapping with a 'tenants' key",
                                           line=1)])
    try:
        return TenantsFile.model_validate(data)
    except ValidationError as exc:
        raise SpecError(path, validation_problems(exc, positions, TenantsFile)) from None


def tenant_problems(spec: MigrationSpec, tenants: TenantsFile, tenants_path: str | Path,
                    connection_refs: Iterable[tuple[Location, str, object]],
                    destination_topics: Iterable[str] = (),
                    positions: Mapping[Location, tuple[int, int]] | None = None) -> list[SpecProblem]:
    """Every thing the spec uses that its tenant is not granted, located in the spec.

    ``connection_refs`` are (field, connection id, types) as ``spec_check.connection_refs`` gives them;
    ``destination_topics`` the destination names the migration would create (known at pre-flight, from the
    source cluster); a prefix rename is checked from the spec alone.
    """
    positions = positions or {}
    grant = tenants.tenants.get(spec.tenant)
    where = f"(tenants file {tenants_path})"
    if grant is None:
        return [located(("tenant",), spec.tenant, f"no such tenant in the platform's tenants file {where}; "
                                                  f"known: {', '.join(sorted(tenants.tenants)) or 'none'}",
                        positions)]
    problems = []
    for location, conn_id, _ in connection_refs:
        if conn_id not in grant.connections:
            problems.append(located(location, conn_id, f"tenant {spec.tenant!r} may not use this connection {where}",
                                    positions))
    secret = spec.copy_settings.kubernetes_credentials_secret
    if secret is not None and secret.split(":", 1)[0] not in grant.kubernetes_secrets:
        problems.append(located(("copy", "kubernetes_credentials_secret"), secret,
                                f"tenant {spec.tenant!r} may not use this Kubernetes Secret {where}", positions))
    if not grant.allows_state_topic(spec.state_topic_name):
        field = ("state_topic",) if spec.state_topic else ("name",)
        problems.append(located(field, spec.state_topic or spec.name,
                                f"state topic {spec.state_topic_name!r}: tenant {spec.tenant!r} may not use it "
                                f"{where}", positions))
    rename = spec.topics.rename
    prefix = getattr(rename, "prefix", None)
    if prefix is not None and not grant.allows_destination_topic(prefix):
        problems.append(located(("topics", "rename", "prefix"), prefix,
                                f"destination topics of tenant {spec.tenant!r} must start with one of "
                                f"{list(grant.destination_topic_prefixes)} {where}", positions))
    elif prefix is None:
        refused = sorted(t for t in destination_topics if not grant.allows_destination_topic(t))
        if refused:
            problems.append(located(("topics", "include"), ", ".join(refused[:10]),
                                    f"destination topic(s) outside tenant {spec.tenant!r}'s prefixes "
                                    f"{list(grant.destination_topic_prefixes)} {where}", positions))
    return problems
