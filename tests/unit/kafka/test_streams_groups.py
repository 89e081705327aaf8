"""kafka.streams_groups: the Java helper's answer as captured from the test bed's 4.3 and 3.9 brokers, parsed; and
the helper is opt-in (no classpath, no Java call)."""

from __future__ import annotations

import pytest

from kafka_ferry.kafka import streams_groups

# StreamsGroups.java's stdout against the 4.3 cluster (a stopped word count) and the 3.9 one
ANSWER_4_3 = (
    '{"listed": ["sgrp-a1f2c147-wc", "sgrp-a99adaa3-wc"]}\n'
    '{"group": "sgrp-a1f2c147-wc", "state": "EMPTY", "members": 0, "source_topics": ["sgrp-a1f2c147.text"], '
    '"internal_topics": ["sgrp-a1f2c147-wc-counts-changelog", "sgrp-a1f2c147-wc-words-repartition"]}\n'
    '{"group": "nope", "error": "GroupIdNotFoundException", "message": "Group nope not found."}\n')
ANSWER_3_9 = ('{"listed": []}\n{"group": "nope", "error": "UnsupportedVersionException", '
              '"message": "The node does not support STREAMS_GROUP_DESCRIBE"}\n')


def test_the_answer_of_a_4_3_cluster():
    answer = streams_groups.parse_answer(ANSWER_4_3)
    assert answer.listed == ("sgrp-a1f2c147-wc", "sgrp-a99adaa3-wc")
    assert answer.described == {"sgrp-a1f2c147-wc": streams_groups.StreamsGroup(
        "sgrp-a1f2c147-wc", "EMPTY", 0, ("sgrp-a1f2c147.text",),
        ("sgrp-a1f2c147-wc-counts-changelog", "sgrp-a1f2c147-wc-words-repartition"))}
    assert answer.missing == {"nope": "GroupIdNotFoundException: Group nope not found."}


def test_the_answer_of_a_cluster_before_kip_1071():
    answer = streams_groups.parse_answer(ANSWER_3_9)
    assert (answer.listed, dict(answer.described)) == ((), {})
    assert "STREAMS_GROUP_DESCRIBE" in answer.missing["nope"]


def test_no_listing_is_no_answer():
    with pytest.raises(streams_groups.StreamsGroupsUnavailable, match="no group listing"):
        streams_groups.parse_answer("")


def test_it_is_opt_in():
    assert not streams_groups.configured({})
    with pytest.raises(streams_groups.StreamsGroupsUnavailable, match=streams_groups.CLASSPATH_ENV):
        streams_groups.streams_groups({"bootstrap.servers": "b:1"}, ["g"], environ={})


def test_a_classpath_without_kafka_clients_is_refused(tmp_path):
    (tmp_path / "slf4j-api-1.7.36.jar").write_bytes(b"")
    with pytest.raises(streams_groups.StreamsGroupsUnavailable, match="no kafka-clients jar"):
        streams_groups.streams_groups({"bootstrap.servers": "b:1"}, ["g"],
                                      environ={streams_groups.CLASSPATH_ENV: str(tmp_path)})
