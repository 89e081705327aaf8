"""Before a rollback changes anything: does the source principal hold the ACLs it needs (``acl_plan.rollback_acls``)?

A least-privilege migration holds only the catch-up's minimum; a rollback's rights are granted for the rollback
(see the decision in ``core.acls.acl_plan``). Without this check a missing grant fails mid-way: after the quiesce, or
after some partitions were copied back. The probe asks the source's authorizer, reading only:

- an existing topic or group: the operations the principal may do on it (KIP-430 authorized operations, which
  need only the DESCRIBE the minimum grants);
- CREATE on a topic the rollback creates (or finds there): a validate-only CreateTopics (nothing is created), as the
  copy-back's own CreateTopics is authorized (CREATE on the topic or on the cluster).

What cannot be probed without a side effect: WRITE and DESCRIBE_CONFIGS on a copy-back topic that does not exist
yet (a first rollback), and any other operation when the broker does not answer authorized operations.
Those are listed as unchecked, and the calls that need them name the missing ACL when they fail
(``KafkaClusterError.on(..., acl=...)``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from kafka_ferry.core.acls.acl_plan import AclEntry, RollbackAcls, rollback_acls
from kafka_ferry.core.common.failures import Permanent
from kafka_ferry.core.specs.spec import MigrationSpec
from kafka_ferry.kafka.acls import authorized_operations, may_create_topic
from kafka_ferry.kafka.protocol import Cluster

log = logging.getLogger(__name__)

UNKNOWN_PRINCIPAL = "the source connection's principal"


class RollbackAclsMissing(Permanent, RuntimeError):
    """The source principal lacks an ACL the rollback needs: no retry grants it. Names each (principal, resource,
    operation); nothing was changed."""


def needed_acls(spec: MigrationSpec, source: Cluster, topics: Iterable[str], groups: Iterable[str]
                ) -> RollbackAcls:
    return rollback_acls(spec, source.principal or UNKNOWN_PRINCIPAL, topics, groups)


def probe(source: Cluster, needed: RollbackAcls) -> dict[str, list[AclEntry]]:
    """``missing`` and ``unchecked`` entries of ``needed``, asking the source's authorizer (reads only)."""
    ops = {kind: authorized_operations(source, kind, {e.resource_name for e in needed.source
                                                      if e.resource_type == kind}) for kind in ("TOPIC", "GROUP")}
    missing, unchecked, creatable = [], [], {}
    for e in needed.source:
        allowed = ops[e.resource_type].get(e.resource_name, "absent")
        # CREATE by the validate-only CreateTopics whether the topic exists or not: the copy-back sends a CreateTopics
        # either way (an existing topic answers TOPIC_ALREADY_EXISTS only to a principal allowed to create it), and the
        # broker accepts CREATE on the CLUSTER for it, which a topic's authorized operations (KIP-430) leave out
        if e.operation == "CREATE":
            if e.resource_name not in creatable:
                creatable[e.resource_name] = may_create_topic(source, e.resource_name) is None
            if not creatable[e.resource_name]:
                missing.append(e)
        elif allowed == "absent" or allowed is None:
            unchecked.append(e)  # a topic not created yet, or no answer: its call names the ACL if it fails
        elif e.operation not in allowed:
            missing.append(e)
    return {"missing": missing, "unchecked": unchecked}


def check_rollback_rights(spec: MigrationSpec, source: Cluster, what: str, topics: Iterable[str],
                          groups: Iterable[str]) -> RollbackAcls:
    """Raise ``RollbackAclsMissing`` naming every missing ACL before ``what`` (the rollback) changes anything."""
    needed = needed_acls(spec, source, topics, groups)
    found = probe(source, needed)
    if found["unchecked"]:  # their calls name the ACL if one is missing
        log.info("%s: cannot be checked before the copy-back creates its topic(s): %s", what,
                 "; ".join(e.describe() for e in found["unchecked"]))
    if found["missing"]:
        raise RollbackAclsMissing(
            f"{what} refused before any change: the source principal lacks {len(found['missing'])} ACL(s) a "
            "rollback needs: " + "; ".join(f"grant {e.describe()} ({needed.reasons[e]})" for e in found["missing"])
            + ". The rollback-plan dry run lists every ACL a rollback needs (core.acls.acl_plan.rollback_acls).")
    return needed


def plan_acls(spec: MigrationSpec, source: Cluster, topics: Iterable[str], groups: Iterable[str]) -> dict:
    """For the dry run: the ACLs the rollback needs, and which the probe finds missing (reads only)."""
    needed = needed_acls(spec, source, topics, groups)
    found = probe(source, needed)
    return {"needed": needed.lines(), "missing": [e.describe() for e in found["missing"]],
            "unchecked": [e.describe() for e in found["unchecked"]]}
