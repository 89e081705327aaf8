"""Spec files as users write them: every problem in one report, located by line; YAML syntax errors that read well."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from kafka_ferry.core.specs.spec import load_spec
from kafka_ferry.core.specs.spec_source import SpecError

REPO = Path(__file__).resolve().parents[3]

FIVE_MISTAKES = textwrap.dedent("""\
    name: Bad Name
    tenant: acme
    source:
      connection_id: kafka_src
      alias: src
    destination:
      connection_id: kafka_dst
      alias: dst
    topics:
      include: ["orders\\\\..*", "orders.(["]
    copy:
      max_records_per_partition: -5
      max_recrods_per_partition: 5
    schedule: "every minute"
    """)


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def report_of(path: Path) -> str:
    with pytest.raises(SpecError) as raised:
        load_spec(path)
    return str(raised.value)


def test_five_mistakes_give_five_located_problems_in_file_order(tmp_path):
    path = write(tmp_path, "acme.yaml", FIVE_MISTAKES)

    assert report_of(path) == "\n".join([
        f"{path}: 5 problems in this migration spec",
        f"{path}:1: field 'name' = 'Bad Name': name must start with a lowercase letter or digit and hold only a-z, "
        "0-9, '_', '-'",
        f"{path}:10: field 'topics.include[1]' = 'orders.([': not a valid regex: unterminated character set at "
        "position 8",
        f"{path}:12: field 'copy.max_records_per_partition' = -5: Input should be greater than 0",
        f"{path}:13: field 'copy.max_recrods_per_partition' = 5: unknown key (did you mean "
        "'max_records_per_partition'?); known here: accept_retention_gaps, credentials_file, fast_driver_start, "
        "kubernetes_credentials_secret, lanes_per_task, max_bytes_per_partition, max_bytes_per_second, "
        "max_records_per_partition, max_records_per_second, offset_sync_interval, provenance_headers, "
        "spark_connection_id, window",
        f"{path}:14: field 'schedule' = 'every minute': schedule must be a 5-field cron expression, an @preset, "
        "or null",
    ])


def test_a_missing_field_points_at_its_parent_and_a_missing_top_level_field_comes_last(tmp_path):
    text = FIVE_MISTAKES.replace("name: Bad Name\n", "").replace("tenant: acme\n", "").replace("  alias: dst\n", "")
    text = text.replace("-5", "5").replace("  max_recrods_per_partition: 5\n", "").replace('"every minute"', "null")
    path = write(tmp_path, "acme.yaml", text.replace(', "orders.(["', ""))

    assert report_of(path) == "\n".join([
        f"{path}: 3 problems in this migration spec",
        f"{path}:4: field 'destination.alias' is missing: required, and has no default",
        f"{path}: field 'name' is missing: required, and has no default",
        f"{path}: field 'tenant' is missing: required, and has no default",
    ])


def test_a_key_given_twice_is_reported_not_silently_overwritten(tmp_path):
    path = write(tmp_path, "acme.yaml", FIVE_MISTAKES.replace("schedule:", "name: other\nschedule:"))

    assert report_of(path) == (f"{path}:14: field 'name' = 'other': given twice (first at line 1); YAML would "
                               "silently keep only the last")


YAML_SYNTAX_ERRORS = [
    ("unclosed flow sequence", "name: x\ntopics: [unclosed\n",
     "2:9: expected ',' or ']', but got '<stream end>' (while parsing a flow sequence that starts here)\n"
     "   2 | topics: [unclosed\n"
     "     |         ^"),
    ("indented key", "name: x\n  tenant: acme\n",
     "2:9: mapping values are not allowed here\n"
     "   2 |   tenant: acme\n"
     "     |         ^"),
    ("tab indentation", "source:\n\tconnection_id: a\n",
     "2:1: found character '\\t' that cannot start any token (while scanning for the next token)\n"
     "   2 | \tconnection_id: a\n"
     "     | ^"),
    ("unclosed quote", 'name: "x\ntenant: acme\n',
     "1:7: found unexpected end of stream (while scanning a quoted scalar that starts here)\n"
     '   1 | name: "x\n'
     "     |       ^"),
    ("flow mapping not closed on its line", "copy: {a: 1\ntenant: acme\n",
     "2:7: expected ',' or '}', but got ':' (while parsing a flow mapping at line 1, column 7)\n"
     "   2 | tenant: acme\n"
     "     |       ^"),
]


@pytest.mark.parametrize(("label", "text", "expected"), YAML_SYNTAX_ERRORS, ids=[c[0] for c in YAML_SYNTAX_ERRORS])
def test_yaml_syntax_errors_name_line_and_column_and_quote_the_line(tmp_path, label, text, expected):
    path = write(tmp_path, "broken.yaml", text)
    assert report_of(path) == f"{path}:{expected}"


def run_check(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO / "plugins")}
    return subprocess.run([sys.executable, "-m", "kafka_ferry.core.specs.spec_check", "check", *args], env=env,
                          capture_output=True, text=True, timeout=60)


def test_check_command_prints_every_problem_of_every_file_and_fails(tmp_path):
    bad = write(tmp_path, "bad.yaml", FIVE_MISTAKES)
    broken = write(tmp_path, "broken.yaml", "name: x\ntopics: [unclosed\n")
    good = REPO / "dags" / "migrations" / "demo-tenant.yaml"
    twin = write(tmp_path, "twin.yaml", good.read_text())

    done = run_check(str(good), str(bad), str(broken), str(twin))

    assert done.returncode == 1, done.stderr
    lines = done.stdout.splitlines()
    # two files with one name: both refused, each naming the other (issue 36: the first one passed)
    twin_line = ("field 'name' = 'demo-tenant': {} has this name too; each migration needs its own (it is the DAG "
                 "id, work dir and state topic): none of them gets a DAG until all but one are renamed")
    assert lines[0] == f"{good}:3: " + twin_line.format(twin)
    assert lines[1] == f"{bad}: 5 problems in this migration spec"
    assert [line.split(": field ")[0] for line in lines[2:7]] == [f"{bad}:{n}" for n in (1, 10, 12, 13, 14)]
    assert lines[7:10] == [
        f"{broken}:2:9: expected ',' or ']', but got '<stream end>' (while parsing a flow sequence that starts here)",
        "   2 | topics: [unclosed",
        "     |         ^",
    ]
    assert lines[10:] == [
        f"{twin}:3: " + twin_line.format(good),
        "4 spec(s) checked: 0 valid, 4 with 8 problem(s)",
    ]


def test_check_command_passes_the_repository_specs_and_refuses_bad_usage():
    specs = sorted(str(p) for p in (REPO / "dags" / "migrations").glob("*.yaml"))
    done = run_check(*specs)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[-1] == f"{len(specs)} spec(s) checked: {len(specs)} valid, 0 with 0 problem(s)"

    usage = subprocess.run([sys.executable, "-m", "kafka_ferry.core.specs.spec_check"], capture_output=True, text=True,
                           env={**os.environ, "PYTHONPATH": str(REPO / "plugins")}, timeout=60)
    assert usage.returncode == 2
    assert usage.stderr == ("usage: python -m kafka_ferry.core.specs.spec_check check [--tenants TENANTS.yaml] "
                            "SPEC.yaml [SPEC.yaml ...]\n")
