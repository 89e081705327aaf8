"""The package's floors, top to bottom: the one table the import test checks and the README's picture shows.

A module may import its own floor and the floors below, never one above, and no two folders may import each
other, directly or round a loop (``tests/unit/test_import_graph.py``). The README's architecture picture is
``picture()``, pasted between its ``layers`` markers; the same test fails when the two differ. Print it with
``python -m kafka_ferry.layers``.

Imports nothing: it is data about the package, read by tests and docs.
"""

from __future__ import annotations

from dataclasses import dataclass
from textwrap import wrap


@dataclass(frozen=True)
class Floor:
    name: str
    # folder (``name/``) or top-level module (``name.py``) -> what it holds, one line of the picture each
    parts: tuple[tuple[str, str], ...]

    @property
    def packages(self) -> tuple[str, ...]:
        """The part names as an import names them (``copy/`` -> ``copy``, ``plugin.py`` -> ``plugin``)."""
        return tuple(part.removesuffix("/").removesuffix(".py") for part, _ in self.parts)


FLOORS: tuple[Floor, ...] = (
    Floor("airflow edge", (
        ("dag_factory.py", "one DAG per spec: preflight, schemas, provisioning, copy batches, translation"),
        ("dag_promotion.py", "the promotion run: sensors, final copy, translate, commit, reconcile, mark"),
        ("plugin.py", "the Airflow plugin: report pages"),
        ("provider_info.py", "what Airflow's providers manager reads: the schemaregistry connection type, its form "
                             "fields, the hooks"),
        ("task_support.py", "what every task shares: spec, clients, state store, the deterministic-failure policy"),
        ("hooks/", "a Connection -> a client, nothing more: KafkaClusterHook.get_conn is a KafkaCluster, "
                   "SchemaRegistryHook a registry client"),
        ("operators/", "thin adapters of the folders below to Airflow tasks"),
        ("sensors/", "promotion gates (lag, quiesced, groups inactive), deferring to triggers/"),
        ("triggers/", "the async side of the sensors; primitives only"),
        ("airflow_native/", "what Airflow shows of a migration: topics as Assets (events through per-migration "
                            "aliases), OpenLineage of the copy and promotion tasks, metrics through Stats"),
        ("cli/", "the kafka-ferry command: runs a spec's own DAG (dag.test), status, reset-promotion"),
    )),
    Floor("promotion", (
        ("promotion/", "readiness gates, steps.py (the whole migration's step table), commit.py (commits group "
                       "offsets), reconcile.py, guard, promotion_report.py; staged cutover: group.py and topic.py "
                       "(a group's or a topic's own step table), group_readiness.py"),
    )),
    Floor("translation", (
        ("translation/", "offset syncs, MM2 checkpoints, translate.py (decides through core.offsets.offset_decisions; "
                         "commits only when asked)"),
    )),
    Floor("copy", (
        ("copy/", "plan.py (CopyPlan, the one plan type), planning.py (from stored progress + source offsets), "
                  "spark_job.py (what spark-submit or Spark Connect runs), runner.py, partition_copier.py (why "
                  "delivery is exact: delivery.py), lease.py, catch_up.py (batches until caught up), "
                  "throttle.py (the rate limit's pacing), backlog.py (backlog, rate and ETA of a run), "
                  "live_progress.py (a running batch's page), jvm_archive.py"),
    )),
    Floor("provisioning and schemas", (
        ("provision/", "provision.py (mirror topics and groups), topic_ownership.py (own only what it creates or "
                       "adopts), fences.py (staged-cutover ACL fences), acls.py (ACL migration)"),
        ("schemas/", "schemas.py (subjects, versions, ids between registries), serialized_fields.py (which fields "
                     "carry the registry wire format), decode_check.py"),
    )),
    Floor("state", (
        ("state/", "store.py (the migration's state topic, only through declared kinds) and the one typed reader "
                   "and writer of each kind: progress.py (copy progress, migrated groups), promotion.py (the "
                   "promoted mark, step marks, final translation), staged_cutover.py (group and topic "
                   "promotions), offset_decisions.py (the final translation's decisions), batches.py, gaps.py, "
                   "fences.py, "
                   "schema_ids.py, serialized_fields.py, topic_ownership.py, time_plans.py, decode_marks.py, "
                   "group_activity.py, backlog.py"),
    )),
    Floor("clients", (
        ("kafka/", "cluster.py (KafkaCluster: the one Kafka client), waiting.py, reads.py (bounded reads), "
                   "errors.py, acls.py, configs.py"),
        ("registry/", "the Schema Registry client (confluent-kafka's SchemaRegistryClient + the calls it lacks)"),
        ("reports/", "the per-run HTML report and lag chart (matplotlib)"),
        ("storage/", "workdir.py: the work dir (plans, reports, offset maps, pages) as a local directory or an "
                     "ObjectStoragePath URL through an Airflow connection; what must stay local"),
    )),
    Floor("core", (
        ("core/", "no Airflow, Kafka or Spark: spec (+ spec_check, connection_types), state_records.py (every "
                  "state record kind declared once), MM2 wire codecs, sync policy, offset translation and "
                  "decisions, batch ranges, provisioning, ACL, schema and time-fidelity plans, copy lease, "
                  "staged-cutover rules, schema forms"),
        ("layers.py", "this table"),
    )),
)

# floor number per package: the bottom floor is 1, so "above" is "greater"
FLOOR: dict[str, int] = {package: len(FLOORS) - i for i, floor in enumerate(FLOORS) for package in floor.packages}
FLOOR_NAME: dict[int, str] = {len(FLOORS) - i: floor.name for i, floor in enumerate(FLOORS)}

_NAME_WIDTH, _PART_WIDTH, _WIDTH = 26, 18, 118


def picture() -> str:
    """The floors as the README shows them, top floor first."""
    lines = []
    for floor in FLOORS:
        name = floor.name.upper()
        for part, holds in floor.parts:
            text = wrap(holds, _WIDTH - _NAME_WIDTH - _PART_WIDTH) or [""]
            lines.append(f"{name:<{_NAME_WIDTH}}{part:<{_PART_WIDTH}}{text[0]}".rstrip())
            lines += [" " * (_NAME_WIDTH + _PART_WIDTH) + more for more in text[1:]]
            name = ""
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(picture(), end="")
