"""Decode-check failure reasons never quote the record (issue 24: `'123-45-6789 card 4111…' is not of type
'integer'` reached the run page, XCom and logs). They name the field's path, the keyword, the schema path and
the field's type instead."""

from __future__ import annotations

import json
import struct

from hypothesis import given, settings
from hypothesis import strategies as st

from kafka_ferry.core.schemas.schema_decode import PayloadChecker, RegisteredSchema

SECRET = "123-45-6789 card 4111111111111111"
PERSON = {"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object",
          "properties": {"ssn": {"type": "integer"}, "tags": {"type": "array", "items": {"enum": ["a", "b"]}},
                         "name": {"type": "string", "maxLength": 3, "pattern": "^[a-z]+$"}},
          "required": ["ssn"]}
AVRO = {"type": "record", "name": "P", "fields": [{"name": "note", "type": "string"}, {"name": "n", "type": "int"}]}
REGISTRY = {1: RegisteredSchema("JSON", json.dumps(PERSON)), 2: RegisteredSchema("AVRO", json.dumps(AVRO))}


def wire(schema_id: int, body: bytes) -> bytes:
    return b"\x00" + struct.pack(">I", schema_id) + body


def checker() -> PayloadChecker:
    return PayloadChecker(REGISTRY.get)


def test_a_json_type_failure_names_path_keyword_schema_path_and_type_not_the_value():
    verdict = checker().check(wire(1, json.dumps({"ssn": SECRET}).encode()))
    assert verdict.outcome == "failed"
    assert verdict.reason == ("JSON payload does not decode: at ssn: fails 'type' (schema path "
                              "properties/ssn/type); the field is a string")
    assert "123-45" not in verdict.reason and "4111" not in verdict.reason


def test_enum_pattern_and_length_failures_quote_nothing():
    for record in ({"ssn": 1, "tags": [SECRET]}, {"ssn": 1, "name": SECRET}, {"ssn": 1, "name": "ABCD"}):
        verdict = checker().check(wire(1, json.dumps(record).encode()))
        assert verdict.outcome == "failed" and SECRET not in verdict.reason and "ABCD" not in verdict.reason
        assert "fails '" in verdict.reason and "schema path properties/" in verdict.reason


def test_an_avro_failure_names_the_error_type_not_its_message():
    # a string field whose length runs past the end: fastavro's message would hold the bytes read
    body = bytes([2 * 60]) + SECRET.encode()
    verdict = checker().check(wire(2, body))
    assert verdict.outcome == "failed" and SECRET[:6] not in verdict.reason


@settings(max_examples=200)
# characters no fixed part of a reason holds in a run of six, so a hit can only be the value quoted
@given(st.text(min_size=6, alphabet="0123456789#@!%"))
def test_no_json_failure_quotes_a_string_value(value):
    for record in ({"ssn": value}, {"ssn": 1, "name": value}, {"ssn": 1, "tags": [value]}):
        verdict = checker().check(wire(1, json.dumps(record).encode()))
        if verdict.outcome == "failed":
            assert value not in verdict.reason
