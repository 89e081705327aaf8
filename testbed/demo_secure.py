"""`make demo-secure`: the demo's Kafka connections over SASL_SSL as two least-privilege principals.

The test bed's clusters have a SASL_SSL listener (SCRAM-SHA-512, the test bed's CA) with an authorizer that
denies what no ACL allows. This creates (or resets) one SCRAM user per cluster for the migration, grants it
exactly the ACLs ``kafka_ferry.core.acls.acl_plan.minimum_acls`` computes for the demo spec (removing any other
ACL it holds), and points the demo's connections at the SASL listeners as those users. The passwords are
new on every run and live only in this process's Airflow connections (environment), never on disk.
"""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path

import kafka_testbed as tb

PRINCIPALS = {"source": "demo-ferry-source", "destination": "demo-ferry-destination"}


def _admin(spec: tb.ClusterSpec):
    """Admin calls as the test bed's super user (PLAINTEXT listener), the way a platform team grants."""
    from kafka_ferry.kafka.cluster import KafkaCluster

    return KafkaCluster(spec.name, {"bootstrap.servers": spec.bootstrap})


def grant_least_privilege(spec_path: Path, topics: list[str], groups: list[str]) -> dict[str, list]:
    """Users with exactly the minimum ACLs on each side; sets the connections; returns the ACLs per side."""
    from kafka_ferry.core.acls.acl_plan import minimum_acls
    from kafka_ferry.core.specs.spec import load_spec
    from kafka_ferry.kafka.acls import create_acls, delete_acls, describe_acls, upsert_scram_user

    spec = load_spec(spec_path)
    clusters = {"source": tb.SOURCE, "destination": tb.DESTINATION}
    wanted = minimum_acls(spec, f"User:{PRINCIPALS['source']}", f"User:{PRINCIPALS['destination']}", topics, groups)
    granted = {}
    for side, cluster in clusters.items():
        admin = _admin(cluster)
        password = secrets.token_urlsafe(24)
        upsert_scram_user(admin, PRINCIPALS[side], password)
        entries = set(getattr(wanted, side))
        held = set(describe_acls(admin, principal=f"User:{PRINCIPALS[side]}"))
        delete_acls(admin, held - entries)
        create_acls(admin, entries - held)
        granted[side] = sorted(entries)
        conn_id = spec.source.connection_id if side == "source" else spec.destination.connection_id
        os.environ[f"AIRFLOW_CONN_{conn_id.upper()}"] = json.dumps(
            {"conn_type": "kafka", "extra": tb.sasl_client_config(cluster, PRINCIPALS[side], password)})
    return granted


def describe(granted: dict[str, list]) -> str:
    return "; ".join(f"{side}: SASL_SSL {c.sasl_bootstrap} as User:{PRINCIPALS[side]} with {len(granted[side])} ACLs"
                     for side, c in (("source", tb.SOURCE), ("destination", tb.DESTINATION)))
