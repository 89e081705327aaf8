"""The copy task's failure when the copy job stopped on a cause no retry heals: one message, on the task and the page.

The operator does not decide that the task fails: ``CopyStopped`` is ``Permanent`` like the ``CopyFailed`` it
completes, and ``task_support.fail_fast`` (the one reader of that policy) fails the task once.

The copy job (spark-submit or Spark Connect) hands back a failure record (`copy.copy_failures`): where it
stopped and why. This module turns it into the task's error message, adding what only the Airflow side can
learn (the copy job never talks to a registry): for a schema id the migration did not map, the source
subject and version registered with it, and whether the source soft-deleted that version. The same message
goes on the run's page, since no later task of the run writes one.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from kafka_ferry.copy.plan import work_dir
from kafka_ferry.core.common.failures import Permanent
from kafka_ferry.core.specs.spec import MigrationSpec

log = logging.getLogger(__name__)


class CopyStopped(Permanent, RuntimeError):
    """``CopyFailed`` with what only the Airflow side knows added to its message (``failure_message``)."""


def failure_message(spec: MigrationSpec, record: Mapping[str, Any]) -> str:
    if record.get("kind") != "unmapped-schema-id":
        return str(record["message"])
    where = (f"{record['topic']}-{record['partition']} at offset {record['offset']}: the {record['field']} carries "
             f"schema id {record['schema_id']}")
    versions = _source_versions(spec, int(record["schema_id"]))
    if versions is None:
        named = " (the source registry could not be asked which subject and version it is)"
    elif not versions:
        named = " (unknown to the source registry too: the record never decoded there)"
    else:
        named = " (source " + ", ".join(f"subject {s!r} version {v}" + (", soft-deleted" if d else "")
                                        for s, v, d in versions) + ")"
    soft_deleted = bool(versions and all(d for _, _, d in versions))
    assert spec.schema_registry is not None  # a record names a schema id only where the spec has a registry
    if soft_deleted and not spec.schema_registry.include_soft_deleted:
        advice = ("the spec leaves soft-deleted versions behind (schema_registry.include_soft_deleted: false); "
                  "set it to true (the default) and run migrate_schemas again, then the copy")
    elif versions:
        advice = "run migrate_schemas again (it maps every version of the migrated subjects), then the copy"
    else:
        # No registry knows the id: either the record is broken, or this field is not registry-serialized at all
        # and the per-topic decision (core.schemas.serialized_fields) took it for one (e.g. a stale <topic>-key
        # subject).
        advice = (f"if the {record['field']}s of {record['topic']} are not written by a registry serializer, say so "
                  "in schema_registry.serialized_fields and run migrate_schemas again; otherwise the record cannot "
                  "be decoded anywhere: fix or drop it on the source, then run the copy again")
    return (f"copy stopped on {where}{named}, which the schema migration did not map (unknown_id_policy: fail); "
            f"no consumer could decode it on the destination. Progress stays before offset {record['offset']}; "
            f"{advice}")


def _source_versions(spec: MigrationSpec, schema_id: int) -> list[tuple[str, int, bool]] | None:
    from kafka_ferry.hooks.schema_registry import RegistryConnectionError
    from kafka_ferry.operators.schemas import registry

    assert spec.schema_registry is not None  # asked only about a record's schema id (failure_message)
    try:
        source = registry(spec.schema_registry.source_connection_id)
    except RegistryConnectionError:  # the source registry's connection is malformed: nothing to ask
        return None
    try:
        return source.versions_of_id(schema_id)
    except Exception as exc:  # noqa: BLE001 - the failure being reported matters more than this lookup
        log.warning("could not ask the source registry about schema id %s: %s", schema_id, exc)
        return None
    finally:
        source.close()


def copy_stopped(spec: MigrationSpec, summary: Mapping[str, Any], record: Mapping[str, Any], run_id: str
                 ) -> CopyStopped:
    """The task's failure (no retry) with the record's message, once that message is on the run's page."""
    message = failure_message(spec, record)
    try:
        from kafka_ferry.reports.publish import publish_batch_run

        report = {"migration": spec.name, "batch_id": summary.get("batch_id"), "status": "failed",
                  "failure": message}
        publish_batch_run(spec, work_dir(spec.name), run_id or str(summary.get("batch_id")), report, [], [])
    except Exception as exc:  # noqa: BLE001 - the page is a copy of the message, the task's failure is the record
        log.warning("could not write the run page: %s", exc)
    return CopyStopped(message)
