"""ACL migration's planning cost: topics x source ACLs x principals (issue 36: 20 topics x 20k ACLs x 50
principals did not finish in 100 s when every question scanned every ACL).

    .venv/bin/python bench/acl_migration.py [--topics 20] [--acls 20000] [--principals 50] [--groups 20]

Pure (``core.acls.acl_migration.plan_acl_migration``, no cluster): the source holds ``--acls`` entries spread over the
migrated topics and groups and as many unrelated topics, LITERAL and PREFIXED, ALLOW and some DENY, for
``--principals`` principals, every one of them mapped to one destination principal (the worst case: each ALLOW
asks about every other principal). Prints JSON: the sizes, the plan's counts and the seconds it took (one
plan, wall clock). A bench, not a test: a busy machine moves the figure.
"""

from __future__ import annotations

import argparse
import json
import random
import time

from kafka_ferry.core.acls.acl_migration import plan_acl_migration
from kafka_ferry.core.acls.acl_plan import AclEntry

OPERATIONS = ("READ", "WRITE", "DESCRIBE", "DESCRIBE_CONFIGS", "ALTER", "ALL")


def source_acls(topics: list[str], groups: list[str], count: int, principals: list[str],
                rng: random.Random) -> list[AclEntry]:
    unrelated = [f"other.{i}" for i in range(len(topics))]
    acls = set()
    while len(acls) < count:
        principal = rng.choice(principals)
        kind = rng.random()
        if kind < 0.6:
            entry = AclEntry(principal, "TOPIC", rng.choice(topics + unrelated), rng.choice(OPERATIONS),
                             "DENY" if rng.random() < 0.05 else "ALLOW")
        elif kind < 0.8:
            name = rng.choice(topics + unrelated)
            entry = AclEntry(principal, "TOPIC", name[:rng.randint(1, len(name))], rng.choice(OPERATIONS),
                             "ALLOW", "PREFIXED")
        else:
            entry = AclEntry(principal, "GROUP", rng.choice(groups), rng.choice(("READ", "DESCRIBE")), "ALLOW")
        acls.add(entry)
    return sorted(acls)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--topics", type=int, default=20)
    parser.add_argument("--acls", type=int, default=20_000)
    parser.add_argument("--principals", type=int, default=50)
    parser.add_argument("--groups", type=int, default=20)
    args = parser.parse_args()
    rng = random.Random(36)
    topics = [f"orders.{i}" for i in range(args.topics)]
    groups = [f"group-{i}" for i in range(args.groups)]
    principals = [f"User:app-{i}" for i in range(args.principals)]
    acls = source_acls(topics, groups, args.acls, principals, rng)
    mapping = {p: "User:merged" for p in principals}
    started = time.perf_counter()
    plan = plan_acl_migration(acls, topics, groups, lambda t: f"dst.{t}", mapping, [])
    seconds = time.perf_counter() - started
    print(json.dumps({"topics": args.topics, "groups": args.groups, "source_acls": len(acls),
                      "principals": args.principals, "plan": plan.summary(), "seconds": round(seconds, 3)}))


if __name__ == "__main__":
    main()
