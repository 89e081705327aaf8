"""The test bed's KRaft cluster ids never begin with "-" (kafka-storage would read one as an option)."""
from __future__ import annotations

import base64
import uuid

import kafka_testbed


def test_an_id_that_would_begin_with_a_dash_is_drawn_again():
    # 0xF8 encodes to "-" as the first URL-safe base64 character; 0x00 to "A".
    draws = iter([uuid.UUID(bytes=b"\xf8" + b"\x00" * 15), uuid.UUID(bytes=b"\x00" * 16)])
    assert base64.urlsafe_b64encode(b"\xf8" + b"\x00" * 15).decode().startswith("-")

    cluster_id = kafka_testbed.new_cluster_id(draws.__next__)

    assert cluster_id == "A" * 22
    assert next(draws, None) is None  # both draws were used


def test_ids_are_22_url_safe_characters():
    for _ in range(2000):
        cluster_id = kafka_testbed.new_cluster_id()
        assert len(cluster_id) == 22 and not cluster_id.startswith("-")
        assert base64.urlsafe_b64decode(cluster_id + "==") and len(base64.urlsafe_b64decode(cluster_id + "==")) == 16
