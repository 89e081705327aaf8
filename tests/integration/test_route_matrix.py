"""The route matrix: every mode of the trigger form in every state a migration can be in, through the migration's own
DAG (``dag.test(run_conf=...)`` with the conf the form sends), each cell asserting the designed outcome written in
``kafka_ferry.core.cutover.routes`` (the table in docs/operations.md is generated from the same module).

Bounded cost: the migration walks once through the states along ``routes.CHAIN`` (each step a cell that changes it);
in each state, before the walk moves on, every cell that changes nothing (refusals, dry runs, no-ops) runs against it
and is checked to have changed nothing on either cluster (topics, configs, records, the state topic's records, group
offsets, ACLs, heartbeats). One Airflow process per engine runs the cells one after another. Catch-up copies on
spark-submit (local[2]); the promotions' final copy and the rollbacks run with the migration's Spark connection
pointing at a Spark Connect server (the same connection id, as an operator would re-point it).

The cells changing the migration that the walk does not take are accounted for in ``routes.OFF_CHAIN``. After the
walk (it ends in ``routes.AHEAD_STATE``), a group moves on on the destination and the promote modes naming it are
refused in the pre-flight (``routes.GROUP_AHEAD``): no state is built for them.
"""

from __future__ import annotations

import json
import os

import pytest
from matrix_support import DagRunner, RunResult
from scenarios import (
    commit_source_group,
    consume_some,
    read_on_as_group,
    read_partition,
    remaining,
    seed_plain,
    shape,
    snapshot,
    write_spec,
)

from kafka_ferry.core.cutover import routes
from kafka_ferry.core.offsets.provenance import read_provenance
from kafka_ferry.core.specs.spec import load_spec
from kafka_ferry.core.specs.trigger_form import MODES
from kafka_ferry.state.promotion import promotion_status
from kafka_ferry.state.rollback import rollback_status
from kafka_ferry.state.staged_cutover import promoted_groups, promoted_topics
from kafka_ferry.state.store import MigrationStateStore

pytestmark = [pytest.mark.integration, pytest.mark.airflow, pytest.mark.spark, pytest.mark.long]

SPARK_CONN = "kf_matrix_spark"  # the spec's copy engine; catch-up: spark-submit, promote and rollback: Spark Connect
PARTITIONS = 2


def walk_order() -> list[tuple[str, str]]:
    """The cells in the order the walk meets them: in each state first reached, its cells that change nothing, then
    the chain's steps out of it."""
    order, seen = [], set()
    for state, mode in routes.CHAIN:
        if state not in seen:
            seen.add(state)
            order += [(state, m) for m in MODES if routes.outcome(state, m).changes_nothing]
        order.append((state, mode))
    return order


# Cells whose designed outcome the code does not give yet: (state, mode) -> why. Strict: a cell that starts to hold
# fails the run until it is taken off this list.
NOT_YET: dict[tuple[str, str], str] = {}


def cell_params():
    for state, mode in walk_order():
        marks = [pytest.mark.xfail(reason=NOT_YET[(state, mode)], strict=True)] if (state, mode) in NOT_YET else []
        yield pytest.param(state, mode, id=f"{state.replace(' ', '_')}--{mode}", marks=marks)


class Migration:
    """Two source topics and a group reading each (the first of each is the one the staged modes name)."""

    def __init__(self, clusters, tmp_path, prefix: str) -> None:
        self.p = p = clusters.unique(prefix)
        self.topics = [clusters.create_topic("source", f"{p}.{n}", PARTITIONS) for n in ("a", "b")]
        self.groups = [f"{p}-ga", f"{p}-gb"]
        for topic, group in zip(self.topics, self.groups, strict=True):
            seed_plain(clusters, topic, PARTITIONS, 20)
            commit_source_group(clusters, group, {(topic, 0): 7, (topic, 1): 13})
        self.spec_path = write_spec(tmp_path, clusters, p, copy={"spark_connection_id": SPARK_CONN},
                                    promotion={"quiesce_window_seconds": 2, "poke_interval_seconds": 1,
                                               "sensor_timeout_seconds": 300})
        self.spec = load_spec(self.spec_path)

    def conf(self, mode: str) -> dict:
        return routes.conf(mode, self.spec.name, self.groups[0], self.topics[0])


class Walk:
    """One migration walking through the states, and one more per cell of the state *new* that changes nothing (a
    cell that changed it after all would otherwise spoil the walk's start); their DAGs in one Airflow home."""

    def __init__(self, clusters, tmp_path, spark_connect: str) -> None:
        self.clusters = clusters
        self.main = Migration(clusters, tmp_path, "route")
        self.new = {m: Migration(clusters, tmp_path, "routen") for m in MODES
                    if routes.outcome(routes.NEW, m).changes_nothing}
        self.round = 0
        self.ids = {side: clusters.cluster(side).describe_cluster().cluster_id for side in ("source", "destination")}
        runner = DagRunner(tmp_path / "airflow", [m.spec_path for m in (self.main, *self.new.values())],
                           {"KFERRY_WORK_DIR": str(tmp_path / "w")})
        submit = json.dumps({"conn_type": "spark", "host": "local[2]"})
        connect = os.environ[f"AIRFLOW_CONN_{spark_connect.upper()}"]
        self.sessions = {"submit": runner.session({f"AIRFLOW_CONN_{SPARK_CONN.upper()}": submit})}
        try:
            self.sessions["connect"] = runner.session({f"AIRFLOW_CONN_{SPARK_CONN.upper()}": connect})
        except BaseException:
            self.close()
            raise
        self.at, self.broken = routes.NEW, ""
        self.expected: dict[str, dict] = {}  # per group: what it has left to read on the destination (rollback)
        self.ahead: dict | None = None  # the first group's destination offsets once it moved on (GROUP_AHEAD)

    # --- the form -----------------------------------------------------------------------------------------------
    def run(self, mode: str, m: Migration) -> RunResult:
        engine = "connect" if mode in (routes.PROMOTE, routes.ROLLBACK) else "submit"
        return self.sessions[engine].run(m.spec.dag_id, m.conf(mode))

    @property
    def store(self) -> MigrationStateStore:
        return MigrationStateStore(self.clusters.cluster("destination"), self.main.spec.state_topic_name)

    # the walking migration's names
    @property
    def topics(self) -> list[str]:
        return self.main.topics

    @property
    def groups(self) -> list[str]:
        return self.main.groups

    def close(self) -> None:
        for session in self.sessions.values():
            session.close()

    # --- the cells ----------------------------------------------------------------------------------------------
    def reach(self, state: str) -> None:
        assert not self.broken, f"the walk stopped before {state!r}: {self.broken}"
        assert self.at == state, f"the walk is in {self.at!r}, not in {state!r}"

    def unchanged(self, state: str, mode: str, o: routes.Outcome) -> None:
        m = self.new[mode] if state == routes.NEW else self.main
        before = snapshot(self.clusters, m.p)
        result = self.run(mode, m)
        after = snapshot(self.clusters, m.p)
        if o.kind == routes.REFUSED:
            assert result.state == "failed", result.tail()
            assert result.failed_tasks() == {o.task: 1}, result.tail()  # one task, one try
            message = result.errors() or result.log[-4000:]
            why, way_out = o.message_fragments(m.groups[0], m.topics[0])
            assert why in message and way_out in message, (message, result.tail())
            # never advises a step that destroys the way back without saying so
            assert "reset-promotion" not in message or "give-up-rollback" in message, message
        else:
            assert result.state == "success", result.tail()
        assert after == before, f"{mode} in {state!r} changed the clusters: {diff(before, after)}"

    def step(self, state: str, mode: str, o: routes.Outcome) -> None:
        before = self.before_step(mode)
        result = self.run(mode, self.main)
        if result.state != "success":
            self.broken = f"{mode} in {state!r} did not work: {result.state} {result.failed_tasks()}"
        assert result.state == "success", result.tail()
        self.at = o.to
        self.after_step(mode, before)

    def before_step(self, mode: str) -> dict:
        if mode == routes.CATCH_UP:  # something new to copy on every topic still copied (the staged one is not)
            self.round += 1
            copied = self.topics[1:] if self.at == routes.TOPICS_STAGED else self.topics
            for topic in copied:
                seed_plain(self.clusters, topic, PARTITIONS, 5, start=1000 * self.round)
            return {"copied": copied}
        return {}

    def after_step(self, mode: str, before: dict) -> None:
        store = self.store
        if mode == routes.CATCH_UP:
            for topic in before["copied"]:
                self.assert_forward_copy(topic)
            return
        if mode == routes.PROMOTE_GROUPS:
            assert self.groups[0] in promoted_groups(store)
            return
        if mode == routes.PROMOTE_TOPICS:
            assert promoted_topics(store) == [self.topics[0]]
            return
        if mode == routes.PROMOTE:
            assert (promotion_status(store) or {}).get("status") == "promoted"
            self.traffic_on_destination()
            return
        if mode == routes.ROLLBACK:
            assert (rollback_status(store) or {}).get("status") == "rolled-back"
            assert promotion_status(store) is None
            assert (promoted_groups(store), promoted_topics(store)) == ([], [])  # nothing promoted, staged or not
            own, back = self.source_split()
            assert back == self.post_cutover()  # every record produced on the destination once, in order
            for topic, group in zip(self.topics, self.groups, strict=True):
                assert read_on_as_group(self.clusters, group, topic) == self.expected[group], group

    # --- what the walk checks ---------------------------------------------------------------------------------
    def assert_forward_copy(self, topic: str) -> None:
        """Every record of the source's own (not copied back) is on the destination once, in order."""
        for q in range(PARTITIONS):
            own = [r.offset for r in read_partition(self.clusters, "source", topic, q)
                   if read_provenance(r.headers)[0] != self.ids["destination"]]
            copied = [read_provenance(r.headers)[1] for r in read_partition(self.clusters, "destination", topic, q)
                      if read_provenance(r.headers)[0] == self.ids["source"]]
            assert copied == own, (topic, q)

    def traffic_on_destination(self) -> None:
        """After a cutover: producers write to the destination (a transaction aborted among them), consumers of
        both groups read part of it and commit, then all stop."""
        self.round += 1
        plain = self.clusters.producer("destination", **{"enable.idempotence": True})
        txn = self.clusters.producer("destination", **{"transactional.id": f"{self.main.p}-{self.round}"})
        txn.init_transactions(30)
        for topic in self.topics:
            for q in range(PARTITIONS):
                for i in range(6):
                    plain.produce(topic, key=f"d{i}".encode(), value=f"dest-{self.round}-{q}-{i}".encode(),
                                  partition=q, headers=[("h", str(i).encode())])
            assert plain.flush(30) == 0
            for commit in (False, True):
                txn.begin_transaction()
                for q in range(PARTITIONS):
                    txn.produce(topic, value=f"txn-{self.round}-{commit}".encode(), partition=q)
                (txn.commit_transaction if commit else txn.abort_transaction)(30)
        for topic, group, stops in zip(self.topics, self.groups, ({0: 3, 1: None}, {0: None, 1: 2}), strict=True):
            consume_some(self.clusters, "destination", group, topic, stops)
            self.expected[group] = remaining(self.clusters, "destination", group, topic)

    def group_ahead(self) -> None:
        """The first group reads on on the destination past where the rollback left it (what a promotion would commit
        it at): once, for the cells of ``routes.GROUP_AHEAD``."""
        if self.ahead is None:
            moved = self.clusters.cluster("destination").group_offsets(self.groups[0])
            consume_some(self.clusters, "destination", self.groups[0], self.topics[0], {0: 2})
            now = self.clusters.cluster("destination").group_offsets(self.groups[0])
            assert now[(self.topics[0], 0)] > moved[(self.topics[0], 0)], (moved, now)  # it did move on
            self.ahead = now

    def source_split(self) -> tuple[dict, dict]:
        own, back = {}, {}
        for t in self.topics:
            for q in range(PARTITIONS):
                recs = read_partition(self.clusters, "source", t, q)
                own[(t, q)] = [r.offset for r in recs if read_provenance(r.headers)[0] != self.ids["destination"]]
                back[(t, q)] = [shape(r) for r in recs if read_provenance(r.headers)[0] == self.ids["destination"]]
        return own, back

    def post_cutover(self) -> dict:
        return {(t, q): [shape(r) for r in read_partition(self.clusters, "destination", t, q)
                         if read_provenance(r.headers)[0] != self.ids["source"]]
                for t in self.topics for q in range(PARTITIONS)}


def diff(before: dict, after: dict) -> list[str]:
    out = []
    for side in ("source", "destination"):
        for part, value in before.get(side, {}).items():
            if after[side][part] != value:
                keys = value.keys() | after[side][part].keys() if isinstance(value, dict) else []
                out.append(f"{side} {part}: " + ", ".join(
                    str(k) for k in keys if value.get(k) != after[side][part].get(k))[:500])
    if before.get("heartbeats") != after.get("heartbeats"):
        out.append("heartbeats")
    return out


@pytest.fixture(scope="module")
def walk(clusters, tmp_path_factory, spark_connect):
    w = Walk(clusters, tmp_path_factory.mktemp("routes"), spark_connect)
    try:
        yield w
    finally:
        w.close()


@pytest.mark.parametrize(("state", "mode"), list(cell_params()))
def test_route(walk, state, mode):
    walk.reach(state)
    o = routes.outcome(state, mode)
    if o.changes_nothing:
        walk.unchanged(state, mode, o)
    else:
        walk.step(state, mode, o)


@pytest.mark.parametrize("mode", list(routes.GROUP_AHEAD))
def test_route_with_a_destination_group_ahead(walk, mode):
    """After the walk, which ends in ``routes.AHEAD_STATE``: the first group moves on on the destination, and each
    promote mode naming it is refused in one try of the pre-flight, changing nothing on either cluster."""
    walk.reach(routes.AHEAD_STATE)
    walk.group_ahead()
    walk.unchanged(routes.AHEAD_STATE, mode, routes.GROUP_AHEAD[mode])
