"""Committed metadata that is not UTF-8 (Kafka Streams commits its partition time as bytes): confluent-kafka
raises on reading such a field, so the offset is kept and the metadata dropped (``kafka.cluster._commit_metadata``).
The live case is ``tests/integration/test_streams_group.py``, whose running application commits it."""

from __future__ import annotations

from confluent_kafka import TopicPartition

from kafka_ferry.kafka.cluster import _commit_metadata


class _BinaryMetadata:
    """What confluent-kafka's TopicPartition does for bytes that are not UTF-8: raise on reading ``metadata``."""

    topic, partition = "words", 3

    @property
    def metadata(self) -> str:
        raise UnicodeDecodeError("utf-8", b"\x01\xf1\x02", 1, 2, "invalid continuation byte")


def test_text_metadata_is_kept_and_binary_metadata_is_dropped_with_the_offset_kept(caplog):
    assert _commit_metadata("g", TopicPartition("t", 0, 5, metadata="keep-me")) == "keep-me"
    assert _commit_metadata("g", TopicPartition("t", 0, 5)) == ""
    with caplog.at_level("INFO", logger="kafka_ferry.kafka.cluster"):
        assert _commit_metadata("wordcount", _BinaryMetadata()) == ""  # type: ignore[arg-type]
    assert "group wordcount words-3: committed metadata is not UTF-8" in caplog.text
