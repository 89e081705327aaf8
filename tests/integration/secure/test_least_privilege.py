"""A whole catch-up and promotion over SASL_SSL/SCRAM as principals holding exactly the documented ACLs.

The private clusters run the StandardAuthorizer with allow.everyone.if.no.acl.found=false, so any call the
minimum set does not cover fails. The migration's passwords must never show in a log file or in the
process list while it runs.
"""

from __future__ import annotations

import subprocess
import threading
from pathlib import Path

import pytest
from scenarios import (
    assert_copied_exactly_once,
    commit_source_group,
    committed_offsets,
    consume_as_group,
    provision,
    provision_groups,
    run_batch,
    seed_plain,
    write_spec,
)

from kafka_ferry.core.acls.acl_plan import minimum_acls
from kafka_ferry.core.specs.spec import load_spec
from kafka_ferry.kafka.acls import create_acls, describe_acls
from kafka_ferry.operators.translation import TranslateOffsetsOperator
from kafka_ferry.promotion.steps import PromotionRunner

pytestmark = [pytest.mark.integration, pytest.mark.spark]

PARTITIONS = 2
LP_SOURCE, LP_DESTINATION = "kf_lp_source", "kf_lp_destination"


class ProcessListWatch:
    """Samples every process's command line while a run goes on; collects lines holding a secret."""

    def __init__(self, secrets: list[str]) -> None:
        self.secrets, self.samples = secrets, 0
        self.hits: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.2):
            listing = subprocess.run(["ps", "-eww", "-o", "args="], capture_output=True, text=True).stdout
            self.samples += 1
            self.hits += [line for line in listing.splitlines() if any(s in line for s in self.secrets)]

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()


def secure_migration(private, tmp_path, prefix: str, grant_filter=None, acls: dict | None = None, **copy_overrides):
    """Topics seeded and a group committed on the source (as the super user); principals with the minimum ACLs."""
    p = private.unique(prefix)
    topics = [private.create_topic("source", f"{p}.t{i}", PARTITIONS) for i in range(2)]
    for t in topics:
        seed_plain(private, t, PARTITIONS, 40)
    group = f"{p}-g"
    committed = {t: committed_offsets(private, "source", t, PARTITIONS) for t in topics}
    positions = {(t, q): len(committed[t][q]) // 2 for t in topics for q in range(PARTITIONS)}
    commit_source_group(private, group, positions)
    users = {side: private.create_principal(side, f"mig-{side[:3]}") for side in ("source", "destination")}
    spec_path = write_spec(tmp_path, private, p, copy=copy_overrides, tenant="secure",
                           source={"connection_id": LP_SOURCE, "alias": "src"},
                           destination={"connection_id": LP_DESTINATION, "alias": "dst"},
                           promotion={"quiesce_window_seconds": 1, "poke_interval_seconds": 1},
                           **({"acls": acls} if acls else {}))
    spec = load_spec(spec_path)
    granted = minimum_acls(spec, f"User:{users['source'][0]}", f"User:{users['destination'][0]}", topics, [group])
    keep = grant_filter or (lambda side, entry: True)
    create_acls(private.cluster("source"), [e for e in granted.source if keep("source", e)])
    create_acls(private.cluster("destination"), [e for e in granted.destination if keep("destination", e)])
    for conn_id, side in ((LP_SOURCE, "source"), (LP_DESTINATION, "destination")):
        private.set_connection(conn_id, private.sasl_config(side, *users[side]))
    return {"p": p, "topics": topics, "group": group, "committed": committed, "positions": positions,
            "users": users, "spec": spec, "spec_path": str(spec_path), "acls": granted}


def assert_migrated_exactly(private, m) -> None:
    """Every record once on the destination, and the group resumes there exactly where it stopped."""
    source_id = private.cluster("source").describe_cluster().cluster_id
    for t in m["topics"]:
        assert_copied_exactly_once(private, t, t, PARTITIONS, source_id)
        received = consume_as_group(private, m["group"], t, PARTITIONS)
        for q in range(PARTITIONS):
            assert received[q] == [o for o in m["committed"][t][q] if o >= m["positions"][(t, q)]]


def grep_files(roots: list[Path], secrets: list[str]) -> tuple[int, list[str]]:
    checked, hits = 0, []
    for root in roots:
        for path in (root.rglob("*") if root.is_dir() else [root]):
            if path.is_file():
                checked += 1
                data = path.read_bytes()
                hits += [f"{path}: {s[:3]}..." for s in secrets if s.encode() in data]
    return checked, hits


def test_catch_up_and_promotion_with_exactly_the_minimum_acls(private, tmp_path, work_dir, caplog):
    m = secure_migration(private, tmp_path, "lp")
    secrets = [m["users"]["source"][1], m["users"]["destination"][1]]
    from kafka_ferry.hooks.kafka_cluster import kafka_cluster

    with ProcessListWatch(secrets) as watch:
        provision(m["spec_path"])
        provision_groups(m["spec_path"])
        report = run_batch(m["spec_path"], private.SPARK_CONN)
        TranslateOffsetsOperator(task_id="translate", spec_path=m["spec_path"]).execute({})
        promoted = PromotionRunner(m["spec"], kafka_cluster(LP_SOURCE), kafka_cluster(LP_DESTINATION),
                                   work_dir=work_dir).run()

    assert report["records_copied"] == 2 * PARTITIONS * 40
    assert promoted["status"] == "promoted"
    assert_migrated_exactly(private, m)
    # the principals hold exactly the minimum, nothing more appeared
    dst_user = f"User:{m['users']['destination'][0]}"
    assert describe_acls(private.cluster("destination"), principal=dst_user) == sorted(m["acls"].destination)
    assert watch.samples > 10 and watch.hits == []
    checked, hits = grep_files([work_dir, tmp_path, private.specs["source"].home / "logs",
                                private.specs["destination"].home / "logs",
                                Path(__import__("os").environ["AIRFLOW_HOME"])], secrets)
    assert checked > 5 and hits == []
    assert not any(s in caplog.text for s in secrets)
    print(f"least privilege: {len(m['acls'].source)} source ACLs, {len(m['acls'].destination)} destination ACLs; "
          f"{checked} files and {watch.samples} process listings checked for the secrets: none found")


@pytest.mark.parametrize(("side", "resource_type", "operation", "which"), [
    ("destination", "TOPIC", "WRITE", "mirror"),
    ("destination", "GROUP", "READ", "group"),
    ("source", "TOPIC", "READ", "mirror"),
    ("source", "TOPIC", "DESCRIBE_CONFIGS", "mirror"),
], ids=["dst-write-topic", "dst-read-group", "src-read-topic", "src-describe-configs"])
def test_a_missing_acl_fails_naming_operation_resource_and_principal(private, tmp_path, work_dir, side,
                                                                     resource_type, operation, which):
    from kafka_ferry.hooks.kafka_cluster import kafka_cluster
    names: dict[str, str] = {}

    def keep(grant_side, entry):
        name = names["mirror"] if which == "mirror" else names["group"]
        return not (grant_side == side and (entry.resource_type, entry.operation, entry.resource_name)
                    == (resource_type, operation, name))

    p_holder = {}
    original_unique = private.unique

    def unique(prefix):  # learn the names secure_migration will use before it grants
        value = original_unique(prefix)
        if prefix == "miss":
            p_holder["p"] = value
            names.update(mirror=f"{value}.t0", group=f"{value}-g")
        return value

    private.unique = unique
    try:
        m = secure_migration(private, tmp_path, "miss", grant_filter=keep)
    finally:
        private.unique = original_unique
    principal = f"User:{m['users'][side][0]}"

    with pytest.raises(Exception) as failure:  # noqa: PT011 - the KafkaClusterError, or a step error quoting it
        provision(m["spec_path"])
        provision_groups(m["spec_path"])
        PromotionRunner(m["spec"], kafka_cluster(LP_SOURCE), kafka_cluster(LP_DESTINATION),
                        work_dir=work_dir).run()

    wanted = f"grant ALLOW {operation} on {resource_type} '{names[which]}' for {principal}"
    assert wanted in str(failure.value), str(failure.value)
    print(f"missing {operation} on {resource_type}: {failure.value}")
