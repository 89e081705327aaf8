"""Which failures a retry cannot heal: the exception says so itself, and one function reads it.

Why on the exception: the code that raises knows whether the same call would get the same answer (an
invalid spec, a refusal by the cluster or the registry, records lost to retention); a list of types kept
elsewhere forgets new ones, and operators that re-caught some to fail the task missed others. A class
declares it by inheriting ``Permanent``; an exception whose permanence depends on the answer (a Kafka
error code) sets the ``permanent`` attribute per instance. ``task_support.fail_fast`` fails the task at
once for these, and the copy job turns them into failure records (``copy.copy_failures``).
"""

from __future__ import annotations


class Permanent:
    """Mixin for an exception no retry can heal: the same call gives the same answer on every try."""

    permanent = True


def retry_cannot_help(exc: BaseException) -> bool:
    """True when the exception declares that trying again cannot change the outcome."""
    return getattr(exc, "permanent", False) is True
