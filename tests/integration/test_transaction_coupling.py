"""Topics written in the same transactions move together (issue 40), on the test bed's real brokers.

A transactional producer writes two source topics in each transaction. ``__transaction_state`` is read for real
(every record of it decoded by ``core.units.transaction_log``); the dry run through ``kafka-ferry dry-run --json`` shows
the two topics as one coupled unit; a staged ``promote-topics`` of one of them through the migration's DAG, with the
conf the trigger form sends, is refused in the pre-flight in one try, naming the unit, its transactional.id, the topic
it would leave behind and both ways out, and both clusters hold exactly what they held before; with the spec accepting
the split (``coupling.accept_split``) the same run promotes the topic.

One migration, built once; each step asserts against it. Lane 2 (``long``): three Airflow runs in subprocesses.
"""

from __future__ import annotations

import json

import pytest
import yaml
from route_support import Workspace, form_conf, states
from scenarios import provision, snapshot, write_spec
from staged_support import one_catch_up_batch

from kafka_ferry.core.specs.spec import load_spec
from kafka_ferry.core.units.coupling import TRANSACTIONS_PREFIX
from kafka_ferry.kafka.transaction_log import read_transaction_state
from kafka_ferry.state.staged_cutover import promoted_topics
from kafka_ferry.state.store import MigrationStateStore

pytestmark = [pytest.mark.integration, pytest.mark.airflow, pytest.mark.long]


def write_both_in_transactions(clusters, tid: str, topics: list[str], transactions: int = 2,
                               side: str = "source") -> None:
    producer = clusters.producer(side, **{"transactional.id": tid})
    producer.init_transactions(30)
    for n in range(transactions):
        producer.begin_transaction()
        for topic in topics:
            for i in range(3):
                producer.produce(topic, key=f"k{i}".encode(), value=f"{topic}-{n}-{i}".encode())
        producer.commit_transaction(30)


@pytest.fixture(scope="module")
def coupled(clusters, tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("txc")
    p = clusters.unique("txc")
    pay, ledger = (clusters.create_topic("source", f"{p}.{n}", 1) for n in ("pay", "ledger"))
    tid = f"{p}-tx"
    write_both_in_transactions(clusters, tid, [pay, ledger])
    spec_path = write_spec(tmp_path, clusters, p)
    spec = load_spec(spec_path)
    provision(spec_path)
    source, destination = clusters.cluster("source"), clusters.cluster("destination")
    store = MigrationStateStore(destination, spec.state_topic_name)
    assert one_catch_up_batch(spec, source, destination, store) == 12  # something copied: promotions may run
    return {"p": p, "pay": pay, "ledger": ledger, "tid": tid, "ws": Workspace(tmp_path, spec_path), "store": store,
            "unit": TRANSACTIONS_PREFIX + tid}


def test_the_real_log_is_decoded_on_both_clusters(clusters, coupled):
    reading = read_transaction_state(clusters.cluster("source")).reading
    assert reading is not None and reading.undecodable == 0, reading
    assert reading.writes[coupled["tid"]] == {coupled["pay"], coupled["ledger"]}
    # the 4.x destination's coordinator writes its own versions: they decode too, with the same topics
    on_destination = [clusters.create_topic("destination", f"{coupled['p']}-d.{n}", 1) for n in ("a", "b")]
    write_both_in_transactions(clusters, f"{coupled['tid']}-d", on_destination, side="destination")
    answer = read_transaction_state(clusters.cluster("destination"))
    assert answer.reading is not None and answer.reading.undecodable == 0, answer
    assert answer.reading.writes[f"{coupled['tid']}-d"] == set(on_destination)


def test_dry_run_json_shows_the_coupled_topics(coupled):
    done = coupled["ws"].cli("dry-run", coupled["ws"].spec_path, "--json")
    assert done.returncode == 0, done.stderr[-4000:]
    units = json.loads(done.stdout)["preflight"]["coupled_units"]
    assert units["transaction_log_read"] and units["transaction_log"].startswith("__transaction_state read: ")
    assert units["units"] == [{"name": coupled["unit"], "topics": sorted([coupled["ledger"], coupled["pay"]]),
                               "groups": [], "reason": f"transactional.id {coupled['tid']} writes them in the same "
                                                       "transactions"}]
    lines = coupled["ws"].cli("dry-run", coupled["ws"].spec_path)
    assert f"coupled unit {coupled['unit']} (transactional.id {coupled['tid']}" in lines.stdout, lines.stdout[-3000:]


def test_promoting_one_of_them_is_refused_before_any_change_then_accepted(clusters, coupled):
    ws, name = coupled["ws"], coupled["ws"].spec.name
    conf = form_conf("promote-topics", name, topics=[coupled["pay"]])
    before = snapshot(clusters, coupled["p"])
    refused = ws.dag_test(conf)
    assert refused["state"] == "failed" and refused["tasks"]["preflight"] == ["failed", 1], states(refused)
    assert not [t for t, s in states(refused).items() if s == "success" and t != "choose_route"], states(refused)
    expected = (f"promote-topics refused before any change: it would split coupled unit(s): unit {coupled['unit']!r} "
                f"(transactional.id {coupled['tid']} writes them in the same transactions): this step moves topic "
                f"{coupled['pay']} and would leave topic {coupled['ledger']} behind. Either include the rest of each "
                f"unit in this step, or accept the split in the spec (coupling.accept_split: [{coupled['unit']!r}])")
    assert refused["log"].count(expected) >= 1, refused["log"][-6000:]
    assert snapshot(clusters, coupled["p"]) == before
    assert promoted_topics(coupled["store"]) == []

    spec = yaml.safe_load(ws.spec_path.read_text())
    spec["coupling"] = {"accept_split": [coupled["unit"]]}
    ws.spec_path.write_text(yaml.safe_dump(spec))
    accepted = ws.dag_test(conf)
    assert accepted["state"] == "success", accepted["log"][-6000:]
    assert "accepted by the spec (coupling.accept_split)" in accepted["log"]
    assert promoted_topics(coupled["store"]) == [coupled["pay"]]
