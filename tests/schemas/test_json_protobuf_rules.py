"""JSON Schema and Protobuf compatibility rules, as the registry checks them (no broker)."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from google.protobuf import descriptor_pb2

from streamkit.schemas.compatibility import check_compatibility, parse_schema


def js(schema: Any) -> Any:
    return parse_schema("JSON", json.dumps(schema), [])


def jcheck(level: str, new: Any, old: Any) -> list[str]:
    return check_compatibility(level, js(new), [(1, js(old))])


def obj(props: dict[str, Any], required: list[str] = (), **extra: Any) -> dict[str, Any]:  # type: ignore[assignment]
    return {"type": "object", "properties": props, "required": list(required), **extra}


def test_json_type_narrowed_and_extended() -> None:
    wide = obj({"n": {"type": "number"}})
    narrow = obj({"n": {"type": "integer"}})
    assert jcheck("BACKWARD", wide, narrow) == []  # every integer is a number
    problems = jcheck("BACKWARD", narrow, wide)
    assert len(problems) == 1 and "/properties/n/type" in problems[0] and "TYPE_NARROWED" in problems[0]
    assert jcheck("BACKWARD", obj({"n": {"type": ["string", "null"]}}), obj({"n": {"type": "string"}})) == []


def test_json_required_property_added() -> None:
    old = obj({"a": {"type": "string"}})
    new = obj({"a": {"type": "string"}, "b": {"type": "string"}}, ["b"], additionalProperties=False)
    problems = jcheck("BACKWARD", new, old)
    assert any("REQUIRED_ATTRIBUTE_ADDED" in p for p in problems)
    with_default = obj({"a": {"type": "string"}, "b": {"type": "string", "default": ""}}, ["b"])
    assert not any("REQUIRED_ATTRIBUTE_ADDED" in p for p in jcheck("BACKWARD", with_default, old))


def test_json_content_models() -> None:
    closed_ab = obj({"a": {"type": "string"}, "b": {"type": "string"}}, additionalProperties=False)
    closed_a = obj({"a": {"type": "string"}}, additionalProperties=False)
    # a reader with a closed model refuses the property the writer had
    problems = jcheck("BACKWARD", closed_a, closed_ab)
    assert len(problems) == 1 and "PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL" in problems[0]
    # adding a property to a closed model is backward compatible (the writer never had it)
    assert jcheck("BACKWARD", closed_ab, closed_a) == []
    # closing an open model is not
    open_a = obj({"a": {"type": "string"}})
    assert any("ADDITIONAL_PROPERTIES_REMOVED" in p for p in jcheck("BACKWARD", closed_a, open_a))
    # a typed property added to an open model may clash with what the writer let through
    assert any("PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL" in p
               for p in jcheck("BACKWARD", obj({"a": {"type": "string"}, "b": {"type": "integer"}}), open_a))


def test_json_enums_and_bounds() -> None:
    assert jcheck("BACKWARD", {"enum": ["a", "b", "c"]}, {"enum": ["a", "b"]}) == []
    assert "ENUM_ARRAY_NARROWED" in jcheck("BACKWARD", {"enum": ["a"]}, {"enum": ["a", "b"]})[0]
    assert "MAX_DECREASED" in jcheck("BACKWARD", {"type": "string", "maxLength": 5},
                                     {"type": "string", "maxLength": 10})[0]
    assert jcheck("BACKWARD", {"type": "string", "maxLength": 10}, {"type": "string", "maxLength": 5}) == []
    assert "MIN_INCREASED" in jcheck("FORWARD", {"type": "array", "items": {"type": "string"}, "minItems": 1},
                                     {"type": "array", "items": {"type": "string"}, "minItems": 2})[0]


def test_json_invalid_schemas_are_refused() -> None:
    for text in ['{"type": "strnig"}', '[1, 2]', "not json", '{"properties": 5}']:
        with pytest.raises(ValueError):
            parse_schema("JSON", text, [])


PROTO_V1 = """
syntax = "proto3";
package shop;
message Order {
  int64 id = 1;
  string customer = 2;
  Item item = 3;
  Status status = 4;
  message Item { string sku = 1; int32 quantity = 2; }
  enum Status { NEW = 0; PAID = 1; }
}
"""


def pb(text: str) -> Any:
    return parse_schema("PROTOBUF", text, [])


def pcheck(level: str, new: str, old: str = PROTO_V1) -> list[str]:
    return check_compatibility(level, pb(new), [(1, pb(old))])


def test_protobuf_adding_and_removing_fields_is_compatible() -> None:
    added = PROTO_V1.replace("Status status = 4;", "Status status = 4;\n  string note = 5;")
    assert pcheck("FULL", added) == []
    removed = PROTO_V1.replace("string customer = 2;", "reserved 2;")
    assert pcheck("FULL", removed) == []


@pytest.mark.parametrize(("change", "ok"), [
    ("int32 quantity = 2;", True),
    ("int64 quantity = 2;", True),       # int32 and int64 share the varint wire type
    ("uint32 quantity = 2;", True),
    ("sint32 quantity = 2;", False),     # zigzag: other numbers
    ("string quantity = 2;", False),
    ("fixed32 quantity = 2;", False),
    ("Status2 quantity = 2; enum Status2 { A = 0; }", False),
])
def test_protobuf_field_number_keeps_a_compatible_type(change: str, ok: bool) -> None:
    new = PROTO_V1.replace("int32 quantity = 2;", change)
    problems = pcheck("BACKWARD", new)
    assert (problems == []) is ok, problems
    if not ok:
        assert ".shop.Order.Item" in problems[0] and "= 2" in problems[0]


def test_protobuf_message_type_changed_and_message_removed() -> None:
    retyped = PROTO_V1.replace("Item item = 3;", "Other item = 3;").replace(
        "enum Status", "message Other { string x = 1; }\n  enum Status")
    assert "FIELD_NAMED_TYPE_CHANGED" in pcheck("BACKWARD", retyped)[0]
    without_item = PROTO_V1.replace("Item item = 3;", "").replace(
        "message Item { string sku = 1; int32 quantity = 2; }", "")
    assert any("MESSAGE_REMOVED" in p for p in pcheck("BACKWARD", without_item))


def test_protobuf_oneof_moves() -> None:
    into_new = PROTO_V1.replace("int64 id = 1;\n  string customer = 2;",
                                "oneof key { int64 id = 1; string customer = 2; }")
    assert "MULTIPLE_FIELDS_MOVED_TO_ONEOF" in pcheck("BACKWARD", into_new)[0]
    one_into_new = PROTO_V1.replace("int64 id = 1;", "oneof key { int64 id = 1; }")
    assert pcheck("BACKWARD", one_into_new) == []


def test_protobuf_required_fields_proto2() -> None:
    v1 = 'syntax = "proto2"; message M { optional string a = 1; }'
    v2 = 'syntax = "proto2"; message M { optional string a = 1; required int32 b = 2; }'
    assert "REQUIRED_FIELD_ADDED" in pcheck("BACKWARD", v2, v1)[0]
    assert "REQUIRED_FIELD_REMOVED" in pcheck("BACKWARD", v1, v2)[0]


def test_protobuf_descriptor_form_is_understood() -> None:
    """confluent-kafka's Python serializer registers a base64 FileDescriptorProto."""
    file = descriptor_pb2.FileDescriptorProto(name="order.proto", package="shop", syntax="proto3")
    message = file.message_type.add(name="Item")
    message.field.add(name="sku", number=1, type=descriptor_pb2.FieldDescriptorProto.TYPE_STRING,
                      label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL)
    message.field.add(name="quantity", number=2, type=descriptor_pb2.FieldDescriptorProto.TYPE_INT32,
                      label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL)
    encoded = base64.standard_b64encode(file.SerializeToString()).decode()
    text = 'syntax = "proto3"; package shop; message Item { string sku = 1; string quantity = 2; }'
    problems = check_compatibility("BACKWARD", pb(text), [(1, pb(encoded))])
    assert len(problems) == 1 and "FIELD_SCALAR_KIND_CHANGED" in problems[0]


def test_protobuf_invalid_schemas_are_refused() -> None:
    for text in ["message {", 'syntax = "proto3";', "hello"]:
        with pytest.raises(ValueError):
            parse_schema("PROTOBUF", text, [])
