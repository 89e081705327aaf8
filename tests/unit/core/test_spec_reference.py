"""docs/spec-reference.md is what the spec model gives: every key, and no stale file."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field

from kafka_ferry.core.spec import CopySettings, MigrationSpec
from kafka_ferry.core.spec_reference import main, render

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
    python -m kafka_ferry.core.spec_reference write docs/spec-reference.md (make spec-reference)."""
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
    # Copies faster when true (a key another change adds, with its comment).
    turbo: bool = False
    bare_key: int = 3


class SpecWithANewKey(MigrationSpec):
    copy_settings: TurboCopy = Field(default_factory=TurboCopy, alias="copy")


def test_a_key_added_to_the_model_appears_with_its_comment_when_regenerated():
    assert ("| `copy.turbo` | boolean | `false` | `true` | Copies faster when true (a key another change adds, with "
            "its comment). |") in render(SpecWithANewKey)
    assert ("| `copy.bare_key` | integer | `3` | `3` | (not described yet: write a comment above this key in "
            "kafka_ferry/core/spec.py) |") in render(SpecWithANewKey)
    assert "copy.turbo" not in render()
