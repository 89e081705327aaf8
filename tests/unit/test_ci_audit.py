"""CI's audit of constraints.txt (.ci/audit_constraints.py): a vulnerable pin fails, an unreachable service warns.

pip-audit itself is not installed in the project's venv; these feed its JSON report shapes to the verdict."""

from __future__ import annotations

import importlib.util
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("audit_constraints", REPO / ".ci" / "audit_constraints.py")
assert spec is not None and spec.loader is not None
audit = importlib.util.module_from_spec(spec)
spec.loader.exec_module(audit)

CLEAN = {"dependencies": [{"name": "fastavro", "version": "1.13.1", "vulns": []}], "fixes": []}
VULNERABLE = {"dependencies": [
    {"name": "fastavro", "version": "1.13.1", "vulns": []},
    {"name": "urllib3", "version": "1.24.1", "vulns": [{"id": "GHSA-mh33-7rrq-662w", "fix_versions": ["1.24.2"]}]},
]}
SKIPPED = {"dependencies": [{"name": "urllib3", "skip_reason": "Dependency not found on PyPI and could not be "
                                                               "audited: urllib3 (1.24.1)"}], "fixes": []}


def test_a_known_vulnerable_pin_fails_ci():
    code, lines = audit.verdict({"pypi": VULNERABLE}, [])
    assert code == 1 and lines == ["VULNERABLE: urllib3==1.24.1: GHSA-mh33-7rrq-662w (fixed in 1.24.2)"]


def test_a_vulnerability_from_the_second_service_fails_even_when_the_first_skipped_everything():
    code, lines = audit.verdict({"pypi": SKIPPED, "osv": VULNERABLE}, [])
    assert code == 1 and lines[0].startswith("VULNERABLE: urllib3==1.24.1")


def test_an_unreachable_service_or_a_mirror_that_answers_404_only_warns():
    code, lines = audit.verdict({"pypi": SKIPPED, "osv": None}, ["osv: exit 1: ConnectionError"])
    assert code == 0
    assert "WARNING: vulnerability service unreachable: osv: exit 1: ConnectionError" in lines
    assert any(line.startswith("WARNING: 1 pin(s) not audited") and "urllib3" in line for line in lines)


def test_a_clean_audit_passes_quietly():
    assert audit.verdict({"pypi": CLEAN}, []) == (0, ["audit: no known vulnerability in 1 audited pin(s) of 1"])


def test_ci_runs_the_audit_after_the_install():
    run = (REPO / ".ci" / "run").read_text()
    assert run.index("make install") < run.index(".ci/audit_constraints.py constraints.txt") < run.index(
        "kafka_testbed.py up")
