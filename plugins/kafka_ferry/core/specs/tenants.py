"""The platform's tenants file: what each tenant's migration specs may use, checked before anything changes.

Why: specs come from tenants' repositories, and a spec names Airflow connections, a Kubernetes Secret and a state
topic by id. Without a binding, one tenant's spec can migrate with another team's connection (its credentials,
its clusters) or write into another migration's state topic. The platform team keeps one file (path from the
Airflow config ``[kafka_ferry] tenants_file`` or ``KFERRY_TENANTS_FILE``); the pre-flight task and
``spec_check check --tenants FILE`` refuse a spec that uses anything its tenant is not given, naming it. Without
the file, nothing is bound (as before).

    spec_root: /opt/airflow/dags                      # relative spec_paths start here (default: this file's folder)
    tenants:
      acme:
        spec_paths: ["migrations/acme-*.yaml"]          # the spec files that are acme's (globs, one per path part)
        name_prefixes: ["acme-"]                        # every `name` of acme's specs starts with one
        connections: [kafka_acme_source, kafka_acme_destination, spark_default]
        kubernetes_secrets: [acme-kafka-ferry]          # Secret names (copy.kubernetes_credentials_secret)
        state_topics: ["kafka-ferry.acme-*"]            # exact names, or a prefix ending in '*'
        destination_topic_prefixes: ["acme."]           # every destination topic starts with one ('' = any)
        promoters:                                      # optional: who may cut over, roll back, reset (issue 42)
          users: [alice]                                # Airflow user names (the run's triggering user)
          roles: [acme-cutover]                         # or Airflow roles (the auth manager's)

What a spec's author cannot choose binds it (issue 36): the spec file's path says whose it is (a spec saying
``tenant: globex`` in acme's folder is refused, as is one no tenant's ``spec_paths`` match), and its ``name`` (the
DAG id, work dir, state topic, lease and reader group names) must start with one of that tenant's prefixes; no
two tenants' prefixes overlap. The state topic records which spec file owns it (``OWNER_KIND``): a later run
from another file is refused before any change.

Pure: no Airflow; the operators pass the path they resolved.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from fnmatch import fnmatchcase
from pathlib import Path, PurePosixPath
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, model_validator

from kafka_ferry.core.common.failures import Permanent
from kafka_ferry.core.specs.patterns import CONNECTION_ID, MIGRATION_NAME, TENANT, TOPIC_NAME
from kafka_ferry.core.specs.spec import MigrationSpec
from kafka_ferry.core.specs.spec_source import Location, SpecError, SpecProblem, located, read_yaml, validation_problems

TENANTS_FILE_ENV = "KFERRY_TENANTS_FILE"
AIRFLOW_CONFIG = ("kafka_ferry", "tenants_file")


def _checked(rule: Any, what: str) -> AfterValidator:  # rule: a compiled RE2 pattern (untyped)
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


def _spec_glob_rule(value: str) -> str:
    if not value or "\x00" in value or any(part in ("..", ".") for part in PurePosixPath(value).parts):
        raise ValueError("a spec path glob is a path (absolute, or relative to spec_root) without '.' or '..' parts")
    if "**" in value:
        raise ValueError("'**' is not supported: a glob matches one path part per part ('*' never crosses a '/')")
    return value


def _name_prefix_rule(value: str) -> str:
    if not MIGRATION_NAME.fullmatch(value):
        raise ValueError("a name prefix is the start of a migration name: 1-100 of [a-z0-9_-], starting with a "
                         "letter or digit")
    return value


def _identity_rule(value: str) -> str:
    if not value or len(value) > 512 or not value.isprintable() or value != value.strip():
        raise ValueError("an Airflow user or role name: 1-512 printable characters, no spaces around it")
    return value


Identity = Annotated[str, AfterValidator(_identity_rule)]


class Promoters(BaseModel):
    """Who may run a tenant's cutover modes (``core.cutover.authority.AUTHORITY_MODES``): Airflow user names and roles.

    Absent (``promoters`` not given): anyone the platform lets trigger the tenant's DAG may, as before. Given with
    both lists empty: no one may (a freeze)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    users: tuple[Identity, ...] = Field(default=(), max_length=1000)
    roles: tuple[Identity, ...] = Field(default=(), max_length=1000)


class TenantGrant(BaseModel):
    """What one tenant's specs may name; an empty list grants nothing of that kind."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    spec_paths: tuple[Annotated[str, AfterValidator(_spec_glob_rule)], ...] = ()
    name_prefixes: tuple[Annotated[str, AfterValidator(_name_prefix_rule)], ...] = ()

    connections: tuple[Annotated[str, _checked(CONNECTION_ID, "connection id")], ...] = ()
    kubernetes_secrets: tuple[str, ...] = ()
    state_topics: tuple[Annotated[str, AfterValidator(_topic_rule)], ...] = ()
    destination_topic_prefixes: tuple[Annotated[str, AfterValidator(_prefix_rule)], ...] = ()
    promoters: Promoters | None = None

    def allows_state_topic(self, topic: str) -> bool:
        return any(topic.startswith(t[:-1]) if t.endswith("*") else topic == t for t in self.state_topics)

    def allows_destination_topic(self, topic: str) -> bool:
        return any(topic.startswith(p) for p in self.destination_topic_prefixes)


class TenantsFile(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    spec_root: str | None = Field(default=None, min_length=1, max_length=4096)
    tenants: dict[Annotated[str, _checked(TENANT, "tenant name")], TenantGrant] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _prefixes_do_not_overlap(self) -> TenantsFile:
        """A name may be one tenant's only: no prefix of one tenant starts with another tenant's."""
        owned = sorted((prefix, tenant) for tenant, grant in self.tenants.items() for prefix in grant.name_prefixes)
        chain: list[tuple[str, str]] = []  # sorted order: the prefixes of the current one, each of the next
        for prefix, tenant in owned:
            while chain and not prefix.startswith(chain[-1][0]):
                chain.pop()
            for other, other_tenant in chain:  # at most 100 long: a prefix has at most 100 characters
                if other_tenant != tenant:
                    raise ValueError(f"name prefix {other!r} of tenant {other_tenant!r} and {prefix!r} of tenant "
                                     f"{tenant!r} overlap: a migration name would be both tenants'")
            chain.append((prefix, tenant))
        return self

    def root(self, tenants_path: str | Path) -> Path:
        """Where relative ``spec_paths`` start: ``spec_root``, else the tenants file's own folder."""
        base = Path(tenants_path).resolve().parent
        return (base / self.spec_root).resolve() if self.spec_root else base  # resolved like the spec paths

    def owners(self, spec_path: str | Path, tenants_path: str | Path) -> list[str]:
        """The tenants whose ``spec_paths`` match the spec file (resolved: a symlink or '..' reaches no one else's)."""
        path = PurePosixPath(Path(spec_path).resolve().as_posix())
        root = self.root(tenants_path)
        return [tenant for tenant, grant in sorted(self.tenants.items())
                if any(_glob_matches(path, PurePosixPath((root / glob).as_posix())) for glob in grant.spec_paths)]

    def name_holder(self, name: str) -> str | None:
        """The one tenant whose prefixes cover ``name`` (prefixes never overlap), or None."""
        return next((tenant for tenant, grant in sorted(self.tenants.items())
                     if any(name.startswith(prefix) for prefix in grant.name_prefixes)), None)

    def owner_path(self, spec_path: str | Path, tenants_path: str | Path) -> str:
        """The spec file as the state topic records its owner: relative to the spec root when under it (so a
        deployment that moves the whole folder and its ``spec_root`` keeps its owners), else absolute."""
        path = Path(spec_path).resolve()
        try:
            return path.relative_to(self.root(tenants_path)).as_posix()
        except ValueError:
            return path.as_posix()


def _glob_matches(path: PurePosixPath, glob: PurePosixPath) -> bool:
    """Part by part (``*`` never crosses a '/'), the whole path: ``migrations/acme-*.yaml`` is not
    ``migrations/acme-x/../globex.yaml`` (paths are resolved first anyway)."""
    return len(path.parts) == len(glob.parts) and all(
        fnmatchcase(p, g) for p, g in zip(path.parts, glob.parts, strict=True))


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
                    positions: Mapping[Location, tuple[int, int]] | None = None,
                    spec_path: str | Path | None = None) -> list[SpecProblem]:
    """Every thing the spec uses that its tenant is not granted, located in the spec.

    ``connection_refs`` are (field, connection id, types) as ``spec_check.connection_refs`` gives them;
    ``destination_topics`` the destination names the migration would create (known at pre-flight, from the
    source cluster); a prefix rename is checked from the spec alone. ``spec_path``: the file the spec was read
    from, whose place says whose it is (None only for a spec not read from a file: nothing binds it, so it is
    refused).
    """
    positions = positions or {}
    grant = tenants.tenants.get(spec.tenant)
    where = f"(tenants file {tenants_path})"
    if grant is None:
        return [located(("tenant",), spec.tenant, f"no such tenant in the platform's tenants file {where}; "
                                                  f"known: {', '.join(sorted(tenants.tenants)) or 'none'}",
                        positions)]
    problems = []
    owners = tenants.owners(spec_path, tenants_path) if spec_path is not None else []
    if not owners:
        problems.append(located(("tenant",), spec.tenant,
                                f"the spec file {spec_path} is in no tenant's spec_paths {where}: the platform "
                                f"team adds it to the spec_paths of tenant {spec.tenant!r} if it is theirs", positions))
    elif spec.tenant not in owners:
        problems.append(located(("tenant",), spec.tenant,
                                f"the spec file {spec_path} belongs to tenant {' and '.join(map(repr, owners))} (by "
                                f"its spec_paths {where}): a spec cannot claim another tenant", positions))
    elif len(owners) > 1:
        problems.append(located(("tenant",), spec.tenant,
                                f"the spec file {spec_path} matches the spec_paths of tenants "
                                f"{', '.join(map(repr, owners))} {where}: each spec file must have one owner",
                                positions))
    if not any(spec.name.startswith(prefix) for prefix in grant.name_prefixes):
        problems.append(located(("name",), spec.name,
                                f"migration names of tenant {spec.tenant!r} start with one of "
                                f"{list(grant.name_prefixes)} {where} (the name is the DAG id, work dir, state topic "
                                f"and lease: another tenant's would be theirs)", positions))
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


OWNER_KEY = "spec"


class OwnerRefused(Permanent, ValueError):
    """The state topic belongs to another spec file or tenant; the message names both (no retry changes it)."""


def owner_record(spec: MigrationSpec, owner_path: str) -> dict[str, str]:
    """The state topic's owner record (``core.common.state_records.OWNER_KIND``) for a spec read from ``owner_path``."""
    return {"spec_path": owner_path, "tenant": spec.tenant, "name": spec.name}


def owner_problem(recorded: Mapping[str, object] | None, spec: MigrationSpec, owner_path: str,
                  state_topic: str) -> str | None:
    """Why this spec may not act on the state topic another spec file owns; None when it owns it (or none does).

    The owner is recorded by the first run with the tenants file; the spec file's place, not its text, says who
    it is, so a second team's spec with this ``name`` (or ``state_topic``) elsewhere reaches nothing.
    """
    if not recorded:
        return None
    mine = owner_record(spec, owner_path)
    if all(recorded.get(k) == mine[k] for k in ("spec_path", "tenant")):
        return None
    return (f"state topic {state_topic!r} belongs to spec file {recorded.get('spec_path')!r} of tenant "
            f"{recorded.get('tenant')!r} (recorded by its first run); this run is from {owner_path!r} of tenant "
            f"{spec.tenant!r}: refused before any change. Give this migration a name of its own; if this spec file "
            "was moved on purpose, move it back, or let the platform team remove the state topic's owner record "
            "(kind 'owner', key 'spec'): nothing else of the migration depends on it")
