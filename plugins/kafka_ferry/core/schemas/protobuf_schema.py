"""Protobuf schemas stored as serialized descriptors, read as the .proto text every registry compiles.

Why: confluent-kafka's ``ProtobufSerializer`` registers a schema as its base64-encoded serialized
``FileDescriptorProto``, not as .proto text. Confluent's registry turns that into text when it stores it;
Apicurio 3.3.3 stores the base64 as it came, and AxonOps refuses it ("failed to compile protobuf", measured).
So a source registry can hold descriptor-form versions that a destination cannot take, and two registries can
hold the same schema in two forms. The schema stage reads every Protobuf version as .proto text
(``proto_text``): the destination is given text, and versions compare equal whatever form each side stores.

What the rendering keeps: syntax, package, imports (public too), file options with scalar values, messages
with nested messages and enums, fields (labels, proto3 ``optional``, maps, ``[default]``, ``[packed]``,
``[deprecated]``), real oneofs, reserved ranges and names, enums (``allow_alias``, reserved), services.
What it refuses, naming it: proto2 groups, extensions, editions: rendering them wrongly would register a
different schema, so the migration stops before writing instead.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Sequence
from typing import Any

from google.protobuf import descriptor_pb2
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import DecodeError, Message

from kafka_ferry.core.common.failures import Retryable

F = descriptor_pb2.FieldDescriptorProto
_SCALARS = {F.TYPE_DOUBLE: "double", F.TYPE_FLOAT: "float", F.TYPE_INT64: "int64", F.TYPE_UINT64: "uint64",
            F.TYPE_INT32: "int32", F.TYPE_FIXED64: "fixed64", F.TYPE_FIXED32: "fixed32", F.TYPE_BOOL: "bool",
            F.TYPE_STRING: "string", F.TYPE_BYTES: "bytes", F.TYPE_UINT32: "uint32", F.TYPE_SFIXED32: "sfixed32",
            F.TYPE_SFIXED64: "sfixed64", F.TYPE_SINT32: "sint32", F.TYPE_SINT64: "sint64"}
_BASE64 = re.compile(r"[A-Za-z0-9+/]+={0,2}")
# Past the largest field number (2^29 - 1, messages, exclusive end) or enum number (2^31 - 1, inclusive): "max".
_MAX = {False: 536870912, True: 2147483647}


class UnrenderableDescriptor(Retryable, ValueError):
    """A serialized descriptor uses something .proto text rendering here does not keep (the message says what)."""


def serialized_descriptor(schema: str) -> descriptor_pb2.FileDescriptorProto | None:
    """The descriptor when `schema` is a base64 serialized FileDescriptorProto; None when it is .proto text.

    .proto text always has spaces or semicolons, base64 never: only a whole base64 string that parses to a
    descriptor declaring something counts.
    """
    text = schema.strip()
    if not text or not _BASE64.fullmatch(text):
        return None
    try:
        fdp = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(text, validate=True))
    except (binascii.Error, DecodeError, ValueError):
        return None
    return fdp if (fdp.message_type or fdp.enum_type or fdp.service) else None


def proto_text(schema: str) -> str:
    """`schema` as .proto text: rendered from a serialized descriptor, else as it is."""
    fdp = serialized_descriptor(schema)
    return schema if fdp is None else render(fdp)


def render(fdp: descriptor_pb2.FileDescriptorProto) -> str:
    """The .proto text of a file descriptor (raises UnrenderableDescriptor, naming what, for what it cannot keep)."""
    if fdp.syntax == "editions":
        raise UnrenderableDescriptor(f"{fdp.name}: protobuf editions")
    if fdp.extension:
        raise UnrenderableDescriptor(f"{fdp.name}: file-level extensions ({fdp.extension[0].name})")
    syntax = fdp.syntax or "proto2"
    lines = [f'syntax = "{syntax}";']
    if fdp.package:
        lines.append(f"package {fdp.package};")
    public = set(fdp.public_dependency)
    lines += [f'import {"public " if i in public else ""}"{dep}";' for i, dep in enumerate(fdp.dependency)]
    lines += [f"option {name} = {value};" for name, value in _options(fdp.options)]
    for enum in fdp.enum_type:
        lines += _enum(enum, "")
    for message in fdp.message_type:
        lines += _message(message, "", syntax)
    for service in fdp.service:
        lines.append(f"service {service.name} {{")
        for m in service.method:
            lines.append(f"  rpc {m.name} ({'stream ' if m.client_streaming else ''}{m.input_type}) returns "
                         f"({'stream ' if m.server_streaming else ''}{m.output_type});")
        lines.append("}")
    return "\n".join(lines) + "\n"


def _options(options: Message) -> list[tuple[str, str]]:
    """The set standard options with scalar values, as (name, .proto literal)."""
    out = []
    for field, value in options.ListFields():
        if field.type == F.TYPE_MESSAGE:
            continue  # uninterpreted/feature sets: nothing a registry compiles differently without them
        out.append((field.name, _literal(field, value)))
    return out


def _literal(field: FieldDescriptor, value: Any) -> str:
    if field.type == F.TYPE_STRING:
        return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"'
    if field.type == F.TYPE_BOOL:
        return "true" if value else "false"
    if field.type == F.TYPE_ENUM and field.enum_type is not None:  # an enum field always names its type
        return str(field.enum_type.values_by_number[value].name)
    return str(value)


def _enum(enum: descriptor_pb2.EnumDescriptorProto, pad: str) -> list[str]:
    lines = [f"{pad}enum {enum.name} {{"]
    lines += [f"{pad}  option {name} = {value};" for name, value in _options(enum.options)]
    lines += [f"{pad}  {v.name} = {v.number}{_field_options(v.options)};" for v in enum.value]
    lines += _reserved(enum.reserved_range, enum.reserved_name, pad + "  ", inclusive_end=True)
    return [*lines, f"{pad}}}"]


def _message(message: descriptor_pb2.DescriptorProto, pad: str, syntax: str) -> list[str]:
    if message.extension or message.extension_range:
        raise UnrenderableDescriptor(f"message {message.name}: extensions")
    inner = pad + "  "
    maps = {f".{n.name}": n for n in message.nested_type if n.options.map_entry}  # by the name fields use
    lines = [f"{pad}message {message.name} {{"]
    lines += [f"{inner}option {name} = {value};" for name, value in _options(message.options)]
    for enum in message.enum_type:
        lines += _enum(enum, inner)
    for nested in message.nested_type:
        if not nested.options.map_entry:
            lines += _message(nested, inner, syntax)
    real_oneofs = {i for i, f in enumerate(message.field)
                   if f.HasField("oneof_index") and not f.proto3_optional}
    written_oneofs: set[int] = set()
    for i, field in enumerate(message.field):
        if i in real_oneofs:
            index = field.oneof_index
            if index in written_oneofs:
                continue
            written_oneofs.add(index)
            lines.append(f"{inner}oneof {message.oneof_decl[index].name} {{")
            lines += [f"{inner}  {_field(f, maps, syntax, in_oneof=True)}" for j, f in enumerate(message.field)
                      if j in real_oneofs and f.oneof_index == index]
            lines.append(f"{inner}}}")
        else:
            lines.append(f"{inner}{_field(field, maps, syntax)}")
    lines += _reserved(message.reserved_range, message.reserved_name, inner, inclusive_end=False)
    return [*lines, f"{pad}}}"]


def _field(field: descriptor_pb2.FieldDescriptorProto, maps: dict[str, Any], syntax: str,
           in_oneof: bool = False) -> str:
    if field.type == F.TYPE_GROUP:
        raise UnrenderableDescriptor(f"field {field.name}: proto2 groups")
    entry = next((m for name, m in maps.items() if field.type_name.endswith(name)), None)
    if entry is not None and field.label == F.LABEL_REPEATED:
        key, value = entry.field[0], entry.field[1]
        kind = f"map<{_type(key)}, {_type(value)}>"
        label = ""
    else:
        kind = _type(field)
        label = _label(field, syntax, in_oneof)
    options = [] if not field.HasField("default_value") else [
        ("default", f'"{field.default_value}"' if field.type in (F.TYPE_STRING, F.TYPE_BYTES) else field.default_value)]
    if field.options.HasField("packed"):
        options.append(("packed", "true" if field.options.packed else "false"))
    if field.options.deprecated:
        options.append(("deprecated", "true"))
    suffix = f" [{', '.join(f'{k} = {v}' for k, v in options)}]" if options else ""
    return f"{label}{kind} {field.name} = {field.number}{suffix};"


def _label(field: F, syntax: str, in_oneof: bool) -> str:
    if in_oneof:
        return ""
    if field.label == F.LABEL_REPEATED:
        return "repeated "
    if field.label == F.LABEL_REQUIRED:
        return "required "
    if syntax == "proto2" or field.proto3_optional:
        return "optional "
    return ""


def _type(field: F) -> str:
    return _SCALARS.get(field.type) or field.type_name


def _field_options(options: descriptor_pb2.FieldOptions | descriptor_pb2.EnumValueOptions) -> str:
    return " [deprecated = true]" if options.deprecated else ""


ReservedRange = descriptor_pb2.DescriptorProto.ReservedRange | descriptor_pb2.EnumDescriptorProto.EnumReservedRange


def _reserved(ranges: Sequence[ReservedRange], names: Sequence[str], pad: str, inclusive_end: bool) -> list[str]:
    """Message ranges end exclusive in descriptors, enum ranges inclusive; .proto writes both inclusive."""
    lines = []
    if ranges:
        parts = []
        for r in ranges:
            last = r.end if inclusive_end else r.end - 1
            end = "max" if r.end >= _MAX[inclusive_end] else str(last)
            parts.append(str(r.start) if last == r.start else f"{r.start} to {end}")
        lines.append(f"{pad}reserved {', '.join(parts)};")
    if names:
        lines.append(f"{pad}reserved {', '.join(f'{chr(34)}{n}{chr(34)}' for n in names)};")
    return lines
