"""CI's vulnerability audit of constraints.txt: a known-vulnerable pin fails CI; an unreachable service only warns.

Runs pip-audit (installed in a throwaway venv by .ci/run, never in the project's) over the pinned set without
resolving it again (``--disable-pip --no-deps``), first against the PyPI JSON API, then OSV. Why the verdict is
ours and not pip-audit's exit code: where the vulnerability service cannot be reached, or answers 404 for every
``/pypi/<name>/<version>/json`` (a PyPI mirror serving only the simple index and project pages), pip-audit
reports each pin as *skipped* and exits 0: a green that audited nothing. Here that is a loud warning naming how
many pins went unaudited; a vulnerability found by any service is fatal.

    python .ci/audit_constraints.py constraints.txt     # exit 1: vulnerable pin; 0: clean or not auditable
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SERVICES = ("pypi", "osv")


def audit(requirements: Path, service: str) -> tuple[dict | None, str]:
    """pip-audit's JSON report for one service, or None and why it gave none (unreachable, crashed)."""
    command = [sys.executable, "-m", "pip_audit", "--disable-pip", "--no-deps", "-r", str(requirements),
               "-f", "json", "-s", service, "--progress-spinner", "off"]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=900)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"{service}: {type(exc).__name__}"
    try:
        return json.loads(done.stdout), ""
    except ValueError:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return None, f"{service}: exit {done.returncode}: {last[:300]}"


def verdict(reports: dict[str, dict | None], errors: list[str]) -> tuple[int, list[str]]:
    """(exit code, lines to print): 1 when any service names a vulnerability of a pin; 0 otherwise."""
    lines: list[str] = []
    vulnerable: dict[str, set[str]] = {}
    audited_by_any: set[str] = set()
    pins: set[str] = set()
    for report in reports.values():
        if report is None:
            continue
        for dep in report.get("dependencies", []):
            key = f"{dep['name']}=={dep.get('version', '?')}" if dep.get("version") else dep["name"]
            pins.add(dep["name"])
            if dep.get("skip_reason"):
                continue
            audited_by_any.add(dep["name"])
            for vuln in dep.get("vulns", []):
                vulnerable.setdefault(key, set()).add(
                    f"{vuln.get('id')} (fixed in {', '.join(vuln.get('fix_versions') or []) or 'no release yet'})")
    for key, ids in sorted(vulnerable.items()):
        lines.append(f"VULNERABLE: {key}: {'; '.join(sorted(ids))}")
    unaudited = sorted(pins - audited_by_any)
    if errors:
        lines.append("WARNING: vulnerability service unreachable: " + " | ".join(errors))
    if unaudited or not pins:
        lines.append(f"WARNING: {len(unaudited) if pins else 'all'} pin(s) not audited (no service answered for "
                     f"them; a mirror without /pypi/<name>/<version>/json answers 404): "
                     f"{', '.join(unaudited[:20])}{' ...' if len(unaudited) > 20 else ''}")
    if not vulnerable:
        lines.append(f"audit: no known vulnerability in {len(audited_by_any)} audited pin(s) of {len(pins)}")
    return (1 if vulnerable else 0), lines


def main(argv: list[str]) -> int:
    requirements = Path(argv[0] if argv else "constraints.txt")
    reports: dict[str, dict | None] = {}
    errors: list[str] = []
    for service in SERVICES:
        report, error = audit(requirements, service)
        reports[service] = report
        if error:
            errors.append(error)
        elif report is not None and not any(d.get("skip_reason") for d in report.get("dependencies", [])):
            break  # every pin audited by this service: no need to ask the next one
    code, lines = verdict(reports, errors)
    for line in lines:
        print(line)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
