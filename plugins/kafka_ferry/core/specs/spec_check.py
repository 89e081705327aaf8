"""Checks of a migration spec beyond its own fields: the Airflow connections it names, and the spec-check CLI.

``python -m kafka_ferry.core.specs.spec_check check [--tenants TENANTS.yaml] SPEC.yaml ...`` (``make check-spec``, with
``TENANTS=...``) prints every problem of every file, with file, line and field, without Airflow; exit 1 on any.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping, Sequence
from difflib import get_close_matches
from pathlib import Path

from kafka_ferry.core.specs.connection_types import (
    KAFKA_TYPES,
    LEGACY_SCHEMA_REGISTRY,
    SCHEMA_REGISTRY_TYPES,
    SPARK_TYPES,
)
from kafka_ferry.core.specs.patterns import SPEC_FILE_NAME
from kafka_ferry.core.specs.spec import MigrationSpec, parse_spec
from kafka_ferry.core.specs.spec_source import Location, SpecError, SpecProblem, located, read_yaml
from kafka_ferry.core.specs.tenants import TenantsFile, load_tenants, tenant_problems

SPEC_FILE_NAME_RULE = ("a spec's file name must be 1-200 letters, digits, '.', '_' or '-' ending in .yaml "
                       "(it names the generated DAG file)")


def file_name_problems(path: str | Path) -> list[SpecProblem]:
    """The spec file's own name, which `make dags` turns into a DAG file name (and quotes inside it)."""
    name = Path(path).name
    if SPEC_FILE_NAME.fullmatch(name):
        return []
    return [SpecProblem(None, None, f"file name {name!r} refused: {SPEC_FILE_NAME_RULE}")]


def dag_file_name(spec_file: str | Path) -> str:
    """The DAG file (``migration_<stem>.py``) `make dags` and `kafka-ferry` write for a spec file: the one place
    that turns a spec's file name into its DAG file's. '-' and '.' become '_' (a module name), so two spec files
    can map to one DAG file: ``stub_name_collisions`` finds them."""
    stem = Path(spec_file).name
    for suffix in (".yaml", ".yml"):
        if stem.endswith(suffix):
            stem = stem[:-len(suffix)]
            break
    return f"migration_{stem.replace('-', '_').replace('.', '_')}.py"


def stub_name_collisions(spec_files: Sequence[str | Path]) -> dict[str, list[str]]:
    """Spec files whose DAG files would be one file, by that file's name (each list sorted, two or more)."""
    by_stub: dict[str, list[str]] = {}
    for spec_file in spec_files:
        by_stub.setdefault(dag_file_name(spec_file), []).append(str(spec_file))
    return {stub: sorted(files) for stub, files in by_stub.items() if len(files) > 1}


def stub_collision_message(stub: str, files: Sequence[str]) -> str:
    return (f"{' and '.join(files)} would both be DAG file {stub} (a '-' or '.' in a file name becomes '_'): "
            "rename one; neither gets a DAG file until then")


def connection_refs(spec: MigrationSpec) -> list[tuple[Location, str, tuple[str, ...] | None]]:
    """(spec field, connection id, accepted connection types) of every Airflow connection the spec names.

    The registries' connections are of type ``schemaregistry`` (or its first name ``schema_registry``:
    `core.specs.connection_types`). The Spark connection's type picks the copy engine: ``spark`` (spark-submit) or
    ``spark_connect`` (a Connect server).
    """
    refs: list[tuple[Location, str, tuple[str, ...] | None]] = [
        (("source", "connection_id"), spec.source.connection_id, KAFKA_TYPES),
        (("destination", "connection_id"), spec.destination.connection_id, KAFKA_TYPES),
        (("copy", "spark_connection_id"), spec.copy_settings.spark_connection_id, SPARK_TYPES),
    ]
    if spec.schema_registry:
        refs += [
            (("schema_registry", "source_connection_id"), spec.schema_registry.source_connection_id,
             SCHEMA_REGISTRY_TYPES),
            (("schema_registry", "destination_connection_id"), spec.schema_registry.destination_connection_id,
             SCHEMA_REGISTRY_TYPES),
        ]
    return refs


def check_connections(spec: MigrationSpec, path: str | Path, found: Mapping[str, str | None],
                      known_ids: Sequence[str] = ()) -> None:
    """Fail before anything changes, naming every connection the spec names that is missing or of the wrong type.

    `found` maps each existing connection id to its connection type. `known_ids`, the connection ids the caller
    may show (the `kafka-ferry` command: the user's own; a task passes none, a tenant sees only its own names),
    turn a missing id into "did you mean" the closest of them.
    """
    try:
        _, positions = read_yaml(Path(path))
    except SpecError:
        positions = {}  # a spec parsed from data, not from a file: no lines to point at
    problems = []
    for location, conn_id, conn_types in connection_refs(spec):
        if conn_id not in found:
            problems.append(located(location, conn_id, "no Airflow connection with this id"
                                    + did_you_mean(conn_id, known_ids), positions))
        elif conn_types and found[conn_id] not in conn_types:
            wanted = " or ".join(repr(t) for t in conn_types if t != LEGACY_SCHEMA_REGISTRY)
            problems.append(located(location, conn_id, f"the connection is of type {found[conn_id]!r}; this field "
                                                        f"needs a connection of type {wanted}", positions))
    if problems:
        raise SpecError(path, problems)


def did_you_mean(name: str, candidates: Sequence[str]) -> str:
    """`` (did you mean 'x'?)`` for the closest candidate (difflib), or nothing when none is close."""
    close = get_close_matches(name, sorted(set(candidates) - {name}), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def check_tenant(spec: MigrationSpec, path: str | Path, tenants: TenantsFile, tenants_path: str | Path,
                 destination_topics: Sequence[str] = ()) -> None:
    """Refuse (SpecError, every problem located in the spec) what the spec uses that its tenant is not granted."""
    try:
        _, positions = read_yaml(Path(path))
    except SpecError:
        positions = {}
    problems = tenant_problems(spec, tenants, tenants_path, connection_refs(spec), destination_topics, positions,
                               spec_path=path)
    if problems:
        raise SpecError(path, problems)


def same_name_files(name: str, spec_path: str | Path) -> list[str]:
    """The other spec files in the spec's folder (the DAGs folder's ``migrations/``: every spec the DAG processor
    reads) whose ``name`` is ``name``, sorted.

    Why the folder and not the files one call is given: two specs with one name share a DAG id, work dir, state
    topic, lease and reader groups, whoever checked them. Cheap enough for every DAG parse: a file is parsed
    only when its text holds the name (a name spelled with YAML escapes is missed here, never matched wrongly;
    the state topic's owner record refuses such a twin at run time).
    """
    own = Path(spec_path).resolve()
    found = []
    for other in sorted([*own.parent.glob("*.yaml"), *own.parent.glob("*.yml")]):
        if other.resolve() == own:
            continue
        try:
            if name not in other.read_text(errors="replace"):
                continue
            data, _ = read_yaml(other)
        except (OSError, SpecError):
            continue  # unreadable or not YAML: its own DAG fails on it, naming it
        if isinstance(data, dict) and data.get("name") == name:
            found.append(str(other))
    return found


def name_twins(name: str, spec_path: str | Path, given: Iterable[str] = (), tenants: TenantsFile | None = None,
               tenants_path: str | Path | None = None) -> list[str]:
    """The other spec files holding ``name``: among ``given`` and the spec's folder (``same_name_files``).

    With a tenants file, only the files of the tenant whose prefixes cover the name count: another tenant's file
    cannot hold it (its own check refuses it), so it cannot take the name's DAG away from its owner either.
    """
    own = str(Path(spec_path).resolve())
    twins = sorted(({str(Path(f).resolve()) for f in given} | set(same_name_files(name, spec_path))) - {own})
    if tenants is not None and tenants_path is not None:
        holder = tenants.name_holder(name)
        twins = [t for t in twins if holder is not None and holder in tenants.owners(t, tenants_path)]
    return twins


def duplicate_name_problem(name: str, others: Sequence[str],
                           positions: Mapping[Location, tuple[int, int]] | None = None) -> SpecProblem:
    return located(("name",), name, f"{' and '.join(others)} {'has' if len(others) == 1 else 'have'} this name too; "
                                    "each migration needs its own (it is the DAG id, work dir and state topic): "
                                    "none of them gets a DAG until all but one are renamed", positions or {})


def check_at_parse(spec: MigrationSpec, path: str | Path, tenants: TenantsFile | None = None,
                   tenants_path: str | Path | None = None) -> None:
    """What the DAG processor refuses beyond the spec's own fields (SpecError, an import error of this DAG only):
    another spec file of the folder with this name and, with the tenants file, anything the spec's tenant is not
    given (the destination names of an identity rename are checked at pre-flight: they need the source)."""
    try:
        _, positions = read_yaml(Path(path))
    except SpecError:
        positions = {}
    twins = name_twins(spec.name, path, (), tenants, tenants_path)
    problems = [duplicate_name_problem(spec.name, twins, positions)] if twins else []
    if tenants is not None and tenants_path is not None:
        problems += tenant_problems(spec, tenants, tenants_path, connection_refs(spec), (), positions,
                                    spec_path=path)
    if problems:
        raise SpecError(path, problems)


def check_files(paths: Sequence[str | Path], tenants_path: str | Path | None = None
                ) -> tuple[list[str], list[SpecError]]:
    """Validate spec files as the DAG processor would, plus what only a set of files shows (two with one name,
    among the files given and the other specs of each one's folder: every one of them is refused, naming the
    others), and, given a tenants file, what each spec's tenant may use."""
    valid: list[str] = []
    errors: list[SpecError] = []
    files_by_name: dict[str, set[str]] = {}  # the files given, by name; the spec folders' others are read too
    for path in paths:
        try:
            data, _ = read_yaml(Path(path))
        except SpecError:
            continue
        if isinstance(data, dict) and isinstance(data.get("name"), str):
            files_by_name.setdefault(data["name"], set()).add(str(Path(path).resolve()))
    tenants = None
    if tenants_path is not None:
        try:
            tenants = load_tenants(tenants_path)
        except SpecError as exc:
            return [], [exc]
    collisions = stub_name_collisions(paths)
    for path in paths:
        named = file_name_problems(path)
        named += [SpecProblem(None, None, stub_collision_message(stub, files))
                  for stub, files in collisions.items() if str(path) in files]
        try:
            data, positions = read_yaml(Path(path))
            spec = parse_spec(data, path, positions)
        except SpecError as exc:
            errors.append(SpecError(path, named + exc.problems))
            continue
        if named:
            errors.append(SpecError(path, named))
            continue
        twins = name_twins(spec.name, path, files_by_name.get(spec.name, ()), tenants, tenants_path)
        if twins:
            errors.append(SpecError(path, [duplicate_name_problem(spec.name, twins, positions)]))
            continue
        if tenants is not None and tenants_path is not None:  # loaded from it, above
            try:
                check_tenant(spec, path, tenants, tenants_path)
            except SpecError as exc:
                errors.append(exc)
                continue
        valid.append(f"ok: {path} (DAG {spec.dag_id})")
    return valid, errors


def main(argv: Sequence[str] | None = None) -> int:
    """`check FILE...`: print every problem of every file; exit 0 when all are valid, 1 if not, 2 on bad usage."""
    args = list(sys.argv[1:] if argv is None else argv)
    tenants_path = None
    if len(args) >= 3 and args[1] == "--tenants":
        tenants_path, args = args[2], [args[0], *args[3:]]
    if len(args) < 2 or args[0] != "check":
        print("usage: python -m kafka_ferry.core.specs.spec_check check [--tenants TENANTS.yaml] SPEC.yaml "
              "[SPEC.yaml ...]", file=sys.stderr)
        return 2
    valid, errors = check_files(args[1:], tenants_path)
    for line in valid:
        print(line)
    for error in errors:
        print(error)
    problems = sum(len(e.problems) for e in errors)
    print(f"{len(args) - 1} spec(s) checked: {len(valid)} valid, {len(errors)} with {problems} problem(s)")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
