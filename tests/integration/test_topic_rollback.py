"""Rolling back one topic of a staged cutover on the real clusters: two topics promoted (with their groups), producers
write to both on the destination (plain records and transactions, one aborted), one topic goes back: its records
produced on the destination are on the source once and in order, its group reads on there exactly, the other topic
stays promoted and untouched; a catch-up and a second promotion of the topic are exact again."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import pytest
from airflow.sdk.exceptions import AirflowFailException
from scenarios import BASE_TS, commit_source_group, provision, provision_groups, read_partition, seed_plain, write_spec
from staged_support import one_catch_up_batch, thread_copy
from test_rollback import consume_some, read_on_as_group, remaining, shape

from kafka_ferry.copy.plan import work_dir as migration_dir
from kafka_ferry.core.offsets.provenance import read_provenance
from kafka_ferry.core.specs.spec import load_spec
from kafka_ferry.operators.rollback import RollbackMigrationOperator
from kafka_ferry.promotion.group import promote_group
from kafka_ferry.promotion.group_rollback import rollback_group
from kafka_ferry.promotion.rollback import RollbackRefused
from kafka_ferry.promotion.topic import promote_topics
from kafka_ferry.promotion.topic_rollback import TOPIC_STEPS, rollback_topics
from kafka_ferry.reports.publish import run_page_path
from kafka_ferry.state.rollback import rollback_records, topic_rollback
from kafka_ferry.state.staged_cutover import promoted_groups, promoted_topics
from kafka_ferry.state.store import MigrationStateStore

pytestmark = [pytest.mark.integration, pytest.mark.long]

PARTS = (0, 1)


def produce_on(clusters, side, topic, round_: int) -> None:
    """Plain records (keys, a null value, headers, timestamps), then transactions, the second one aborted, with
    plain records between."""
    plain = clusters.producer(side, **{"enable.idempotence": True})
    for q in PARTS:
        for i in range(8):
            plain.produce(topic, key=f"k{i}".encode() if i % 3 else None,
                          value=None if i == 5 else f"{side}-{round_}-{q}-{i}".encode(), partition=q,
                          timestamp=BASE_TS + 10**6 + round_ * 10**4 + i,
                          headers=[("h", f"{round_}-{i}".encode())] if i % 2 else None)
    assert plain.flush(30) == 0
    txn = clusters.producer(side, **{"transactional.id": f"{topic}-{side}-{round_}"})
    txn.init_transactions(30)
    for r in range(3):
        txn.begin_transaction()
        for q in PARTS:
            for i in range(3):
                txn.produce(topic, key=f"t{r}".encode(), value=f"txn-{side}-{round_}-{r}-{q}-{i}".encode(),
                            partition=q, headers=[("r", str(r).encode())])
        txn.flush(30)
        (txn.abort_transaction if r == 1 else txn.commit_transaction)(30)
        plain.produce(topic, value=f"between-{side}-{round_}-{r}".encode(), partition=r % 2)
        assert plain.flush(30) == 0


def split(clusters, side, topic, origin_id):
    """(records whose provenance names ``origin_id``, the others) per partition, as read_committed sees them."""
    mine, others = {}, {}
    for q in PARTS:
        recs = [(read_provenance(r.headers), r) for r in read_partition(clusters, side, topic, q)]
        mine[q] = [(prov[1], shape(r)) for prov, r in recs if prov[0] == origin_id]
        others[q] = [(r.offset, shape(r)) for prov, r in recs if prov[0] != origin_id]
    return mine, others


def prepare_topics(clusters, tmp_path) -> dict:
    """Two topics promoted with their groups; producers wrote to both on the destination and the groups read some
    there; all stopped: the state a topic rollback starts from, with what it must produce."""
    p = clusters.unique("trb")
    back, stays = (clusters.create_topic("source", f"{p}.{n}", 2) for n in ("back", "stays"))
    for t in (back, stays):
        seed_plain(clusters, t, 2, 20)
    gback, gstays = f"{p}-gback", f"{p}-gstays"
    commit_source_group(clusters, gback, {(back, 0): 5, (back, 1): 12})
    commit_source_group(clusters, gstays, {(stays, 0): 3, (stays, 1): 4})
    spec_path = write_spec(tmp_path, clusters, p, promotion={"quiesce_window_seconds": 1})
    spec = load_spec(spec_path)
    provision(spec_path)
    provision_groups(spec_path)
    source, destination = clusters.cluster("source"), clusters.cluster("destination")
    store = MigrationStateStore(destination, spec.state_topic_name)
    for g in (gback, gstays):
        assert promote_group(spec, source, destination, store, g, f"run-{g}", thread_copy).promoted
    promote_topics(spec, source, destination, store, [back, stays], "run-topics", thread_copy, quiet_window_s=0.5)
    assert promoted_topics(store) == sorted([back, stays])
    ids = {side: clusters.cluster(side).describe_cluster().cluster_id for side in ("source", "destination")}

    for t in (back, stays):  # producers and consumers now use the destination
        produce_on(clusters, "destination", t, 0)
    consume_some(clusters, "destination", gback, back, {0: 20, 1: 6})
    consume_some(clusters, "destination", gstays, stays, {0: 4, 1: None})
    _, post = split(clusters, "destination", back, ids["source"])
    assert all(post.values())
    stays_parts = [(stays, q) for q in PARTS]
    return {"spec": spec, "spec_path": spec_path, "store": store, "back": back, "stays": stays, "gback": gback,
            "gstays": gstays, "ids": ids, "post": post, "expected": remaining(clusters, "destination", gback, back),
            "own_before": split(clusters, "source", back, ids["destination"])[1],
            "untouched": (source.list_offsets(stays_parts), destination.list_offsets(stays_parts),
                          destination.group_offsets(gstays), source.group_offsets(gstays))}


def assert_topic_rolled_back_exactly(clusters, m) -> dict:
    """The checks every topic rollback passes, killed or not; returns the topic's rollback record."""
    source, destination = clusters.cluster("source"), clusters.cluster("destination")
    back, stays, store = m["back"], m["stays"], m["store"]
    record = topic_rollback(store, back)
    assert record is not None
    assert record["status"] == "rolled-back" and sorted(record["steps"]) == sorted(TOPIC_STEPS[:-1])
    assert record["groups"] == [m["gback"]]
    assert promoted_topics(store) == [stays] and promoted_groups(store) == [m["gstays"]]
    copied_back, own_after = split(clusters, "source", back, m["ids"]["destination"])
    assert own_after == m["own_before"]  # the source's own records: same offsets, same contents
    assert {q: [s for _, s in v] for q, v in copied_back.items()} == {
        q: [s for _, s in v] for q, v in m["post"].items()}  # each record produced on the destination once, in order
    assert {q: [o for o, _ in v] for q, v in copied_back.items()} == {
        q: [o for o, _ in v] for q, v in m["post"].items()}  # its provenance names its destination offset
    stays_parts = [(stays, q) for q in PARTS]
    assert (source.list_offsets(stays_parts), destination.list_offsets(stays_parts),
            destination.group_offsets(m["gstays"]), source.group_offsets(m["gstays"])) == m["untouched"]
    back_parts = [(back, q) for q in PARTS]
    ends = source.list_offsets(back_parts)
    assert rollback_topics(m["spec"], source, destination, store, [back], quiesce_window_s=0.5) == {back: record}
    assert source.list_offsets(back_parts) == ends  # a second rollback changes nothing
    assert read_on_as_group(clusters, m["gback"], back) == m["expected"]  # no loss, no duplicate
    return record


def screenshot(html_path, name: str) -> None:
    """The manual's picture of a page (only when KFERRY_SCREENSHOTS names where they go)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=os.environ.get("KFERRY_CHROMIUM", "/usr/bin/chromium"),
                                     args=["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"])
        try:
            page = browser.new_page(viewport={"width": 1300, "height": 900})
            page.goto(html_path.as_uri())
            page.locator("h2", has_text="Promoted / rolled back").scroll_into_view_if_needed()
            page.screenshot(path=str(Path(os.environ["KFERRY_SCREENSHOTS"]) / name), full_page=True)
        finally:
            browser.close()


def test_one_promoted_topic_rolls_back_while_another_stays_promoted(clusters, tmp_path, work_dir):
    m = prepare_topics(clusters, tmp_path)
    spec, store, back, gback = m["spec"], m["store"], m["back"], m["gback"]
    source, destination = clusters.cluster("source"), clusters.cluster("destination")

    # hostile or wrong input is refused before anything changes, naming the topic
    run = {"spec_path": m["spec_path"], "task_id": "rollback"}
    with pytest.raises(AirflowFailException, match="not part of this migration"):  # Permanent: the task fails once
        RollbackMigrationOperator(**run).execute({"params": {"topics": [f"{back}x"]}})
    with pytest.raises(RollbackRefused, match=f"group '{gback}' reads promoted topic"):
        rollback_group(spec, source, destination, store, gback)  # alone it cannot go: its topic is promoted
    # a bad name among the extra groups is refused before the topic changes anything, real run and dry run alike:
    # a typo, and a group reading the topic that stays promoted
    def unchanged():
        parts = [(t, q) for t in (back, m["stays"]) for q in PARTS]
        return (source.list_offsets(parts), destination.list_offsets(parts),
                {g: (source.group_offsets(g), destination.group_offsets(g)) for g in (gback, m["gstays"])},
                rollback_records(store), promoted_topics(store), promoted_groups(store))
    before = unchanged()
    for dry_run in (False, True):
        with pytest.raises(AirflowFailException, match=f"group 'tyop' of migration {spec.name} is not promoted"):
            RollbackMigrationOperator(**run, dry_run=dry_run).execute({"params": {"topics": [back],
                                                                                  "groups": ["tyop"]}})
        with pytest.raises(AirflowFailException, match=f"group '{m['gstays']}' reads promoted topic"):
            RollbackMigrationOperator(**run, dry_run=dry_run).execute({"params": {"topics": [back],
                                                                                  "groups": [m["gstays"]]}})
    assert unchanged() == before and rollback_records(store) == {}
    back_parts = [(back, q) for q in PARTS]
    source_ends = source.list_offsets(back_parts)
    plan = RollbackMigrationOperator(**run, dry_run=True).execute({"params": {"topics": [back]}})
    assert plan["records"] == sum(len(v) for v in m["post"].values()) and list(plan["groups"]) == [gback]
    assert {r["source_topic"] for r in plan["copy_back"]} == {back}
    assert source.list_offsets(back_parts) == source_ends and topic_rollback(store, back) is None
    assert f"{spec.state_topic_name}.rollback" not in source.list_topic_names()  # the plan created nothing
    assert promoted_topics(store) == sorted([back, m["stays"]]) and gback in promoted_groups(store)

    result = RollbackMigrationOperator(**run).execute({"params": {"topics": [back]}})

    record = assert_topic_rolled_back_exactly(clusters, m)
    assert result["topics"] == {back: record} and list(result["groups"]) == [gback]  # its group went along
    resumes = [(r["source_offset"], r["method"]) for r in record["steps"]["groups"]["summary"]["rolled_back"][gback]]
    assert resumes == [(r["source_offset"], r["method"]) for r in plan["groups"][gback]]  # the plan said so
    run_page = run_page_path(migration_dir(spec.name), "rollback")  # the run page: promoted / rolled back per unit
    html = run_page.read_text()
    assert f'<td class="l">{back}</td><td class="l warn">rolled back</td>' in html
    assert f'<td class="l">{m["stays"]}</td><td class="l ok">promoted</td>' in html
    assert f'<td class="l">{gback}</td><td class="l warn">rolled back</td>' in html
    overview = json.loads((migration_dir(spec.name) / "overview.json").read_text())
    assert overview["staged"] == "groups 1/2 promoted, 1 rolled back; topics 1/2 promoted, 1 rolled back"
    if os.environ.get("KFERRY_SCREENSHOTS"):
        screenshot(run_page, "rollback-units.png")

    # back on the source: producers write there, the group reads; catch-up copies the topic again, then the group
    # and the topic are promoted again, exactly
    produce_on(clusters, "source", back, 1)
    consume_some(clusters, "source", gback, back, {0: 3, 1: 5})
    expected_again = remaining(clusters, "source", gback, back)
    _, own = split(clusters, "source", back, m["ids"]["destination"])
    assert one_catch_up_batch(spec, source, destination, store) > 0
    assert promote_group(spec, source, destination, store, gback, "run-again", thread_copy).promoted
    promote_topics(spec, source, destination, store, [back], "run-topics-again", thread_copy, quiet_window_s=0.5)
    assert promoted_topics(store) == sorted([back, m["stays"]])
    copied, others = split(clusters, "destination", back, m["ids"]["source"])
    assert copied == own  # each source record once, in order; none of the copied-back ones
    assert {q: [s for _, s in v] for q, v in others.items()} == {q: [s for _, s in v] for q, v in m["post"].items()}
    assert read_on_as_group(clusters, gback, back, "destination") == expected_again


KILL_TOPIC_SCRIPT = textwrap.dedent("""
    import os, sys
    from kafka_ferry.core.specs.spec import load_spec
    from kafka_ferry.hooks.kafka_cluster import kafka_cluster
    from kafka_ferry.promotion.topic_rollback import rollback_topics
    from kafka_ferry.state.store import MigrationStateStore
    spec = load_spec(sys.argv[1])
    source, destination = kafka_cluster(spec.source.connection_id), kafka_cluster(spec.destination.connection_id)
    def die(step):
        if step == sys.argv[3]:
            os._exit(137)  # like SIGKILL: no cleanup, no exception handling
    rollback_topics(spec, source, destination, MigrationStateStore(destination, spec.state_topic_name),
                    [sys.argv[2]], quiesce_window_s=0.5, after_step=die)
""")
