"""docs/spec-reference.md, generated from the spec model: every key with its type, default, example and meaning.

Why generated: a hand-kept list falls behind the model (the `promotion.*` keys were learned from a check-spec
error). Keys, types, defaults and limits come from the pydantic models of ``core.specs.spec``; each key's meaning is its
``Field(description=...)`` there (a section without one has its model's docstring), so a key added with its
description appears here when the file is regenerated. A model used at several paths with different meanings is one
model per role (``SourceCluster``/``DestinationCluster``, ``TopicSelection``/``GroupSelection``), each with its own
descriptions: the meaning sits on the field, never in a table here.

    python -m kafka_ferry.cli.spec_reference write docs/spec-reference.md

(``make spec-reference``). ``check`` exits 1 when the file differs from what the model gives (a unit test runs it).
"""

from __future__ import annotations

import inspect
import json
import sys
import types
import typing
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from kafka_ferry.core.specs import spec as spec_module
from kafka_ferry.core.specs.spec import MigrationSpec

# Examples where the default is no example (required keys, empty defaults); other keys show a value derived from
# their type (another choice of a Literal, the other boolean, the default).
EXAMPLES: dict[str, Any] = {
    "name": "orders-eu", "tenant": "acme", "description": "Orders of the EU shop, old DC -> cloud",
    "source.connection_id": "acme_old_kafka", "source.alias": "old-dc",
    "destination.connection_id": "acme_new_kafka", "destination.alias": "cloud",
    "schema_registry.source_connection_id": "acme_old_registry",
    "schema_registry.destination_connection_id": "acme_new_registry",
    "schema_registry.subjects_include": ["acme\\.events\\..*"], "schema_registry.subjects_exclude": [".*-test"],
    "acls.principals": {"User:orders-app": "User:orders-app-cloud"},
    "topics.include": ["orders\\..*"], "topics.exclude": ["orders\\.scratch\\..*"],
    "topics.rename.prefix": "old-dc.", "groups.include": ["orders-.*"], "groups.exclude": ["orders-debug-.*"],
    "copy.spark_connection_id": "spark_cluster", "copy.kubernetes_credentials_secret": "kafka-ferry-creds:configs",
    "schedule": "*/30 * * * *", "state_topic": "_kafka-ferry.orders-eu.state", "topics.rename.policy": "prefix",
    "copy.max_records_per_partition": 500000, "copy.max_bytes_per_partition": 268435456,
    "copy.offset_sync_interval": 1000, "copy.lanes_per_task": 8, "promotion.max_lag_records": 100,
    "promotion.quiesce_window_seconds": 120, "promotion.sensor_timeout_seconds": 7200,
    "promotion.poke_interval_seconds": 30,
    "copy.max_bytes_per_second": 40_000_000, "copy.max_records_per_second": 50_000, "copy.window": "05:00",
    "consumers.spark_checkpoints.checkpoint": "s3://acme-spark/checkpoints/orders-enricher",
    "consumers.spark_checkpoints.file_sink": "s3://acme-spark/tables/orders-enriched",
    "applications.application_id": "orders-enricher",
    "applications.output_topics": ["orders.enriched"],
}

# A key with no description still gets its row, saying what is missing (a unit test fails on any such key).
UNDESCRIBED = "(not described yet: give this key a Field(description=...) in kafka_ferry/core/specs/spec.py)"


HEADER = """# Migration spec reference

<!-- Generated from the spec model (kafka_ferry/core/specs/spec.py) by `make spec-reference`
     (python -m kafka_ferry.cli.spec_reference write docs/spec-reference.md). Do not edit by hand. -->

One YAML file per migration, in `<dags folder>/migrations/<name>.yaml`. Unknown keys are refused (with the
closest known key), and `kafka-ferry check` or `python -m kafka_ferry.core.specs.spec_check check FILE` reports every
problem of a file at once. Walk-through: [Your first migration](first-migration.md).
"""


FOOTER = """
## Example: a nightly window

Copy between 01:00 and 05:00 (the DAG's timezone: Airflow's `default_timezone`) at most 40 MB/s, so the source's
own consumers keep their share during the night's batch:

```yaml
schedule: "0 1 * * *"            # the run is due at 01:00
copy:
  window: "05:00"                # ...and its batch stops at 05:00 (or "4h": four hours after it was due)
  max_bytes_per_second: 40000000 # 40 MB/s of keys and values, shared by all the batch's Spark tasks and lanes
  max_records_per_partition: 50000000   # let the window, not the per-partition caps, bound the batch
  max_bytes_per_partition: 100000000000
timeouts:
  copy_seconds: 18000            # more than the window, so the task ends on the deadline, not on its timeout
```

The batch is sized from the migration's measured rate (its previous busy batches) to end inside the window, each
partition of a copier lane gets its share of the window's time (so the first night, with nothing measured yet,
starves no partition), and at 05:00 each partition copier stops at a chunk boundary with its progress and offset
syncs written; the next night's run resumes there. The batch report says why it stopped (`deadline`, `limit` or
`caught_up`), what each partition left and the overrun past 05:00, if any
([Operations](operations.md#batch-windows-and-rate-limits)).
"""

# Strings core/specs/spec.py checks with a validator, named for people.
VALIDATED = {"_regex": "regex", "_connection_id": "connection id", "_principal": "principal"}


class Key(typing.NamedTuple):
    path: str
    type: str
    default: str
    example: str
    meaning: str


def _models(annotation: Any) -> list[type[BaseModel]]:
    """The spec models a field holds (a section, one of several sections, or an optional section)."""
    args = typing.get_args(annotation) if _is_union(annotation) else (annotation,)
    return [a for a in args if isinstance(a, type) and issubclass(a, BaseModel)]


def _is_union(annotation: Any) -> bool:
    return typing.get_origin(annotation) in (typing.Union, types.UnionType)


def type_name(annotation: Any, metadata: Sequence[Any] = ()) -> str:
    """A person's name for a field's type, with its limits."""
    validators = [getattr(m, "func", None) for m in metadata]
    named = [VALIDATED[f.__name__] for f in validators if f is not None and f.__name__ in VALIDATED]
    if named:
        return named[0]
    limits = []
    for m in metadata:
        for attr, sign in (("gt", ">"), ("ge", ">="), ("lt", "<"), ("le", "<="), ("min_length", "min length"),
                           ("max_length", "max length")):
            if getattr(m, attr, None) is not None:
                limits.append(f"{sign} {getattr(m, attr)}")
    return _type_name(annotation) + (f" ({', '.join(limits)})" if limits else "")


def _type_name(annotation: Any) -> str:
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        validators = [getattr(m, "func", None) for m in args[1:]]
        named = [VALIDATED[f.__name__] for f in validators if f is not None and f.__name__ in VALIDATED]
        return named[0] if named else _type_name(args[0])
    if origin is Literal:
        return " \\| ".join(json.dumps(a) for a in args)
    if _is_union(annotation):
        parts = [_type_name(a) for a in args if a is not type(None)]
        return " or ".join(parts) + (" or null" if type(None) in args else "")
    if origin in (tuple, list):
        return f"list of {_type_name(args[0])}" if args else "list"
    if origin is dict:
        return f"mapping {_type_name(args[0])} -> {_type_name(args[1])}"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "section"
    return {str: "string", int: "integer", bool: "boolean", float: "number"}.get(annotation, str(annotation))


def _yaml(value: Any) -> str:
    return "null" if value is None else json.dumps(list(value) if isinstance(value, tuple) else value)


def _default(info: FieldInfo) -> Any:
    if info.is_required():
        return ...
    value = info.get_default(call_default_factory=True)
    return value.model_dump(by_alias=True) if isinstance(value, BaseModel) else value


def _example(path: str, info: FieldInfo, default: Any) -> str:
    if path in EXAMPLES:
        return _yaml(EXAMPLES[path])
    annotation = info.annotation
    if typing.get_origin(annotation) is Literal:
        others = [a for a in typing.get_args(annotation) if a != default]
        return _yaml(others[0] if others else default)
    if annotation is bool:
        return _yaml(not default)
    return "—" if default is ... or default in ((), {}, None, "") else _yaml(default)


def keys(model: type[BaseModel], prefix: str = "", only_when: str = "", tag: str | None = None) -> Iterator[Key]:
    """Every key of ``model`` and its sections, depth first, in the model's order."""
    for name, info in model.model_fields.items():
        key = info.alias or name
        path = f"{prefix}{key}"
        default = _default(info)
        sections = _models(info.annotation)
        meaning = (info.description or "") + (only_when if name != tag else "")
        if sections:
            text = "required" if default is ... else ("not set" if default is None else "see its keys")
            yield Key(path, "section" if len(sections) == 1 else f"section (by {info.discriminator})",
                      text, "—", meaning or (_doc(sections[0]) if len(sections) == 1 else ""))
            for section in sections:
                when = ""
                discriminator = info.discriminator if isinstance(info.discriminator, str) else None
                if len(sections) > 1 and discriminator:
                    literal = section.model_fields[discriminator].annotation
                    when = f" (with {discriminator}: {', '.join(map(str, typing.get_args(literal)))})"
                yield from keys(section, f"{path}.", when, discriminator)
            continue
        yield Key(path, type_name(info.annotation, info.metadata), "required" if default is ... else _yaml(default),
                  _example(path, info, default), meaning or UNDESCRIBED)
        for item in _item_models(info.annotation):  # a list of sections: each item's keys
            yield from keys(item, f"{path}.")


def _item_models(annotation: Any) -> list[type[BaseModel]]:
    """The section a list field holds items of (``tuple[Rule, ...]``), if any."""
    if typing.get_origin(annotation) not in (tuple, list):
        return []
    return [a for a in typing.get_args(annotation)[:1] if isinstance(a, type) and issubclass(a, BaseModel)]


def _doc(model: type[BaseModel]) -> str:
    """The model's own docstring (not one it inherits)."""
    return " ".join(inspect.cleandoc(model.__dict__.get("__doc__") or "").split())


def _unique(rows: list[Key]) -> list[Key]:
    """One row per key: keys shared by several section variants (``rename.policy``) merge their types."""
    merged: dict[str, Key] = {}
    for row in rows:
        if row.path in merged:
            first = merged[row.path]
            merged[row.path] = first._replace(type=first.type if row.type == first.type else f"{first.type} \\| "
                                              f"{row.type}", default=first.default)
        else:
            merged[row.path] = row
    return list(merged.values())


def render(model: type[BaseModel] = MigrationSpec) -> str:
    """The whole reference page."""
    rows = _unique(list(keys(model)))
    out = [HEADER]
    out.append("| key | type | default | example | meaning |\n|---|---|---|---|---|")
    for row in rows:
        cells = [f"`{row.path}`", row.type, f"`{row.default}`" if row.default not in ("required", "see its keys",
                                                                                     "not set") else row.default,
                 f"`{row.example}`" if row.example != "—" else "—", row.meaning.replace("|", "\\|")]
        out.append("| " + " | ".join(cells) + " |")
    out.append("\nSections (their own description):\n")
    seen: set[str] = set()
    for row in rows:
        if row.type.startswith("section") and row.path not in seen:
            seen.add(row.path)
            out.append(f"- `{row.path}`: {row.meaning}")
    out.append(FOOTER)
    return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> int:
    """`write FILE` regenerates the page; `check FILE` exits 1 when FILE is not what the model gives."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 2 or args[0] not in ("write", "check"):
        print("usage: python -m kafka_ferry.cli.spec_reference write|check docs/spec-reference.md", file=sys.stderr)
        return 2
    path, text = Path(args[1]), render()
    if args[0] == "write":
        path.write_text(text)
        print(f"wrote {path} ({text.count(chr(10))} lines) from {spec_module.__file__}")
        return 0
    if not path.exists() or path.read_text() != text:
        print(f"{path} is stale: regenerate it with `python -m kafka_ferry.cli.spec_reference write {path}`")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
