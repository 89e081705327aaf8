"""ACL migration planning: invariants A-D of core.acls.acl_migration after every plan."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kafka_ferry.core.acls.acl_migration import effectively_allowed, plan_acl_migration
from kafka_ferry.core.acls.acl_plan import AclEntry

TOPICS = ["orders", "ord-eu", "payments"]
MIGRATED = ["orders", "ord-eu"]
PRINCIPALS = ["User:app", "User:a", "User:b", "User:*"]
MAP = {"User:a": "User:merged", "User:b": "User:merged"}

ENTRY = st.builds(AclEntry, st.sampled_from(PRINCIPALS), st.sampled_from(["TOPIC", "GROUP", "CLUSTER"]),
                  st.sampled_from([*TOPICS, "ord", "g1", "*", "kafka-cluster"]),
                  st.sampled_from(["READ", "WRITE", "DESCRIBE", "ALL"]), st.sampled_from(["ALLOW", "DENY"]),
                  st.sampled_from(["LITERAL", "PREFIXED"]))


def rename(t: str) -> str:
    return f"dst.{t}"


@settings(max_examples=300)
@given(st.lists(ENTRY, max_size=15), st.lists(ENTRY, max_size=5))
def test_every_plan_is_literal_never_wider_carries_denials_and_is_idempotent(source, destination):
    plan = plan_acl_migration(source, MIGRATED, ["g1"], rename, MAP, destination)
    planned = plan.create + plan.present
    targets = {rename(t) for t in MIGRATED} | {"g1"}
    # A: literal, one migrated resource each
    assert all(e.pattern_type == "LITERAL" and e.resource_name in targets for e in planned)
    # B: each planned ALLOW comes from a source ALLOW, and every other source principal merged into its
    # principal already holds that access on the source
    for e in planned:
        if e.permission == "ALLOW":
            name = e.resource_name.removeprefix("dst.") if e.resource_type == "TOPIC" else e.resource_name
            sources = {p for p in [*PRINCIPALS, *MAP] if MAP.get(p, p) == e.principal}
            origins = {s.principal for s in source if s.permission == "ALLOW" and s.operation == e.operation
                       and s.covers(e.resource_type, name) and s.principal in sources}
            assert origins
            assert any(all(p == o or effectively_allowed(source, p, e.resource_type, name, e.operation)
                           for p in sources) for o in origins)
    # C: each source DENY covering a migrated resource is planned
    for s in source:
        for resource_type, name, target in [("TOPIC", t, rename(t)) for t in MIGRATED] + [("GROUP", "g1", "g1")]:
            if s.permission == "DENY" and s.covers(resource_type, name):
                mapped = AclEntry(MAP.get(s.principal, s.principal), resource_type, target, s.operation, "DENY")
                assert mapped in planned
    # D: applying the plan and planning again creates nothing
    again = plan_acl_migration(source, MIGRATED, ["g1"], rename, MAP, [*destination, *plan.create])
    assert again.create == [] and again.refused == plan.refused
    assert all(e.resource_type in ("TOPIC", "GROUP") for e in planned)


def test_a_merged_principal_gets_only_what_all_its_sources_hold():
    source = [AclEntry("User:a", "TOPIC", "orders", "READ"), AclEntry("User:b", "TOPIC", "ord", "READ", "ALLOW",
                                                                        "PREFIXED"),
              AclEntry("User:a", "TOPIC", "ord-eu", "WRITE")]
    plan = plan_acl_migration(source, MIGRATED, [], rename, MAP, [])
    assert AclEntry("User:merged", "TOPIC", "dst.orders", "READ") in plan.create  # both may read orders
    assert [(r.entry.operation, r.reason.split()[0]) for r in plan.refused] == [("READ", "User:a"),
                                                                                ("WRITE", "User:b")]
    assert all(r.entry.resource_name == "dst.ord-eu" for r in plan.refused)


def test_only_user_star_is_a_wildcard_principal():
    """Kafka's authorizer matches `User:*` against every principal; `Group:*` names one principal, no wildcard."""
    user_star = [AclEntry("User:*", "TOPIC", "orders", "READ")]
    group_star = [AclEntry("Group:*", "TOPIC", "orders", "READ")]
    assert effectively_allowed(user_star, "User:a", "TOPIC", "orders", "READ")
    assert not effectively_allowed(group_star, "User:a", "TOPIC", "orders", "READ")
    # A source principal merged into User:merged is not allowed by a `Group:*` ALLOW: the plan refuses.
    source = [AclEntry("User:a", "TOPIC", "orders", "READ"), AclEntry("Group:*", "TOPIC", "orders", "READ")]
    plan = plan_acl_migration(source, ["orders"], [], rename, MAP, [])
    assert [r.entry for r in plan.refused] == [AclEntry("User:merged", "TOPIC", "dst.orders", "READ")]
    assert "User:b" in plan.refused[0].reason
    denied = [AclEntry("User:b", "TOPIC", "orders", "READ"), AclEntry("Group:*", "TOPIC", "orders", "READ", "DENY")]
    assert effectively_allowed(denied, "User:b", "TOPIC", "orders", "READ")  # that DENY is not for User:b


# --- issue 36 (case 7): indexed by resource, the same plan as scanning every ACL ----------------------------------

def reference_plan(source_acls, migrated_topics, groups, principal_map, destination_acls):
    """The plan as main computed it before the index: every question scans every ACL (the definition)."""
    from kafka_ferry.core.acls.acl_migration import AclMigrationPlan, Refusal

    source_acls = sorted(set(source_acls))
    resources = [("TOPIC", t, rename(t)) for t in sorted(set(migrated_topics))] + [("GROUP", g, g) for g in groups]
    sources_of: dict[str, set[str]] = {}
    for principal in [e.principal for e in source_acls] + list(principal_map):
        sources_of.setdefault(principal_map.get(principal, principal), set()).add(principal)
    wanted: dict[AclEntry, str | None] = {}
    for resource_type, name, target_name in resources:
        for entry in source_acls:
            if not entry.covers(resource_type, name):
                continue
            target = principal_map.get(entry.principal, entry.principal)
            mapped = AclEntry(target, resource_type, target_name, entry.operation, entry.permission, "LITERAL",
                              entry.host)
            reason = None
            if entry.permission == "ALLOW":
                lacking = sorted(p for p in sources_of[target] if p != entry.principal
                                 and not effectively_allowed(source_acls, p, resource_type, name, entry.operation))
                if lacking:
                    reason = (f"{', '.join(lacking)} (also mapped to {target}) may not {entry.operation} "
                              f"{resource_type} '{name}' on the source")
            if wanted.get(mapped) is None:
                wanted[mapped] = reason
    plan = AclMigrationPlan()
    plan.skipped = [e for e in source_acls if e.resource_type not in ("TOPIC", "GROUP")]
    existing = set(destination_acls)
    for entry, reason in sorted(wanted.items()):
        if reason is not None:
            plan.refused.append(Refusal(entry, reason))
        elif entry in existing:
            plan.present.append(entry)
        else:
            plan.create.append(entry)
    return plan


HOSTS = st.sampled_from(["*", "10.0.0.1"])
ENTRY_ANY_HOST = st.builds(AclEntry, st.sampled_from(PRINCIPALS), st.sampled_from(["TOPIC", "GROUP", "CLUSTER"]),
                           st.sampled_from([*TOPICS, "ord", "o", "g", "g1", "*", "kafka-cluster"]),
                           st.sampled_from(["READ", "WRITE", "DESCRIBE", "DESCRIBE_CONFIGS", "ALTER_CONFIGS",
                                            "ALL"]),
                           st.sampled_from(["ALLOW", "DENY"]), st.sampled_from(["LITERAL", "PREFIXED"]), HOSTS)


@settings(max_examples=300)
@given(st.lists(ENTRY_ANY_HOST, max_size=25), st.lists(ENTRY_ANY_HOST, max_size=5))
def test_the_indexed_plan_is_the_plan_every_acl_scan_gives(source, destination):
    plan = plan_acl_migration(source, MIGRATED, ["g1"], rename, MAP, destination)
    assert plan == reference_plan(source, MIGRATED, ["g1"], MAP, destination)


def test_planning_reads_the_acls_covering_each_resource_not_every_acl(monkeypatch):
    """Reproduction: 20 topics x 20k ACLs x 50 principals did not finish in 100 s (topics x principals x ACLs^2
    pattern checks); the plan now checks only the entries its index finds per resource."""
    calls = {"covers": 0}
    covers = AclEntry.covers

    def counted(self, resource_type, name):
        calls["covers"] += 1
        return covers(self, resource_type, name)

    monkeypatch.setattr(AclEntry, "covers", counted)
    topics = [f"orders.{i}" for i in range(10)]
    principals = [f"User:app-{i}" for i in range(10)]
    acls = [AclEntry(p, "TOPIC", name, op) for p in principals for name in topics + [f"other.{i}" for i in range(10)]
            for op in ("READ", "WRITE", "DESCRIBE")]
    plan = plan_acl_migration(acls, topics, [], rename, {p: "User:merged" for p in principals}, [])
    assert len(plan.create) == len(topics) * 3  # every principal holds every op: merged without a refusal
    assert calls["covers"] <= 2 * len(acls)  # scanning every ACL per resource alone would be 10 x len(acls)
