"""Spark checkpoint layouts pinned by literal bytes (as Spark 4.2 writes them), and the per-partition decision
checked against the exact group translation it must agree with."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafka_ferry.core.batches.progress import PartitionProgress
from kafka_ferry.core.offsets.offset_decisions import decide, partition_copy
from kafka_ferry.core.offsets.offset_sync_policy import PartitionSyncTracker
from kafka_ferry.core.offsets.offset_translation import TranslationMethod
from kafka_ferry.core.offsets.spark_checkpoint import (
    BEFORE_COPY,
    IN_RUN,
    NOT_IN_MAP,
    UNRESOLVED,
    CheckpointFormatError,
    CommitFile,
    HandOverRefused,
    MappedPartition,
    OffsetSeqFile,
    SourceLine,
    batch_id,
    compact_interval,
    decide_position,
    encode_kafka_offset,
    is_compaction,
    log_state,
    parse_commit,
    parse_kafka_offset,
    parse_offset_map,
    parse_offsets,
    plan_rewrite,
    sink_batch,
    sink_compaction,
    sink_entries,
)
from kafka_ferry.translation.offset_map import offset_map_document

# the group translation's methods, which the hand-over's decisions share
AHEAD_OF_COPY, AT_COPIED_END, HOLE_NEXT_RECORD = (TranslationMethod.AHEAD_OF_COPY, TranslationMethod.AT_COPIED_END,
                                                 TranslationMethod.HOLE_NEXT_RECORD)

# offsets/3 of a query reading two topics into a file sink, as Spark 4.2 wrote it (no newline at the end)
SPARK_OFFSETS = (
    b'v1\n{"batchWatermarkMs":0,"batchTimestampMs":1764190000000,"conf":{"spark.sql.shuffle.partitions":"200"}}\n'
    b'{"orders":{"0":42,"1":17},"payments":{"0":5}}'
)
SPARK_COMMIT = b'v1\n{"nextBatchWatermarkMs":0}'


def mapped(topic="orders", partition=0, dest="p.orders", end=50, runs=((10, 19, 0), (25, 29, 10))):
    last = runs[-1] if runs else None
    nxt = last[2] + last[1] - last[0] + 1 if last else 7
    return MappedPartition(topic, partition, dest, end, nxt, tuple(runs))


class TestLayouts:
    def test_offsets_literal_bytes_round_trip(self):
        parsed = parse_offsets(SPARK_OFFSETS, "offsets/3")
        assert parsed.version == 1
        assert parsed.metadata.startswith('{"batchWatermarkMs":0')
        assert parsed.sources == (SourceLine('{"orders":{"0":42,"1":17},"payments":{"0":5}}'),)
        assert parsed.encode() == SPARK_OFFSETS

    def test_void_source_and_version_2(self):
        v1 = b'v1\n{}\n-\n{"t":{"0":1}}'
        assert parse_offsets(v1, "x").sources == (SourceLine(None), SourceLine('{"t":{"0":1}}'))
        assert parse_offsets(v1, "x").encode() == v1
        v2 = b'v2\n{}\n0:{"t":{"0":1}}\n1:-'
        parsed = parse_offsets(v2, "x")
        assert parsed.sources == (SourceLine('{"t":{"0":1}}', "0"), SourceLine(None, "1"))
        assert parsed.encode() == v2

    def test_empty_metadata_line_is_kept(self):
        assert parse_offsets(b'v1\n\n{"t":{"0":1}}', "x").encode() == b'v1\n\n{"t":{"0":1}}'

    @pytest.mark.parametrize("data, says", [(b"", "empty"), (b"v3\n{}", "newer"), (b"x1\n{}", "not a log version"),
                                            (b"v2\n{}\nnocolon", "sourceId"), (b"\xff", "UTF-8")])
    def test_bad_offsets_files_name_the_file(self, data, says):
        with pytest.raises(CheckpointFormatError, match=says) as err:
            parse_offsets(data, "ckpt/offsets/7")
        assert "ckpt/offsets/7" in str(err.value)

    def test_commit_literal_bytes(self):
        commit = parse_commit(SPARK_COMMIT, "commits/3")
        assert commit == CommitFile(1, '{"nextBatchWatermarkMs":0}')
        assert commit.encode() == SPARK_COMMIT

    def test_kafka_offset_json(self):
        assert parse_kafka_offset('{"a":{"1":5,"0":3}}') == {"a": {1: 5, 0: 3}}
        assert encode_kafka_offset({"b": {10: 1, 2: 0}, "a": {0: 3}}) == '{"a":{"0":3},"b":{"2":0,"10":1}}'
        for other in (None, "51", '{"logOffset":3}', '{"a":{"x":1}}', '{"a":{"0":true}}', "{}", "not json"):
            assert parse_kafka_offset(other) is None

    def test_batch_file_names(self):
        assert [batch_id(n) for n in ("0", "12", ".12.crc", "12.tmp", "012", "-1", "")] == [0, 12] + [None] * 5


class TestLogState:
    def test_latest_committed(self):
        assert log_state(["0", "1", ".1.crc"], ["0", "1"]).committed_batch() == 1

    def test_running_query_refused(self):
        with pytest.raises(HandOverRefused, match="batch 2 has offsets but no commit"):
            log_state(["0", "1", "2"], ["0", "1"]).committed_batch()

    def test_never_ran_and_commit_without_offsets(self):
        with pytest.raises(HandOverRefused, match="never ran"):
            log_state([], []).committed_batch()
        with pytest.raises(HandOverRefused, match="has no offsets/3"):
            log_state(["2"], ["2", "3"]).committed_batch()


class TestDecision:
    @pytest.mark.parametrize("offset, down, method", [
        (10, 0, IN_RUN), (19, 9, IN_RUN), (20, 10, HOLE_NEXT_RECORD), (24, 10, HOLE_NEXT_RECORD), (27, 12, IN_RUN),
        (30, 15, AT_COPIED_END), (50, 15, AT_COPIED_END)])
    def test_exact(self, offset, down, method):
        d = decide_position(mapped(), "orders", 0, offset)
        assert (d.downstream_offset, d.method, d.destination_topic) == (down, method, "p.orders")
        assert d.reason

    @pytest.mark.parametrize("offset, method", [(51, AHEAD_OF_COPY), (9, BEFORE_COPY), (0, BEFORE_COPY),
                                                (-1, UNRESOLVED), (-2, UNRESOLVED)])
    def test_refused(self, offset, method):
        d = decide_position(mapped(), "orders", 0, offset)
        assert d.refused and d.downstream_offset is None and d.method == method
        assert "orders-0@" in d.describe()

    def test_not_in_map_and_nothing_copied(self):
        assert decide_position(None, "t", 3, 5).method == NOT_IN_MAP
        empty = mapped(runs=(), end=7)
        assert decide_position(empty, "orders", 0, 7).downstream_offset == 7
        assert decide_position(empty, "orders", 0, 6).method == BEFORE_COPY

    def test_map_invariants(self):
        with pytest.raises(CheckpointFormatError, match="M1"):
            mapped(runs=((10, 19, 0), (15, 20, 30)))
        with pytest.raises(CheckpointFormatError, match="M1"):
            mapped(runs=((10, 19, 0), (25, 29, 5)))
        with pytest.raises(CheckpointFormatError, match="M2"):
            mapped(end=29)
        with pytest.raises(CheckpointFormatError, match="M2"):
            MappedPartition("t", 0, "d", 50, 99, ((10, 19, 0),))


class TestPlan:
    def test_rewrites_kafka_sources_and_keeps_others(self):
        offsets = OffsetSeqFile(1, "{}", (SourceLine('{"orders":{"0":27}}'), SourceLine(None),
                                          SourceLine('{"elsewhere":{"0":3}}'), SourceLine("51")))
        plan = plan_rewrite(3, offsets, {("orders", 0): mapped()})
        assert not plan.refused and plan.rewrites_anything
        assert plan.new_offsets(offsets).encode() == b'v1\n{}\n{"p.orders":{"0":12}}\n-\n{"elsewhere":{"0":3}}\n51'
        assert [s.kept_because for s in plan.sources][1:] == ["not a Kafka source's offset",
                                                              "none of its topics is migrated",
                                                              "not a Kafka source's offset"]

    def test_refusal_names_the_partition_and_blocks_the_write(self):
        offsets = OffsetSeqFile(1, "{}", (SourceLine('{"orders":{"0":27,"1":4}}'),))
        plan = plan_rewrite(3, offsets, {("orders", 0): mapped()})
        assert plan.refused == ("orders-1@4 refused [not-in-offset-map] the offset map holds no copy of this "
                                "partition: it was not migrated",)
        with pytest.raises(HandOverRefused, match="orders-1@4"):
            plan.new_offsets(offsets)

    def test_a_source_mixing_migrated_and_other_topics_is_refused(self):
        offsets = OffsetSeqFile(1, "{}", (SourceLine('{"orders":{"0":27},"local":{"0":1}}'),))
        plan = plan_rewrite(3, offsets, {("orders", 0): mapped()})
        assert plan.refused and "['local']" in plan.refused[0]


class TestOffsetMapDocument:
    def test_schema_version_and_unknown_version(self):
        copy = partition_copy(PartitionProgress("t", 0, "d", 127, 124, 14), [(100, 0), (109, 9), (120, 10)])
        document = offset_map_document("m", [copy])
        assert document["schema_version"] == 1
        parsed = parse_offset_map(json.loads(json.dumps(document)), "offset-map.json")
        assert parsed[("t", 0)].runs == ((100, 109, 0), (120, 124, 10))
        with pytest.raises(CheckpointFormatError, match="schema_version 2"):
            parse_offset_map({**document, "schema_version": 2}, "offset-map.json")
        with pytest.raises(CheckpointFormatError, match="listed twice"):
            parse_offset_map({**document, "partitions": document["partitions"] * 2}, "offset-map.json")

    @given(st.lists(st.tuples(st.integers(1, 4), st.integers(1, 3)), min_size=1, max_size=50), st.integers(1, 5),
           st.integers(0, 3))
    def test_agrees_with_the_exact_group_translation(self, steps, interval, beyond):
        """Every position inside the copied range translates as a consumer group's committed offset would; every
        position outside it is refused, never clamped."""
        up, down, tracker, syncs = -1, -1, PartitionSyncTracker(interval), []
        for du, dd in steps:
            up, down = up + du, down + dd
            syncs += tracker.observe(up, down)
        syncs += tracker.finish()
        end = up + 1 + beyond
        copy = partition_copy(PartitionProgress("t", 0, "d", end, up, down), syncs)
        parsed = parse_offset_map(offset_map_document("m", [copy]), "offset-map.json")[("t", 0)]
        first = copy.offset_map.syncs[0].upstream_offset
        for u in range(end + 3):
            d = decide_position(parsed, "t", 0, u)
            if first <= u <= end:
                assert d.downstream_offset == decide("g", u, "", copy).downstream_offset, d.describe()
            else:
                assert d.refused, d.describe()


class TestFileSinkLog:
    @pytest.mark.parametrize("compactions, interval", [
        ((), 10), ((9,), 10), ((4,), 5), ((19,), 20), ((29,), 10), ((23,), 12), ((10,), 11), ((11,), 12),
        ((21,), 11), ((39,), 10), ((9, 19), 10), ((5, 11, 17), 6)])
    def test_compact_interval_as_spark_derives_it(self, compactions, interval):
        assert compact_interval(compactions) == interval

    def test_names_and_compaction(self):
        assert [sink_batch(n) for n in ("9.compact", "10", ".10.crc", "x.compact")] == [(9, True), (10, False),
                                                                                       None, None]
        assert is_compaction(9, 10) and not is_compaction(10, 10)
        add = '{"path":"f1","action":"add"}'
        assert sink_compaction([add, '{"path":"f2","action":"add"}', '{"path":"f2","action":"delete"}']) == \
            f"v1\n{add}".encode()
        assert sink_compaction([]) == b"v1"
        assert sink_entries(b'v1\n{"path":"f1"}', "x") == ['{"path":"f1"}']
