"""What a migration run may be asked to do from the trigger form (or REST), checked before anything changes.

Why here and not only in the form's JSON schema: the schema makes `mode` a dropdown and rejects unknown
values over REST, but a promotion must also be *meant*: a cutover is one dropdown change away from a
catch-up, so `promote` needs the migration's name typed into `confirm_migration` (a mis-click cannot cut
over). And a key the form does not know (an old `{"dry_run": true}` script) must not be silently ignored,
which would turn an intended dry run into a real one. The pre-flight task runs these checks first.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from kafka_ferry.core.common.failures import Permanent

CATCH_UP, PROMOTE, DRY_RUN = "catch-up", "promote", "dry-run"
PROMOTE_GROUPS, PROMOTE_TOPICS = "promote-groups", "promote-topics"  # staged cutover: groups first, then topics
# after a cutover: back to the source (confirmed like a promotion), or only its plan (a dry run: changes nothing)
ROLLBACK, ROLLBACK_PLAN = "rollback", "rollback-plan"
MODES = (CATCH_UP, PROMOTE, PROMOTE_GROUPS, PROMOTE_TOPICS, DRY_RUN, ROLLBACK, ROLLBACK_PLAN)
CONFIRMED_MODES = (PROMOTE, PROMOTE_GROUPS, PROMOTE_TOPICS, ROLLBACK)
DRY_RUN_MODES = (DRY_RUN, ROLLBACK_PLAN)
CONFIRM_FIELD = "confirm_migration"
GROUPS_FIELD, TOPICS_FIELD, WAIVE_FIELD = "groups", "topics", "waive_groups"
# A task field rendered "True" on a dry-run or a rollback plan (a Jinja template), so provisioning and planning
# change nothing.
DRY_RUN_TEMPLATE = f"{{{{ params.mode in ('{DRY_RUN}', '{ROLLBACK_PLAN}') }}}}"


class TriggerRefused(Permanent, ValueError):
    """The run's parameters ask for something invalid or unconfirmed; the run stops before any change."""


def trigger_problems(migration: str, params: Mapping[str, Any], conf_keys: Iterable[str] = (),
                     known_keys: Iterable[str] = ()) -> list[str]:
    """Every problem with the run's parameters, in a fixed order (empty when the run may go ahead)."""
    problems = []
    known = set(known_keys)
    for key in sorted(set(conf_keys) - known):
        hint = f" (use mode={DRY_RUN!r})" if key == "dry_run" else ""
        problems.append(f"unknown trigger field {key!r}{hint}; the form's fields are: {', '.join(sorted(known))}")
    mode = params.get("mode", CATCH_UP)
    if mode not in MODES:
        problems.append(f"mode {mode!r} is not one of {', '.join(repr(m) for m in MODES)}")
    elif mode in CONFIRMED_MODES:
        typed = str(params.get(CONFIRM_FIELD) or "").strip()
        if typed != migration:
            got = f"got {typed!r}" if typed else "it is empty"
            what = "the rollback" if mode == ROLLBACK else "the cutover"
            problems.append(f"{mode} needs the migration name {migration!r} typed into {CONFIRM_FIELD!r} "
                            f"to confirm {what}; {got}")
        needed = {PROMOTE_GROUPS: GROUPS_FIELD, PROMOTE_TOPICS: TOPICS_FIELD}.get(mode)
        if needed and not names(params.get(needed)):
            problems.append(f"{mode} needs at least one name in {needed!r}; it is empty")
    problems += _name_problems(params)  # every mode: the fields are input whatever mode reads them
    return problems


# More groups or topics than one run should take (promote or take back): a bound on the work a form can ask for
# and on every check and message that lists them (issue 36: 4,000 names passed pre-flight, a 65 KB error).
MAX_NAMES = 1000
MAX_NAME_LENGTH = 1000  # a consumer group id has no length limit in Kafka; longer than this is no one's group
MAX_FIELD_CHARS = 2 * MAX_NAMES * MAX_NAME_LENGTH  # a text field is split only up to here (a bounded split)
SHOWN_NAMES = 5  # names a message shows before "and N more"
TOPIC_NAME = re.compile(r"[A-Za-z0-9._-]{1,249}")  # what Kafka accepts as a topic name


def shown(items: Iterable[str], limit: int = SHOWN_NAMES) -> str:
    """The first ``limit`` names (each cut to 60 characters) and how many more: a message stays bounded."""
    items = list(items)
    text = ", ".join(repr(str(i)[:60]) for i in items[:limit])
    return text + (f" and {len(items) - limit} more" if len(items) > limit else "")


def _name_problems(params: Mapping[str, Any]) -> list[str]:
    """The chosen names, checked as input before anything runs: a bounded count and length, topic names Kafka could
    hold (whether each is one of the migration's is checked against its state when the task runs)."""
    problems = []
    for field in (GROUPS_FIELD, TOPICS_FIELD, WAIVE_FIELD):
        value = params.get(field)
        if isinstance(value, str) and len(value) > MAX_FIELD_CHARS:
            problems.append(f"{field!r} is {len(value)} characters long; at most {MAX_FIELD_CHARS}")
            continue
        if isinstance(value, (list, tuple)) and len(value) > 2 * MAX_NAMES:
            problems.append(f"{field!r} names {len(value)} units; at most {MAX_NAMES} per run")
            continue
        chosen = names(value)
        if len(chosen) > MAX_NAMES:
            problems.append(f"{field!r} names {len(chosen)} units; at most {MAX_NAMES} per run")
        long = [n for n in chosen if len(n) > MAX_NAME_LENGTH]
        if long:
            problems.append(f"{field!r}: {len(long)} name(s) longer than {MAX_NAME_LENGTH} characters: {shown(long)}")
        if field == TOPICS_FIELD:
            bad = [t for t in chosen if not TOPIC_NAME.fullmatch(t)]
            if bad:
                problems.append(f"{TOPICS_FIELD!r}: not a Kafka topic name (letters, digits, '.', '_', '-', 1 to "
                                f"249): {shown(bad)}")
    return problems


def names(value: Any) -> list[str]:
    """A form list field as names: a list, or text with one name per line or comma; blanks dropped."""
    items = value if isinstance(value, (list, tuple)) else str(value or "").replace(",", "\n").splitlines()
    return sorted({str(i).strip() for i in items if str(i).strip()})


def check_trigger(migration: str, params: Mapping[str, Any], conf_keys: Iterable[str] = (),
                  known_keys: Iterable[str] = ()) -> str:
    """The run's mode when its parameters are valid; otherwise ``TriggerRefused`` naming every problem."""
    problems = trigger_problems(migration, params, conf_keys, known_keys)
    if problems:
        raise TriggerRefused(f"run of migration {migration!r} refused: " + "; ".join(problems))
    return str(params.get("mode", CATCH_UP))  # a valid mode, checked above


def is_dry_run(mode: Any) -> bool:
    return mode in DRY_RUN_MODES
