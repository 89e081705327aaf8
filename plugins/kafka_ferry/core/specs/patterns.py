"""Spec regexes matched in linear time (RE2), and the full-match name rules of the spec.

Why RE2 and not Python's ``re``: a spec's ``topics.include`` is matched against every topic name of a cluster,
and topic names reach 249 characters. A backtracking pattern such as ``(a+)+b`` takes seconds at 25
characters and doubles with each one more under ``re``; RE2 guarantees time linear in the name, so a hostile
or careless pattern cannot hold the dag-processor or a worker. RE2 refuses what it cannot match in linear time
(backreferences, lookaround): such a pattern is a spec error naming the pattern, never a silent fallback.

Why full-match: ``^...$`` lets ``$`` match before a final newline, so ``"acme\\n"`` passed as a name and failed
later, somewhere else. Every name rule here is applied with ``fullmatch`` (whole string, no newline slack).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache
from typing import Any

from kafka_ferry.core.common.failures import Retryable

# A spec regex longer than this is a mistake or an attack; RE2 bounds its memory, this bounds the text.
MAX_PATTERN_LENGTH = 1000
# RE2's memory budget per compiled pattern: a large counted repetition fails to compile instead of using more.
_MAX_MEM = 8 << 20


class PatternError(Retryable, ValueError):
    """A spec regex RE2 cannot compile; the message says why (e.g. a backreference or lookaround)."""


def _options() -> Any:  # re2.Options: google-re2 ships no types
    import re2

    options = re2.Options()
    options.log_errors = False  # the error goes into the spec report, not onto stderr
    options.max_mem = _MAX_MEM
    return options


@lru_cache(maxsize=4096)
def compiled(pattern: str) -> Any:  # an re2 program (google-re2 ships no types)
    """The RE2 program of a spec regex (cached: the same patterns are matched against every topic name)."""
    if len(pattern) > MAX_PATTERN_LENGTH:
        raise PatternError(f"a regex of {len(pattern)} characters; at most {MAX_PATTERN_LENGTH}")
    try:  # Python's parser first: its messages say where a syntax error is (compiling never backtracks)
        re.compile(pattern)
    except re.error as exc:
        raise PatternError(f"not a valid regex: {exc}") from None
    import re2  # here, not at the top: the name rules below reach the Spark job, which needs no RE2 on executors

    try:
        return re2.compile(pattern, _options())
    except re2.error as exc:
        reason = exc.args[0].decode(errors="replace") if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        hint = ""
        if re.search(r"\\[1-9]|\(\?[=!<]", pattern):
            hint = " (backreferences and lookaround are not supported: RE2 matches in linear time)"
        raise PatternError(f"not a regex RE2 accepts: {reason}{hint}") from None


def full_match(pattern: str, text: str) -> bool:
    """Whether ``pattern`` matches the whole of ``text``, in time linear in ``text``."""
    return compiled(pattern).fullmatch(text) is not None


def any_full_match(patterns: Iterable[str], text: str) -> bool:
    return any(full_match(p, text) for p in patterns)


# --- name rules (applied with re.fullmatch: the patterns below hold no anchors on purpose) -----------------------

# Airflow's own rule for connection ids (letters, digits, '-', '_', '.'), bounded like its column.
CONNECTION_ID = re.compile(r"[A-Za-z0-9_.\-]{1,250}")
# Migration names become DAG ids, task-free file names and Kafka topic names: keep them to what all accept.
MIGRATION_NAME = re.compile(r"[a-z0-9][a-z0-9_\-]{0,99}")
# Kafka's legal topic characters and length (Topic.validate: [a-zA-Z0-9._-], 1-249, not "." or "..").
TOPIC_NAME = re.compile(r"[A-Za-z0-9._\-]{1,249}")
CLUSTER_ALIAS = re.compile(r"[A-Za-z0-9_\-]{1,64}")
# A tenant names tags, pages and an entry of the tenants file.
TENANT = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,99}")
# '<Type>:<name>': the name may hold what Kafka principals hold, but no control character (newline included).
PRINCIPAL = re.compile(r"[A-Za-z][A-Za-z0-9_]*:[^\x00-\x1f\x7f]+")
# '<Secret name>:<key>' of a Kubernetes Secret (DNS subdomain name, config-map key characters).
SECRET_REF = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?:[-._a-zA-Z0-9]{1,253}")
# A migration spec's file name: it names the generated DAG file and is quoted in it.
SPEC_FILE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,199}\.ya?ml")


def is_topic_name(value: str) -> bool:
    return TOPIC_NAME.fullmatch(value) is not None and value not in (".", "..")
