"""Specs are input, not code: names, regexes and YAML structure are bounded and checked before anything runs.

Each case below is a reproduction from issue 24 (a name with a final newline, a backtracking regex, nested
YAML aliases, an oversized file, a hostile file name); each fails on the code before the fix.
"""

from __future__ import annotations

import copy
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafka_ferry.core.specs.spec import SpecError, parse_spec
from kafka_ferry.core.specs.spec_check import check_files
from kafka_ferry.core.specs.spec_source import read_yaml

MAX_SPEC_BYTES = 256 * 1024  # core.specs.spec_source.MAX_SPEC_BYTES

VALID: dict[str, Any] = {  # a spec document as YAML loads it: JSON values
    "name": "acme-orders",
    "tenant": "acme",
    "source": {"connection_id": "kafka_src", "alias": "src"},
    "destination": {"connection_id": "kafka_dst", "alias": "dst"},
    "topics": {"include": ["orders\\..*"], "rename": {"policy": "prefix", "prefix": "a."}},
    "state_topic": "acme.state",
    "acls": {"principals": {"User:a": "User:b"}},
}

VALID_YAML = """\
name: acme-orders
tenant: acme
source: {connection_id: kafka_src, alias: src}
destination: {connection_id: kafka_dst, alias: dst}
topics:
  include: ["orders\\\\..*"]
"""


def changed(path: tuple, value) -> dict:
    data = copy.deepcopy(VALID)
    target = data
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = value
    return data


def problems(data) -> list[tuple[str | None, object]]:
    with pytest.raises(SpecError) as raised:
        parse_spec(data, "acme.yaml")
    return [(p.field, p.value) for p in raised.value.problems]


@pytest.mark.parametrize("path", [
    ("name",), ("tenant",), ("state_topic",), ("source", "alias"), ("destination", "alias"),
    ("source", "connection_id"), ("topics", "rename", "prefix"),
])
def test_a_final_newline_is_refused_in_every_name(path):
    value = changed(path, None)
    target = value
    for part in path[:-1]:
        target = target[part]
    bad = VALID
    for part in path:
        bad = bad[part]
    target[path[-1]] = f"{bad}\n"
    assert problems(value) == [(".".join(path), f"{bad}\n")]


def test_a_final_newline_is_refused_in_principals_and_the_schedule():
    assert problems(changed(("acls", "principals"), {"User:a": "User:b\n"}))[0][0] == "acls.principals.User:a"
    assert problems(changed(("schedule",), "*/5 * * * *\n"))[0][0] == "schedule"


def test_state_topic_follows_kafka_topic_rules():
    assert problems(changed(("state_topic",), "t" * 250)) == [("state_topic", "t" * 250)]
    assert problems(changed(("state_topic",), "..")) == [("state_topic", "..")]
    assert parse_spec(changed(("state_topic",), "t" * 249), "acme.yaml").state_topic_name == "t" * 249


def test_a_backtracking_regex_matches_in_linear_time():
    # (a+)+b against 'a'*n: Python's re takes seconds at ~25 characters, doubling with each; topic names reach 249
    spec = parse_spec(changed(("topics", "include"), ["(a+)+b"]), "acme.yaml")
    assert not spec.topics.matches("a" * 249)
    assert spec.topics.matches("a" * 248 + "b")


@pytest.mark.parametrize("pattern, reason", [
    ("(a)\\1", "backreferences and lookaround are not supported"),
    ("orders(?=\\.eu)", "backreferences and lookaround are not supported"),
    ("(?<!x)orders", "backreferences and lookaround are not supported"),
    ("a" * 1001, "at most 1000"),
])
def test_a_regex_re2_cannot_take_is_refused_naming_field_and_value(pattern, reason):
    with pytest.raises(SpecError) as raised:
        parse_spec(changed(("topics", "include"), ["ok.*", pattern]), "acme.yaml")
    problem = raised.value.problems[0]
    assert (problem.field, problem.value) == ("topics.include[1]", pattern)
    assert reason in problem.problem


@given(st.text(alphabet="ab.-_", max_size=30), st.sampled_from(["a.*", "[ab]+", "a|b", "(ab)*", "x?a.b"]))
def test_re2_full_match_agrees_with_python_fullmatch(text, pattern):
    import re

    from kafka_ferry.core.specs.patterns import full_match

    assert full_match(pattern, text) == (re.fullmatch(pattern, text) is not None)


def test_timeouts_default_and_are_validated():
    spec = parse_spec(VALID, "acme.yaml")
    assert (spec.timeouts.task_seconds, spec.timeouts.copy_seconds) == (3600, 6 * 3600)
    assert problems(changed(("timeouts",), {"task_seconds": 0})) == [("timeouts.task_seconds", 0)]
    assert parse_spec(changed(("timeouts",), {"copy_seconds": 600}), "a.yaml").timeouts.copy_seconds == 600


def test_yaml_aliases_are_refused_with_their_line(tmp_path):
    # the shape: each level nine aliases of the one before (1.5 s and 26 MB at five levels before)
    levels = ['a0: &a0 ["x", "x", "x", "x", "x", "x", "x", "x", "x"]']
    for i in range(1, 9):
        levels.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]")
    path = tmp_path / "bomb.yaml"
    path.write_text(VALID_YAML + "\n".join(levels) + "\n")
    with pytest.raises(SpecError) as raised:
        read_yaml(path)
    first = raised.value.problems[0]
    assert (first.line, first.column) == (7, 5)
    assert "YAML anchor '&a0' refused" in first.problem
    assert any("YAML alias '*a0' refused" in p.problem and p.line == 8 for p in raised.value.problems)


def test_an_oversized_file_is_refused_unread(tmp_path):
    path = tmp_path / "big.yaml"
    path.write_text(VALID_YAML + "description: " + "x" * MAX_SPEC_BYTES + "\n")
    with pytest.raises(SpecError, match=f"larger than {MAX_SPEC_BYTES} bytes"):
        read_yaml(path)


def test_deep_nesting_is_refused(tmp_path):
    path = tmp_path / "deep.yaml"
    path.write_text("description: " + "[" * 5000 + "]" * 5000 + "\n")
    with pytest.raises(SpecError, match="nested deeper than 64 levels"):
        read_yaml(path)


HOSTILE_NAMES = ['acme");__import__("os").system("id");("x.yaml', "t{{ 7*7 }}.yaml", "newline\n.yaml"]


def hostile_directory(folder: Path) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = [folder / name for name in HOSTILE_NAMES]
    for path in paths:
        path.write_text(VALID_YAML)
    bomb = folder / "bomb.yaml"
    bomb.write_text(VALID_YAML + "a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n")
    regex = folder / "regex.yaml"
    regex.write_text(VALID_YAML.replace('["orders\\\\..*"]', '["(a+)+b", "(x)\\\\1"]')
                     .replace("name: acme-orders", 'name: "acme\\n"'))
    return [*paths, bomb, regex]


def test_check_files_reports_every_problem_of_a_hostile_directory(tmp_path):
    valid, errors = check_files(hostile_directory(tmp_path / "specs"))
    assert valid == []
    text = "\n".join(str(e) for e in errors)
    for name in HOSTILE_NAMES:
        assert f"file name {name!r} refused" in text
    assert "YAML anchor '&a' refused" in text and "YAML alias '*a' refused" in text
    assert "field 'name' = 'acme\\n'" in text
    assert "field 'topics.include[1]' = '(x)\\\\1': not a regex RE2 accepts" in text


def test_the_spec_check_cli_reports_a_hostile_directory_and_exits_1(tmp_path):
    paths = hostile_directory(tmp_path / "specs")
    done = subprocess.run([sys.executable, "-m", "kafka_ferry.core.specs.spec_check", "check", *map(str, paths)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1, done.stderr
    assert f"{len(paths)} spec(s) checked: 0 valid, {len(paths)} with" in done.stdout
