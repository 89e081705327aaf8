"""docs/spec-reference.md is what the spec model gives: every key, and no stale file."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field

from kafka_ferry.cli.spec_reference import main, render
from kafka_ferry.core.specs.spec import CopySettings, MigrationSpec

REFERENCE = Path(__file__).resolve().parents[3] / "docs" / "spec-reference.md"


def model_paths(model: type[BaseModel], prefix: str = "") -> set[str]:
    """Every key path of the spec, read from the model independently of the generator."""
    paths = set()
    for name, info in model.model_fields.items():
        path = f"{prefix}{info.alias or name}"
        paths.add(path)
        annotation = info.annotation
        for candidate in getattr(annotation, "__args__", (annotation,)):
            if isinstance(candidate, type) and issubclass(candidate, BaseModel):
                paths |= model_paths(candidate, f"{path}.")
    return paths


def test_the_committed_reference_is_not_stale(capsys):
    """Fails when the spec model changed and the page was not regenerated:
    python -m kafka_ferry.cli.spec_reference write docs/spec-reference.md (make spec-reference)."""
    assert main(["check", str(REFERENCE)]) == 0, capsys.readouterr().out


def test_every_key_of_the_model_has_a_row_with_a_type_default_and_meaning():
    page = render()
    for path in model_paths(MigrationSpec):
        rows = [line for line in page.splitlines() if line.startswith(f"| `{path}` |")]
        assert len(rows) == 1, path
        key, type_, default, example, meaning = (c.strip() for c in rows[0].strip("|").split(" | ", 4))
        assert type_ and default and example and meaning, rows[0]
    assert "| `copy.lanes_per_task` | integer (>= 1, <= 64) | `4` | `8` | Partitions one Spark task copies" in page
    assert "| `topics.include` | list of regex (min length 1) | required | `[\"orders\\\\..*\"]` |" in page


class TurboCopy(CopySettings):
    """The copy batches, with two keys another change adds."""

    turbo: bool = Field(default=False, description="Copies faster when true (a key another change adds, with its "
                                                   "description).")
    bare_key: int = 3


class SpecWithANewKey(MigrationSpec):
    copy_settings: TurboCopy = Field(default_factory=TurboCopy, alias="copy")


def test_a_key_added_to_the_model_appears_with_its_description_when_regenerated():
    assert ("| `copy.turbo` | boolean | `false` | `true` | Copies faster when true (a key another change adds, with "
            "its description). |") in render(SpecWithANewKey)
    assert ("| `copy.bare_key` | integer | `3` | `3` | (not described yet: give this key a Field(description=...) in "
            "kafka_ferry/core/specs/spec.py) |") in render(SpecWithANewKey)
    assert "copy.turbo" not in render()


def undescribed(model: type[BaseModel], prefix: str = "") -> list[str]:
    """Key paths of ``model`` with no meaning: a leaf without a Field description, a section without one and
    without a docstring of its own. Read from the model, not from the generator."""
    missing = []
    for name, info in model.model_fields.items():
        path = f"{prefix}{info.alias or name}"
        annotation = info.annotation
        sections = [c for c in getattr(annotation, "__args__", (annotation,))
                    if isinstance(c, type) and issubclass(c, BaseModel)]
        own_docs = all(s.__dict__.get("__doc__") for s in sections) if sections else False
        if not (info.description or own_docs):
            missing.append(path)
        for section in sections:
            missing += undescribed(section, f"{path}.")
    return missing


def test_every_key_of_the_spec_has_a_description():
    """A key added to core/specs/spec.py without `Field(description=...)` fails here (its page row would say so)."""
    assert undescribed(MigrationSpec) == []
    assert undescribed(SpecWithANewKey) == ["copy.bare_key"]


def test_a_model_used_in_two_roles_says_what_each_role_means():
    """`source`/`destination` and `topics`/`groups` share their checks but not their meanings: each path's row
    says its own (a shared model with one description would say the source's meaning at the destination)."""
    rows = {line.split(" | ")[0].strip("| `"): line.rsplit(" | ", 1)[1] for line in render().splitlines()
            if line.startswith("| `")}
    assert "checkpoints.internal" in rows["source.alias"] and "offset-syncs" in rows["destination.alias"]
    assert "for the destination" in rows["destination.connection_id"]
    assert "a topic is selected" in rows["topics.include"] and "group ids" in rows["groups.include"]
    assert "not selected" in rows["topics.exclude"] and "not migrated" in rows["groups.exclude"]
