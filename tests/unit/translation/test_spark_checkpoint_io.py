"""The checkpoint rewrite on a local directory: a new committed batch, old ones untouched, idempotent, and every
refusal leaves the directory byte for byte as it was."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kafka_ferry.core.offsets.spark_checkpoint import HandOverRefused, MappedPartition, parse_offsets, sink_entries
from kafka_ferry.translation.spark_checkpoint import hand_over, marker_name, rewrite_checkpoint

META = '{"batchWatermarkMs":0,"batchTimestampMs":1795730563264,"conf":{"spark.sql.shuffle.partitions":"2"}}'
MAP = {("a", 0): MappedPartition("a", 0, "p.a", 50, 20, ((10, 29, 0),)),
       ("a", 1): MappedPartition("a", 1, "p.a", 8, 8, ((0, 7, 0),)),
       ("b", 0): MappedPartition("b", 0, "p.b", 5, 5, ((0, 4, 0),))}


def checkpoint(root: Path, batches: dict[int, str], commits: int | None = None, state: bool = False) -> Path:
    (root / "offsets").mkdir(parents=True)
    (root / "commits").mkdir()
    (root / "sources" / "0").mkdir(parents=True)
    (root / "metadata").write_text('{"id":"q"}')
    (root / "sources" / "0" / "0").write_bytes(b'\x00v1\n{"a":{"0":0}}')
    for batch, line in batches.items():
        (root / "offsets" / str(batch)).write_text(f"v1\n{META}\n{line}")
        (root / "offsets" / f".{batch}.crc").write_bytes(b"crc")
    for batch in range(max(batches) + 1 if commits is None else commits + 1):
        (root / "commits" / str(batch)).write_text('v1\n{"nextBatchWatermarkMs":0}')
    if state:
        (root / "state" / "0").mkdir(parents=True)
    return root


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_writes_a_new_committed_batch_and_keeps_the_old(tmp_path):
    root = checkpoint(tmp_path / "ckpt", {0: '{"a":{"0":12,"1":8}}', 1: '{"a":{"0":27,"1":8},"b":{"0":5}}'})
    before = snapshot(root)
    done = rewrite_checkpoint(root, "m", MAP, query_bootstrap="dest:9092")
    assert (done.status, done.batch) == ("written", 2)
    after = snapshot(root)
    assert {k: v for k, v in after.items() if k in before} == before  # nothing Spark wrote was touched
    assert after["offsets/2"] == f'v1\n{META}\n{{"p.a":{{"0":17,"1":8}},"p.b":{{"0":5}}}}'.encode()
    assert after["commits/2"] == after["commits/1"]
    record = json.loads(after[marker_name("m")])
    assert (record["status"], record["from_batch"], record["batch"]) == ("done", 1, 2)
    assert record["resume_with"] == {"subscribe": "p.a,p.b", "kafka.bootstrap.servers": "dest:9092"}
    assert parse_offsets(after["offsets/2"], "x").metadata == META
    # a second rewrite changes nothing, even once the query ran on the destination
    assert rewrite_checkpoint(root, "m", MAP).status == "already-done"
    assert snapshot(root) == after


def test_dry_run_changes_nothing(tmp_path):
    root = checkpoint(tmp_path / "ckpt", {0: '{"a":{"0":27}}'})
    before = snapshot(root)
    plan = rewrite_checkpoint(root, "m", MAP, dry_run=True)
    assert plan.status == "planned" and plan.batch == 1
    assert any("-> p.a-0@17 [exact-run]" in line for line in plan.lines())
    assert snapshot(root) == before


@pytest.mark.parametrize("batches, commits, state, says", [
    ({0: '{"a":{"0":27}}', 1: '{"a":{"0":30}}'}, 0, False, "batch 1 has offsets but no commit"),
    ({0: '{"a":{"0":51}}'}, None, False, "a-0@51 refused [ahead-of-copy]"),
    ({0: '{"a":{"0":9}}'}, None, False, "a-0@9 refused [before-first-copied-record]"),
    ({0: '{"a":{"0":27,"7":1}}'}, None, False, "a-7@1 refused [not-in-offset-map]"),
    ({0: '{"other":{"0":3}}'}, None, False, "reads no topic of migration m"),
    ({0: '{"a":{"0":27}}'}, None, True, "a stateful query"),
])
def test_refused_unchanged(tmp_path, batches, commits, state, says):
    root = checkpoint(tmp_path / "ckpt", batches, commits, state)
    before = snapshot(root)
    with pytest.raises(HandOverRefused, match=says.replace("[", r"\[").replace("]", r"\]")):
        rewrite_checkpoint(root, "m", MAP)
    assert snapshot(root) == before


def test_an_interrupted_rewrite_is_finished_not_redone(tmp_path):
    root = checkpoint(tmp_path / "ckpt", {0: '{"a":{"0":27}}'})
    rewrite_checkpoint(root, "m", MAP)
    written = snapshot(root)
    # as if killed after offsets/1: the commit and the done record are missing
    (root / "commits" / "1").unlink()
    record = json.loads(written[marker_name("m")])
    (root / marker_name("m")).write_text(json.dumps({**record, "status": "writing"}))
    assert rewrite_checkpoint(root, "m", MAP).status == "written"
    assert snapshot(root)["commits/1"] == written["commits/1"]
    assert json.loads((root / marker_name("m")).read_text())["status"] == "done"


def test_interrupted_then_the_query_ran_is_refused(tmp_path):
    root = checkpoint(tmp_path / "ckpt", {0: '{"a":{"0":27}}'})
    rewrite_checkpoint(root, "m", MAP)
    record = json.loads((root / marker_name("m")).read_text())
    (root / marker_name("m")).write_text(json.dumps({**record, "status": "writing"}))
    (root / "offsets" / "1").write_text(f'v1\n{META}\n{{"p.a":{{"0":99}}}}')
    before = snapshot(root)
    with pytest.raises(HandOverRefused, match="not the batch the interrupted rewrite wrote"):
        rewrite_checkpoint(root, "m", MAP)
    assert snapshot(root) == before


def sink(root: Path, batches: int, compact_at: tuple[int, ...] = ()) -> Path:
    log = root / "_spark_metadata"
    log.mkdir(parents=True)
    for b in range(batches):
        name = f"{b}.compact" if b in compact_at else str(b)
        lines = [json.dumps({"path": f"file:///out/part-{c}.json", "action": "add"})
                 for c in (range(b + 1) if b in compact_at else [b])]
        (log / name).write_text("\n".join(["v1", *lines]))
    return root


def test_file_sink_gets_the_new_batch_entry(tmp_path):
    root = checkpoint(tmp_path / "ckpt", {0: '{"a":{"0":12}}', 1: '{"a":{"0":27}}'})
    out = sink(tmp_path / "out", 2)
    rewrite_checkpoint(root, "m", MAP, file_sink=out)
    assert (out / "_spark_metadata" / "2").read_bytes() == b"v1"


def test_file_sink_compaction_is_written_when_due(tmp_path):
    root = checkpoint(tmp_path / "ckpt", {b: '{"a":{"0":12}}' for b in range(9)})
    out = sink(tmp_path / "out", 9)
    rewrite_checkpoint(root, "m", MAP, file_sink=out)
    compact = (out / "_spark_metadata" / "9.compact").read_bytes()
    assert [json.loads(e)["path"] for e in sink_entries(compact, "x")] == [f"file:///out/part-{c}.json"
                                                                          for c in range(9)]


def test_file_sink_of_another_query_is_refused_unchanged(tmp_path):
    root = checkpoint(tmp_path / "ckpt", {0: '{"a":{"0":12}}', 1: '{"a":{"0":27}}'})
    out = sink(tmp_path / "out", 5)
    before = snapshot(root), snapshot(out)
    with pytest.raises(HandOverRefused, match="latest batch is 4"):
        rewrite_checkpoint(root, "m", MAP, file_sink=out)
    assert (snapshot(root), snapshot(out)) == before


def test_hand_over_reads_the_promotions_offset_map(tmp_path):
    work = tmp_path / "work"
    (work / "offset-map").mkdir(parents=True)
    (work / "offset-map" / "offset-map.json").write_text(json.dumps({"schema_version": 1, "partitions": [
        {"source_topic": "a", "partition": 0, "destination_topic": "p.a", "copied_upstream_end": 50,
         "next_downstream_offset": 20, "runs": [[10, 29, 0]]}]}))
    good = checkpoint(tmp_path / "good", {0: '{"a":{"0":50}}'})
    bad = checkpoint(tmp_path / "bad", {0: '{"a":{"0":51}}'})
    bad_before = snapshot(bad)
    with pytest.raises(HandOverRefused, match="1 of 2 checkpoint"):
        hand_over(work, "m", [(str(good), None), (str(bad), None)])
    assert b'{"p.a":{"0":20}}' in (good / "offsets" / "1").read_bytes()  # at the copied end: the destination's end
    assert snapshot(bad) == bad_before
    with pytest.raises(HandOverRefused, match="no offset map"):
        hand_over(tmp_path / "nowhere", "m", [(str(good), None)])


def test_a_batch_appearing_while_the_rewrite_plans_is_refused_unchanged(tmp_path, monkeypatch):
    """The query started again between reading the checkpoint and writing: nothing is written."""
    import kafka_ferry.translation.spark_checkpoint as io

    root = checkpoint(tmp_path / "ckpt", {0: '{"a":{"0":27}}'})
    real = io.plan_rewrite

    def spark_writes_meanwhile(*args):
        plan = real(*args)
        (root / "offsets" / "1").write_text(f'v1\n{META}\n{{"a":{{"0":30}}}}')
        return plan

    monkeypatch.setattr(io, "plan_rewrite", spark_writes_meanwhile)
    before = snapshot(root)
    with pytest.raises(HandOverRefused, match="a new batch appeared while the rewrite was planned"):
        rewrite_checkpoint(root, "m", MAP)
    after = snapshot(root)
    assert after.pop("offsets/1") and after == before  # only Spark's file is new; no record, no commit


def test_a_batch_file_written_between_the_check_and_the_create_is_never_overwritten(tmp_path, monkeypatch):
    import kafka_ferry.translation.spark_checkpoint as io

    root = checkpoint(tmp_path / "ckpt", {0: '{"a":{"0":27}}'})
    real = io.Checkpoint.create

    def race(self, folder, batch, data):
        if folder == "offsets":
            (root / "offsets" / str(batch)).write_bytes(b"spark's")
        return real(self, folder, batch, data)

    monkeypatch.setattr(io.Checkpoint, "create", race)
    with pytest.raises(HandOverRefused, match="appeared while the rewrite ran"):
        rewrite_checkpoint(root, "m", MAP)
    assert (root / "offsets" / "1").read_bytes() == b"spark's"
    assert not (root / "commits" / "1").exists()
