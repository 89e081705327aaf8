"""A Spark checkpoint and its file sink in object storage (the test bed's S3-compatible server, never a mock),
handed over through the work dir's connection: the new batch, the sink's entry and the record land in the bucket,
a second hand-over changes nothing, a running query's checkpoint is refused with every object unchanged."""

from __future__ import annotations

import json

import pytest

from kafka_ferry.core.offsets.spark_checkpoint import HandOverRefused
from kafka_ferry.storage.workdir import work_dir
from kafka_ferry.translation.spark_checkpoint import hand_over, marker_name

pytestmark = [pytest.mark.integration, pytest.mark.airflow]

META = '{"batchWatermarkMs":0,"batchTimestampMs":1795730563264,"conf":{"spark.sql.shuffle.partitions":"2"}}'
MAP = {"schema_version": 1, "partitions": [
    {"source_topic": "a", "partition": 0, "destination_topic": "p.a", "copied_upstream_end": 50,
     "next_downstream_offset": 40, "runs": [[10, 49, 0]]}]}


def objects(fs, root: str) -> dict[str, bytes]:
    return {path: fs.cat_file(path) for path in sorted(fs.find(root))}


def test_hand_over_in_object_storage(s3_work_dir):
    _, fs, root = s3_work_dir
    fs.pipe_file(f"{root}/work/m/offset-map/offset-map.json", json.dumps(MAP).encode())
    for ckpt, batches, commits in ((f"{root}/ckpt", 2, 2), (f"{root}/running", 2, 1)):
        for batch in range(batches):
            fs.pipe_file(f"{ckpt}/offsets/{batch}", f'v1\n{META}\n{{"a":{{"0":{20 + batch}}}}}'.encode())
        for batch in range(commits):
            fs.pipe_file(f"{ckpt}/commits/{batch}", b'v1\n{"nextBatchWatermarkMs":0}')
        fs.pipe_file(f"{ckpt}/metadata", b'{"id":"q"}')
    for batch in range(2):
        fs.pipe_file(f"{root}/out/_spark_metadata/{batch}", b'v1\n{"path":"s3://x/part-%d.json","action":"add"}'
                     % batch)

    done = hand_over(work_dir("m"), "m", [(f"s3://{root}/ckpt", f"s3://{root}/out")],
                     query_bootstrap="dest:9092")
    assert [(d.status, d.batch) for d in done] == [("written", 2)]
    assert fs.cat_file(f"{root}/ckpt/offsets/2") == f'v1\n{META}\n{{"p.a":{{"0":11}}}}'.encode()
    assert fs.cat_file(f"{root}/ckpt/commits/2") == b'v1\n{"nextBatchWatermarkMs":0}'
    assert fs.cat_file(f"{root}/out/_spark_metadata/2") == b"v1"
    assert json.loads(fs.cat_file(f"{root}/ckpt/{marker_name('m')}"))["status"] == "done"

    before = objects(fs, root)
    assert [d.status for d in hand_over(work_dir("m"), "m", [(f"s3://{root}/ckpt", f"s3://{root}/out")])] == [
        "already-done"]
    with pytest.raises(HandOverRefused, match="batch 1 has offsets but no commit"):
        hand_over(work_dir("m"), "m", [(f"s3://{root}/running", None)])
    assert objects(fs, root) == before
