"""The batched OffsetFetch's wire codecs pinned by literal bytes written out from Kafka's JSON message specs
(clients/src/main/resources/common/message/*.json), malformed answers, and the SCRAM vector of RFC 7677."""

from __future__ import annotations

import base64

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafka_ferry.core.offsets import offset_fetch_wire as wire
from kafka_ferry.core.offsets.offset_fetch_wire import KafkaProtocolError, Reader, ScramClient, ScramError


def hexbytes(text: str) -> bytes:
    return bytes.fromhex(text.replace(" ", ""))


class TestRequests:
    def test_api_versions_v0_has_header_v1_and_no_body(self):
        # size 12 | api_key 18 | version 0 | correlation 1 | client_id "kf" (INT16 length)
        assert wire.request_message(18, 0, 1, "kf", wire.api_versions_v0(), flexible=False) == hexbytes(
            "0000000c 0012 0000 00000001 0002 6b66")

    def test_find_coordinator_v4_is_flexible_with_group_keys(self):
        body = wire.find_coordinator_v4(["g1", "g2"])
        # key_type 0 | compact array of 2 (3) | "g1" (3 = len+1) | "g2" | no tags
        assert body == hexbytes("00 03 03 6731 03 6732 00")
        # header v2: the client id stays an INT16-length string, then an empty tag section
        assert wire.request_message(10, 4, 7, "kf", body, flexible=True) == hexbytes(
            "00000016 000a 0004 00000007 0002 6b66 00") + body

    def test_offset_fetch_v8_asks_every_partition_of_each_group(self):
        # groups: 1 (2) | "g1" | topics null (0) | group tags | require_stable false | tags
        assert wire.offset_fetch_v8(["g1"]) == hexbytes("02 03 6731 00 00 00 00")
        assert wire.offset_fetch_v8(["a", "bc"], require_stable=True) == hexbytes(
            "03 02 61 00 00 03 6263 00 00 01 00")

    def test_sasl_requests_are_not_flexible(self):
        assert wire.sasl_handshake_v1("PLAIN") == hexbytes("0005 504c41494e")
        assert wire.sasl_authenticate_v1(b"\0u\0p") == hexbytes("00000004 00750070")
        assert wire.plain_message("u", "p") == b"\0u\0p"

    def test_a_long_group_id_takes_a_two_byte_varint(self):
        group = "g" * 200  # length + 1 = 201 = 0xc9 -> c9 01
        assert wire.offset_fetch_v8([group])[:3] == hexbytes("02 c901")


API_VERSIONS = hexbytes("00000001 0000 00000002 0009 0000 0008 000a 0000 0004")
FIND_COORDINATOR = hexbytes(
    "00000007 00"  # correlation 7, response header v1 tags
    "00000000 03"  # throttle, 2 coordinators
    "03 6731 00000001 0a 3132372e302e302e31 00007d64 0000 00 00"  # g1 -> node 1 at 127.0.0.1:32100
    "03 6732 ffffffff 01 ffffffff 000f 05 6e6f7065 00"  # g2: COORDINATOR_NOT_AVAILABLE (15), "nope"
    "00")
OFFSET_FETCH = hexbytes(
    "00000005 00 00000000 03"  # correlation 5, tags, throttle, 2 groups
    "03 6731 02 02 74 03"  # g1: 1 topic "t" with 2 partitions
    "00000000 000000000000002a ffffffff 03 6d64 0000 00"  # p0 offset 42, epoch -1, metadata "md"
    "00000001 ffffffffffffffff 00000003 00 0000 00"  # p1 offset -1, epoch 3, metadata null
    "00 0000 00"  # topic tags, group error 0, group tags
    "03 6732 01 0010 00"  # g2: no topics, NOT_COORDINATOR (16)
    "00")


class TestResponses:
    def test_api_versions_v0(self):
        answer = wire.read_api_versions_v0(wire.response_body("ApiVersions", API_VERSIONS, 1, flexible=False))
        assert answer.error_code == 0 and answer.versions == {9: (0, 8), 10: (0, 4)}
        assert answer.max_version(9) == 8 and answer.max_version(17) == -1

    def test_find_coordinator_v4(self):
        found = wire.read_find_coordinator_v4(wire.response_body("FindCoordinator", FIND_COORDINATOR, 7,
                                                                 flexible=True))
        assert found == [wire.Coordinator("g1", 1, "127.0.0.1", 32100, 0, None),
                         wire.Coordinator("g2", -1, "", -1, 15, "nope")]

    def test_offset_fetch_v8(self):
        groups = wire.read_offset_fetch_v8(wire.response_body("OffsetFetch", OFFSET_FETCH, 5, flexible=True))
        assert groups == [
            wire.GroupOffsets("g1", 0, (wire.CommittedOffset("t", 0, 42, -1, b"md", 0),
                                        wire.CommittedOffset("t", 1, -1, 3, None, 0))),
            wire.GroupOffsets("g2", 16, ())]

    def test_unknown_tagged_fields_are_skipped(self):
        # the last (response-level) tag section holds one field: tag 5, 2 bytes
        tagged = OFFSET_FETCH[:-1] + hexbytes("01 05 02 abcd")
        assert wire.read_offset_fetch_v8(wire.response_body("OffsetFetch", tagged, 5, flexible=True)) == \
            wire.read_offset_fetch_v8(wire.response_body("OffsetFetch", OFFSET_FETCH, 5, flexible=True))

    def test_sasl_responses(self):
        shake = wire.read_sasl_handshake_v1(wire.response_body("SaslHandshake", hexbytes(
            "00000002 0000 00000002 0005 504c41494e 000d 53435241 4d2d5348412d323536"), 2, flexible=False))
        assert shake == wire.SaslHandshake(0, ("PLAIN", "SCRAM-SHA-256"))
        auth = wire.read_sasl_authenticate_v1(wire.response_body("SaslAuthenticate", hexbytes(
            "00000003 0000 ffff 00000002 6162 0000000000000064"), 3, flexible=False))
        assert auth == wire.SaslAuthenticate(0, None, b"ab", 100)

    @pytest.mark.parametrize("cut", [1, 5, 20, len(OFFSET_FETCH) - 30, len(OFFSET_FETCH) - 1])
    def test_a_truncated_answer_names_the_field(self, cut):
        with pytest.raises(KafkaProtocolError, match=r"OffsetFetch .*truncated.* at byte \d+"):
            wire.read_offset_fetch_v8(wire.response_body("OffsetFetch", OFFSET_FETCH[:-cut], 5, flexible=True))

    def test_trailing_bytes_and_a_wrong_correlation_id_are_errors(self):
        with pytest.raises(KafkaProtocolError, match="1 unexpected byte"):
            wire.read_api_versions_v0(wire.response_body("ApiVersions", API_VERSIONS + b"\0", 1, flexible=False))
        with pytest.raises(KafkaProtocolError, match="correlation id 1, the request had 2"):
            wire.response_body("ApiVersions", API_VERSIONS, 2, flexible=False)

    def test_a_null_where_none_may_be_is_an_error(self):
        null_groups = hexbytes("00000005 00 00000000 00 00")
        with pytest.raises(KafkaProtocolError, match=r"'groups' \(.*\) is a null array"):
            wire.read_offset_fetch_v8(wire.response_body("OffsetFetch", null_groups, 5, flexible=True))

    def test_frame_size_is_bounded(self):
        assert wire.frame_size("x", hexbytes("00000010")) == 16
        for bad in ("ffffffff", "7fffffff", "00000000"):
            with pytest.raises(KafkaProtocolError, match="response size"):
                wire.frame_size("x", hexbytes(bad))
        with pytest.raises(KafkaProtocolError, match="truncated"):
            wire.frame_size("x", b"\0\0")

    def test_an_overlong_varint_is_an_error(self):
        with pytest.raises(KafkaProtocolError, match="longer than 5 bytes"):
            Reader("X", hexbytes("ffffffffff01")).uvarint("n")


@given(st.integers(0, 2**31 - 1))
def test_uvarint_round_trip(value):
    reader = Reader("X", wire._uvarint(value))
    assert reader.uvarint("n") == value
    reader.end()


@given(st.lists(st.text(min_size=1, max_size=300), max_size=30))
def test_find_coordinator_keys_read_back(keys):
    """The request's coordinator keys array has the layout the response's keys use, so a reader takes it back."""
    reader = Reader("FindCoordinator", wire.find_coordinator_v4(keys))
    assert reader.int8("key_type") == 0
    assert [reader.compact_string("key") for _ in range(reader.compact_array("keys"))] == keys
    reader.tags("request")
    reader.end()


@given(st.binary(max_size=200))
def test_any_bytes_decode_or_raise_the_protocol_error(data):
    for read in (wire.read_offset_fetch_v8, wire.read_find_coordinator_v4, wire.read_api_versions_v0,
                 wire.read_sasl_handshake_v1, wire.read_sasl_authenticate_v1):
        try:
            read(Reader("X", data))
        except KafkaProtocolError:
            pass


class TestScram:
    """RFC 7677 section 3: user "user", password "pencil", SCRAM-SHA-256."""

    NONCE = "rOprNGfwEbeRWgbNEkqO"
    SERVER_FIRST = b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"

    def test_rfc_7677_vector(self):
        client = ScramClient("SCRAM-SHA-256", "user", "pencil", nonce=self.NONCE)
        assert client.first_message() == b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
        assert client.final_message(self.SERVER_FIRST) == (
            b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
            b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
        client.verify_server_final(b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")

    def test_a_wrong_server_signature_is_refused(self):
        client = ScramClient("SCRAM-SHA-256", "user", "pencil", nonce=self.NONCE)
        client.final_message(self.SERVER_FIRST)
        with pytest.raises(ScramError, match="does not verify"):
            client.verify_server_final(b"v=" + base64.b64encode(b"\0" * 32))
        with pytest.raises(ScramError, match="refused: invalid-proof"):
            client.verify_server_final(b"e=invalid-proof")

    def test_server_first_must_extend_the_nonce(self):
        client = ScramClient("SCRAM-SHA-512", "user", "pencil", nonce=self.NONCE)
        with pytest.raises(ScramError, match="nonce"):
            client.final_message(b"r=other,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
        with pytest.raises(ScramError, match="malformed attribute"):
            client.final_message(b"garbage")

    def test_user_names_are_escaped_and_sha512_proofs_are_64_bytes(self):
        client = ScramClient("SCRAM-SHA-512", "a=b,c", "pw", nonce="n")
        assert client.first_message() == b"n,,n=a=3Db=2Cc,r=n"
        final = client.final_message(b"r=nXYZ,s=" + base64.b64encode(b"salt") + b",i=2")
        assert len(base64.b64decode(final.split(b",p=")[1])) == 64
        with pytest.raises(ScramError, match="not one of"):
            ScramClient("SCRAM-MD5", "u", "p")
