"""Serialized Protobuf descriptors (what confluent-kafka's serializer registers) read as .proto text."""

from __future__ import annotations

import base64
import re

import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from kafka_ferry.core.schemas.protobuf_schema import (
    UnrenderableDescriptor,
    proto_text,
    render,
    serialized_descriptor,
)

F = descriptor_pb2.FieldDescriptorProto


def ping() -> descriptor_pb2.FileDescriptorProto:
    fdp = descriptor_pb2.FileDescriptorProto(name="ping.proto", package="acme", syntax="proto3")
    m = fdp.message_type.add(name="Ping")
    m.field.add(name="seq", number=1, type=F.TYPE_INT32, label=F.LABEL_OPTIONAL)
    m.field.add(name="from", number=2, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    return fdp


def encoded(fdp) -> str:
    return base64.b64encode(fdp.SerializeToString()).decode()


def test_what_confluent_kafkas_serializer_registers_is_recognised_and_rendered():
    # The bytes a ProtobufSerializer of this Ping registered on Apicurio 3.3.3 (read back from the registry).
    stored = "ChBwcm9iZS9waW5nLnByb3RvEgRhY21lIiEKBFBpbmcSCwoDc2VxGAEgASgFEgwKBGZyb20YAiABKAliBnByb3RvMw=="
    descriptor = serialized_descriptor(stored)
    assert descriptor is not None and descriptor.name == "probe/ping.proto"
    assert proto_text(stored) == ('syntax = "proto3";\npackage acme;\nmessage Ping {\n  int32 seq = 1;\n'
                                  '  string from = 2;\n}\n')


def test_proto_text_is_left_as_it_is():
    text = 'syntax = "proto3";\npackage acme;\n\nmessage Ping {\n  int32 seq = 1;\n}\n'
    assert serialized_descriptor(text) is None
    assert proto_text(text) is text
    assert serialized_descriptor("") is None
    assert serialized_descriptor("bm90IGEgZGVzY3JpcHRvcg==") is None  # base64, but of no descriptor


def test_a_rich_proto3_file_renders_every_construct_it_keeps():
    fdp = descriptor_pb2.FileDescriptorProto(name="acme/order.proto", package="acme.v1", syntax="proto3",
                                             dependency=["acme/money.proto", "google/protobuf/timestamp.proto"],
                                             public_dependency=[0])
    fdp.options.java_package = "com.acme.v1"
    fdp.options.java_multiple_files = True
    fdp.options.optimize_for = descriptor_pb2.FileOptions.SPEED
    status = fdp.enum_type.add(name="Status")
    status.options.allow_alias = True
    for name, number in (("UNKNOWN", 0), ("OPEN", 1), ("STARTED", 1)):
        status.value.add(name=name, number=number)
    status.reserved_range.add(start=5, end=7)
    order = fdp.message_type.add(name="Order")
    line = order.nested_type.add(name="Line")
    line.field.add(name="sku", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    entry = order.nested_type.add(name="TagsEntry")
    entry.options.map_entry = True
    entry.field.add(name="key", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    entry.field.add(name="value", number=2, type=F.TYPE_INT64, label=F.LABEL_OPTIONAL)
    order.oneof_decl.add(name="payment")
    order.oneof_decl.add(name="_note")
    order.field.add(name="id", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    order.field.add(name="lines", number=2, type=F.TYPE_MESSAGE, type_name=".acme.v1.Order.Line",
                    label=F.LABEL_REPEATED)
    order.field.add(name="tags", number=3, type=F.TYPE_MESSAGE, type_name=".acme.v1.Order.TagsEntry",
                    label=F.LABEL_REPEATED)
    order.field.add(name="card", number=4, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL, oneof_index=0)
    order.field.add(name="iban", number=5, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL, oneof_index=0)
    order.field.add(name="note", number=6, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL, oneof_index=1,
                    proto3_optional=True)
    order.field.add(name="status", number=7, type=F.TYPE_ENUM, type_name=".acme.v1.Status", label=F.LABEL_OPTIONAL)
    order.field.add(name="codes", number=8, type=F.TYPE_INT32, label=F.LABEL_REPEATED).options.packed = False
    order.field.add(name="total", number=9, type=F.TYPE_MESSAGE, type_name=".acme.Money",
                    label=F.LABEL_OPTIONAL).options.deprecated = True
    order.reserved_range.add(start=10, end=11)
    order.reserved_range.add(start=20, end=536870912)
    order.reserved_name.append("legacy")
    service = fdp.service.add(name="Orders")
    service.method.add(name="Watch", input_type=".acme.v1.Order", output_type=".acme.v1.Order",
                       server_streaming=True)

    assert render(fdp) == '''syntax = "proto3";
package acme.v1;
import public "acme/money.proto";
import "google/protobuf/timestamp.proto";
option java_package = "com.acme.v1";
option optimize_for = SPEED;
option java_multiple_files = true;
enum Status {
  option allow_alias = true;
  UNKNOWN = 0;
  OPEN = 1;
  STARTED = 1;
  reserved 5 to 7;
}
message Order {
  message Line {
    string sku = 1;
  }
  string id = 1;
  repeated .acme.v1.Order.Line lines = 2;
  map<string, int64> tags = 3;
  oneof payment {
    string card = 4;
    string iban = 5;
  }
  optional string note = 6;
  .acme.v1.Status status = 7;
  repeated int32 codes = 8 [packed = false];
  .acme.Money total = 9 [deprecated = true];
  reserved 10, 20 to max;
  reserved "legacy";
}
service Orders {
  rpc Watch (.acme.v1.Order) returns (stream .acme.v1.Order);
}
'''


def test_proto2_labels_and_defaults():
    fdp = descriptor_pb2.FileDescriptorProto(name="p2.proto", package="old")
    m = fdp.message_type.add(name="Legacy")
    m.field.add(name="id", number=1, type=F.TYPE_INT64, label=F.LABEL_REQUIRED)
    m.field.add(name="name", number=2, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL, default_value="none")
    m.field.add(name="tries", number=3, type=F.TYPE_INT32, label=F.LABEL_OPTIONAL, default_value="3")
    assert render(fdp) == ('syntax = "proto2";\npackage old;\nmessage Legacy {\n  required int64 id = 1;\n'
                           '  optional string name = 2 [default = "none"];\n  optional int32 tries = 3 [default = 3];\n'
                           '}\n')


@pytest.mark.parametrize(("build", "named"), [
    (lambda f: f.message_type.add(name="G").field.add(name="grp", number=1, type=F.TYPE_GROUP,
                                                     label=F.LABEL_OPTIONAL, type_name=".G.Grp"), "proto2 groups"),
    (lambda f: f.message_type.add(name="E").extension_range.add(start=100, end=200), "message E: extensions"),
    (lambda f: f.extension.add(name="ext", number=100, extendee=".E"), "file-level extensions (ext)"),
])
def test_what_cannot_be_rendered_is_refused_naming_it(build, named):
    fdp = descriptor_pb2.FileDescriptorProto(name="x.proto")
    build(fdp)
    with pytest.raises(UnrenderableDescriptor, match=re.escape(named)):
        render(fdp)


def test_the_rendered_ping_describes_the_same_wire_format_as_the_descriptor():
    """The message the descriptor builds reads what the serializer wrote: field numbers and types as rendered."""
    fdp = ping()
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    ping_class = message_factory.GetMessageClass(pool.FindMessageTypeByName("acme.Ping"))
    payload = ping_class(seq=7, **{"from": "me"}).SerializeToString()
    assert payload == bytes([0x08, 0x07, 0x12, 0x02]) + b"me"  # int32 seq = 1; string from = 2
    assert "  int32 seq = 1;\n  string from = 2;\n" in proto_text(encoded(fdp))
