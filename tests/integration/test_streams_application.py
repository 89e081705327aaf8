"""A Kafka Streams application moved as one unit (issue 40), on the test bed: the real word count of
testbed/streams_app (a ``groupBy`` repartition, a state store with its changelog, an output topic,
``exactly_once_v2``), once per group protocol: classic on the 3.9 source -> 4.3 destination, and
``group.protocol=streams`` (KIP-1071) on the private 4.3 -> 4.3 pair, its group seen through Kafka's Java Admin
(kafka.streams_groups).

The application processes input on the source and stops; a catch-up copy runs; the application runs again and
Streams purges the repartition records it processed, so their log start moves past what the copy had copied; it
stops, and the migration is promoted: classic, through the DAG (``dag.test`` with the form's conf); streams, through
``kafka-ferry promote`` started while the application still runs: it waits in its groups sensor for the live member,
commits nothing, and goes on once the application stops.
The application then starts on the destination with an EMPTY state dir and processes more input. Every input word
yields one output record ``(word, count)``, so over all input the destination's output topic must hold, for each
word, the counts 1..n exactly once: a lost or repeated input, a state not restored from the copied changelog, or a
repartition offset translated wrong, each shows as a missing or repeated pair.

One expensive state per protocol (three application runs, a copy, a promotion), several assertions against it.
"""

from __future__ import annotations

import json
import random
import re
import struct
import subprocess
import sys
import time
from collections import Counter

import pytest
from route_support import Workspace, form_conf, states, stop_by_pid
from scenarios import plan_and_copy_in_process, provision, provision_groups, read_partition, snapshot, write_spec

import streams_app
from kafka_ferry.kafka import streams_groups
from kafka_ferry.kafka.configs import encode_cluster_configs

# long: three Streams application runs (a JVM each), a copy and a promotion through Airflow (minutes)
pytestmark = [pytest.mark.integration, pytest.mark.airflow, pytest.mark.long]

WORDS = ("alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa", "lambda", "mu")
PARTITIONS = 2
# what `kafka-ferry promote` says while its groups sensor waits (kafka_ferry.cli)
WAITING = re.compile(r"source_groups_inactive: (running|queued|waiting \(\w+\)) since "
                     r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ; waits for the migrated groups to have no members on the source")


def lines(seed: int, count: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 5))) for _ in range(count)]


def word_count(text: list[str]) -> Counter:
    return Counter(w for line in text for w in re.split(r"\W+", line.lower()) if w)


def produce(clusters, side: str, topic: str, text: list[str]) -> None:
    producer, errors = clusters.producer(side), []
    for n, line in enumerate(text):
        producer.produce(topic, key=f"line-{n}".encode(), value=line.encode(),
                         on_delivery=lambda err, _msg: errors.append(err) if err else None)
    assert producer.flush(30) == 0 and not errors, errors[:3]


def output(clusters, side: str, topic: str) -> list[tuple[str, int]]:
    """The output topic as read_committed sees it: (word, count) pairs (the count is a Long, 8 bytes big-endian)."""
    pairs = []
    for q in range(PARTITIONS):
        for r in read_partition(clusters, side, topic, q):
            assert r.key is not None and r.value is not None, (side, topic, q, r)  # every result has both
            pairs.append((r.key.decode(), struct.unpack(">q", r.value)[0]))
    return pairs


def mine(snap: dict) -> dict:
    """A snapshot's topics, records and groups of this test (the shared clusters' ACLs are other tests' too)."""
    return {side: {k: v for k, v in snap[side].items() if k != "acls"} for side in ("source", "destination")}


def wait_for_output(clusters, side: str, topic: str, expected: int, run, timeout_s: float = 240) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if len(output(clusters, side, topic)) >= expected:
            return
        assert run.running(), run.output()[-3000:]
        time.sleep(1)
    raise AssertionError(f"{side} {topic}: fewer than {expected} results after {timeout_s} s\n{run.output()[-3000:]}")


@pytest.fixture(params=["classic", "streams"])
def pair(request, monkeypatch):
    """(group protocol, clusters): classic on the shared 3.9 -> 4.3 bed; streams on the private 4.3 -> 4.3 pair,
    with Kafka's Java Admin configured for its streams group (kafka.streams_groups)."""
    if request.param == "classic":
        return request.param, request.getfixturevalue("clusters")
    monkeypatch.setenv(streams_groups.CLASSPATH_ENV, str(streams_app.jar_dir()))
    return request.param, request.getfixturevalue("kip848")


@pytest.mark.timeout(1800)  # three JVM runs and a promotion, on a small shared machine
def test_a_streams_application_moves_as_one_unit_and_continues_on_the_destination_exactly_once(pair, tmp_path):
    protocol, clusters = pair
    configs_env = encode_cluster_configs(clusters.cluster("source").client_config,
                                         clusters.cluster("destination").client_config)
    p = clusters.unique("sapp")
    text, counts, app_id = f"{p}.text", f"{p}.counts", f"{p}-wc"
    for topic in (text, counts):
        clusters.create_topic("source", topic, PARTITIONS)
    repartition = f"{app_id}-{streams_app.REPARTITION_NAME}-repartition"
    changelog = f"{app_id}-{streams_app.STORE_NAME}-changelog"
    (tmp_path / "spec").mkdir()
    spec_path = write_spec(tmp_path / "spec", clusters, p,
                           applications=[{"application_id": app_id, "output_topics": [counts]}],
                           promotion={"quiesce_window_seconds": 2, "poke_interval_seconds": 1,
                                      "sensor_timeout_seconds": 300})
    first, second, after = lines(1, 150), lines(2, 150), lines(3, 100)
    runs = []

    def start(name: str, side: str, state: str, purge_ms: int):
        bootstrap = clusters.source_bootstrap if side == "source" else clusters.destination_bootstrap
        run = streams_app.start(tmp_path / name, bootstrap=bootstrap, application_id=app_id, input_topic=text,
                                output_topic=counts, state_dir=tmp_path / state, purge_interval_ms=purge_ms,
                                group_protocol=protocol)
        runs.append(run)
        return run

    try:
        # 1. on the source: the first input, no purge yet (the catch-up copy finds the repartition records)
        produce(clusters, "source", text, first)
        run = start("run-1", "source", "state-source", 3_600_000)
        wait_for_output(clusters, "source", counts, sum(word_count(first).values()), run)
        run.stop()
        source = clusters.cluster("source")
        internal = [(t, q) for t in (repartition, changelog) for q in range(PARTITIONS)]
        assert all(n > 0 for n in source.list_offsets(internal, "latest").values())

        # the dry run (the kafka-ferry command, the migration's own DAG) shows the unit
        ws = Workspace(tmp_path / "ws", spec_path)
        name = ws.spec.name
        dry = ws.cli("dry-run", str(ws.spec_path), "--json")
        assert dry.returncode == 0, (dry.stdout + dry.stderr)[-4000:]
        preflight = json.loads(dry.stdout)["preflight"]
        assert preflight["applications"] == [
            f"Kafka Streams application {app_id} (named in the spec): group {app_id}; input {text}; changelog "
            f"{changelog}; repartition {repartition}; output {counts}"]
        assert {"name": app_id, "topics": sorted([text, changelog, repartition, counts]), "groups": [app_id],
                "reason": f"Kafka Streams application {app_id}"} in preflight["coupled_units"]["units"]
        provision(str(ws.spec_path))
        provision_groups(str(ws.spec_path))
        plan_and_copy_in_process(str(ws.spec_path), configs_env)  # a catch-up batch

        # a staged step that would split the application is refused in the pre-flight, before any change
        before = snapshot(clusters, p)
        for conf, moves in ((form_conf("promote-groups", name, groups=[app_id]), f"group {app_id}"),
                            (form_conf("promote-topics", name, topics=[text], waive_groups=[app_id]),
                             f"topic {text}")):
            refused = ws.dag_test(conf)
            assert refused["state"] == "failed" and refused["tasks"]["preflight"] == ["failed", 1], states(refused)
            said = (f"it would split coupled unit(s): unit '{app_id}' (Kafka Streams application {app_id}): this "
                    f"step moves {moves} and would leave")
            assert said in refused["log"], refused["log"][-6000:]
        assert mine(snapshot(clusters, p)) == mine(before)

        # 2. the application runs on; Streams purges the repartition records it processed past the copied end
        copied_end = source.list_offsets([(repartition, q) for q in range(PARTITIONS)], "latest")
        produce(clusters, "source", text, second)
        run = start("run-2", "source", "state-source", 500)
        wait_for_output(clusters, "source", counts, sum(word_count(first + second).values()), run)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            starts = source.list_offsets(list(copied_end), "earliest")
            if all(starts[tp] > copied_end[tp] for tp in copied_end):
                break
            time.sleep(1)
        assert all(starts[tp] > copied_end[tp] for tp in copied_end), (starts, copied_end, run.output()[-2000:])
        if protocol == "streams":
            # 3. a live member of the streams group on the source: `kafka-ferry promote` waits in its sensor and
            # commits nothing to the destination's group; the application stops and the same promotion goes on
            live = source.describe_groups([app_id])[app_id]
            assert live.described and live.member_count == 1 and live.is_active, live
            destination = clusters.cluster("destination")
            group_before = destination.groups_offsets([app_id])[app_id]
            out_path = tmp_path / "promote.out"
            with out_path.open("w") as out:
                promote = subprocess.Popen([sys.executable, "-m", "kafka_ferry.cli", "promote", str(ws.spec_path),
                                            "--yes-i-mean", name], env={**ws.env, "PYTHONUNBUFFERED": "1"},
                                           stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                           start_new_session=True)
            try:
                deadline = time.monotonic() + 600
                while not WAITING.search(out_path.read_text()):
                    assert promote.poll() is None and time.monotonic() < deadline, out_path.read_text()[-6000:]
                    time.sleep(1)
                time.sleep(5)  # a few more pokes against the live member
                assert promote.poll() is None, out_path.read_text()[-6000:]
                assert destination.groups_offsets([app_id])[app_id] == group_before  # nothing committed
                assert run.running()
                run.stop()
                assert promote.wait(1200) == 0, out_path.read_text()[-6000:]
            finally:
                stop_by_pid(promote)
        else:
            run.stop()
            # 3. promote the whole migration through its DAG, as the trigger form sends it
            promoted = ws.dag_test(form_conf("promote", name))
            assert promoted["state"] == "success", (states(promoted), promoted["log"][-6000:])

        # 4. on the destination, an empty state dir: restored from the copied changelog, resumed where it stopped
        assert not (tmp_path / "state-destination").exists()
        produce(clusters, "destination", text, after)
        total = word_count(first + second + after)
        run = start("run-3", "destination", "state-destination", 500)
        wait_for_output(clusters, "destination", counts, sum(total.values()), run)
        time.sleep(3)  # a wrong restore or a re-read input would go on writing: give it the time to show
        run.stop()
    finally:
        for run in runs:
            run.stop(10)

    results = Counter(output(clusters, "destination", counts))
    expected = Counter((word, n) for word, seen in total.items() for n in range(1, seen + 1))
    assert results == expected  # every result exactly once: nothing lost, nothing repeated, state continued
    finals = {}
    for word, n in sorted(results, key=lambda pair: pair[1]):
        finals[word] = n
    assert finals == dict(total)  # the final aggregates equal the reference's
