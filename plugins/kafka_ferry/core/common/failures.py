"""One base for every exception kafka-ferry raises, and on it whether a retry can heal the failure.

Why one base: a caller (a task, the CLI, the copy job's failure records) can tell the tool's own failures from a
library's by one type, ``KafkaFerryError``, and every one of them answers the one question retries ask.

Why on the exception: the code that raises knows whether the same call would get the same answer (an
invalid spec, a refusal by the cluster or the registry, records lost to retention); a list of types kept
elsewhere forgets new ones, and operators that re-caught some to fail the task missed others. A class
declares it by inheriting ``Permanent`` (no retry heals it) or ``Retryable`` (a later try may succeed: a busy
group, a lease held, a registry that did not answer); an exception whose permanence depends on the answer (a
Kafka error code) declares ``permanent`` in its class body and sets it per instance. A class keeps its builtin
base too (``ValueError``, ``RuntimeError``, ``KeyError``) where callers catch that. ``task_support.fail_fast``
fails the task at once for permanent ones, and the copy job turns them into failure records
(``copy.copy_failures``). ``tests/unit/test_exceptions.py`` fails on a class of the package that does not derive
from the base or does not declare which it is.
"""

from __future__ import annotations


class KafkaFerryError(Exception):
    """Base of every exception of kafka-ferry; a subclass declares ``permanent`` (see the module's docstring)."""

    permanent: bool  # declared by Permanent, Retryable, or per instance by a class that decides it from the answer


class Permanent(KafkaFerryError):
    """An exception no retry can heal: the same call gives the same answer on every try."""

    permanent = True


class Retryable(KafkaFerryError):
    """An exception the task keeps its retries for: a later try may heal it (a busy group, a lease still held, a
    registry that did not answer). Every class that did not inherit ``Permanent`` before the base existed declares
    this, so the base changed no task's behaviour; a class that is in truth deterministic moves to ``Permanent``
    on its own, with its reason."""

    permanent = False


def retry_cannot_help(exc: BaseException) -> bool:
    """True when the exception declares that trying again cannot change the outcome."""
    return getattr(exc, "permanent", False) is True
