"""A schema's text in the forms registries store it, and the one form two registries agree on.

Registries store the same schema differently: Apicurio reformats Avro JSON and .proto text, and keeps a
Protobuf schema registered as a serialized descriptor (what confluent-kafka's serializer sends) as base64,
which AxonOps refuses. `canonical` is what comparisons use; `registrable_text` is what a destination is given.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache

from kafka_ferry.core.schemas.protobuf_schema import UnrenderableDescriptor, proto_text


@lru_cache(maxsize=4096)  # pure; a plan compares each version several times, and rendering is not free
def canonical(schema: str, schema_type: str = "AVRO") -> str:
    """A form two registries agree on for the same schema (Apicurio reformats stored text).

    Avro and JSON Schema: the JSON document with sorted keys and no whitespace. Protobuf: the .proto text (a
    serialized descriptor rendered, `core.schemas.protobuf_schema`) without comments and with whitespace collapsed
    around punctuation.
    """
    if schema_type in ("AVRO", "JSON"):
        try:
            return json.dumps(json.loads(schema), sort_keys=True, separators=(",", ":"))
        except ValueError:
            return schema.strip()
    try:
        schema = proto_text(schema)
    except UnrenderableDescriptor:
        pass  # compared as stored: equal only to the same bytes
    text = re.sub(r"//[^\n]*|/\*.*?\*/", " ", schema, flags=re.S)
    text = re.sub(r"\s+", " ", text)
    text = re.sub(r"\s*([{}()\[\];=,<>])\s*", r"\1", text)
    return text.strip()


def registrable_text(schema: str, schema_type: str) -> str:
    """The schema text a destination is given: Protobuf always as .proto text, since a serialized descriptor is
    refused by registries that compile text (`core.schemas.protobuf_schema`); Avro and JSON Schema as stored. Raises
    UnrenderableDescriptor (a ValueError) for a descriptor that .proto text cannot express."""
    return proto_text(schema) if schema_type == "PROTOBUF" else schema
