"""Avro's schema resolution rules, as the registry checks them (no broker)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from streamkit.schemas.compatibility import check_compatibility, parse_schema


def avro(schema: Any) -> Any:
    return parse_schema("AVRO", json.dumps(schema), [])


def record(*fields: dict[str, Any], name: str = "User", **extra: Any) -> dict[str, Any]:
    return {"type": "record", "name": name, "namespace": "com.example", "fields": list(fields), **extra}


def check(level: str, new: Any, *old: Any) -> list[str]:
    return check_compatibility(level, avro(new), [(i + 1, avro(s)) for i, s in enumerate(old)])


ID = {"name": "id", "type": "long"}


def test_adding_a_field_needs_a_default_for_backward() -> None:
    problems = check("BACKWARD", record(ID, {"name": "email", "type": "string"}), record(ID))
    assert len(problems) == 1 and "'email'" in problems[0] and "READER_FIELD_MISSING_DEFAULT_VALUE" in problems[0]
    assert check("BACKWARD", record(ID, {"name": "email", "type": "string", "default": ""}), record(ID)) == []


def test_removing_a_field_breaks_forward_unless_it_had_a_default() -> None:
    old = record(ID, {"name": "email", "type": "string"})
    assert check("BACKWARD", record(ID), old) == []
    assert "READER_FIELD_MISSING_DEFAULT_VALUE" in check("FORWARD", record(ID), old)[0]
    old_with_default = record(ID, {"name": "email", "type": "string", "default": ""})
    assert check("FULL", record(ID), old_with_default) == []


@pytest.mark.parametrize(("writer", "reader", "ok"), [
    ("int", "long", True), ("int", "double", True), ("long", "float", True), ("float", "double", True),
    ("string", "bytes", True), ("bytes", "string", True),
    ("long", "int", False), ("double", "float", False), ("string", "int", False), ("boolean", "int", False),
])
def test_primitive_promotions(writer: str, reader: str, ok: bool) -> None:
    problems = check("BACKWARD", record({"name": "v", "type": reader}), record({"name": "v", "type": writer}))
    assert (problems == []) is ok, problems


def test_enum_symbols_added_and_removed() -> None:
    small = {"type": "enum", "name": "Color", "symbols": ["RED", "GREEN"]}
    large = {"type": "enum", "name": "Color", "symbols": ["RED", "GREEN", "BLUE"]}
    assert check("BACKWARD", record({"name": "c", "type": large}), record({"name": "c", "type": small})) == []
    problems = check("FORWARD", record({"name": "c", "type": large}), record({"name": "c", "type": small}))
    assert len(problems) == 1 and "BLUE" in problems[0] and "MISSING_ENUM_SYMBOLS" in problems[0]
    # a reader enum with a default takes symbols it does not know
    small_default = {**small, "default": "RED"}
    assert check("FORWARD", record({"name": "c", "type": large}), record({"name": "c", "type": small_default})) == []


def test_unions() -> None:
    nullable = record({"name": "v", "type": ["null", "string"], "default": None})
    plain = record({"name": "v", "type": "string"})
    # a reader union reads a writer's single type when one branch does
    assert check("BACKWARD", nullable, plain) == []
    # every writer branch must be readable: null is not a string
    problems = check("BACKWARD", plain, nullable)
    assert len(problems) == 1 and "/fields/0/type/0" in problems[0] and "TYPE_MISMATCH" in problems[0]
    # a union widened by a promotable branch
    assert check("BACKWARD", record({"name": "v", "type": ["null", "long"]}),
                 record({"name": "v", "type": ["null", "int"]})) == []


def test_named_types_must_keep_their_name_or_alias_it() -> None:
    renamed = record(ID, name="Person")
    assert "NAME_MISMATCH" in check("BACKWARD", renamed, record(ID))[0]
    assert check("BACKWARD", record(ID, name="Person", aliases=["User"]), record(ID)) == []


def test_field_aliases_match_renamed_fields() -> None:
    assert check("BACKWARD", record({"name": "user_id", "type": "long", "aliases": ["id"]}), record(ID)) == []


def test_fixed_size_and_nested_collections() -> None:
    f4 = {"type": "fixed", "name": "Hash", "size": 4}
    f8 = {"type": "fixed", "name": "Hash", "size": 8}
    assert "FIXED_SIZE_MISMATCH" in check("BACKWARD", record({"name": "h", "type": f8}), record({"name": "h", "type": f4}))[0]
    arr_int = record({"name": "xs", "type": {"type": "map", "values": {"type": "array", "items": "int"}}})
    arr_long = record({"name": "xs", "type": {"type": "map", "values": {"type": "array", "items": "long"}}})
    assert check("BACKWARD", arr_long, arr_int) == []
    assert "/fields/0/type/values/items" in check("FORWARD", arr_long, arr_int)[0]


def test_recursive_schemas_terminate() -> None:
    node = {"type": "record", "name": "Node", "fields": [
        {"name": "value", "type": "int"}, {"name": "next", "type": ["null", "Node"], "default": None}]}
    wider = {"type": "record", "name": "Node", "fields": [
        {"name": "value", "type": "long"}, {"name": "next", "type": ["null", "Node"], "default": None}]}
    assert check("BACKWARD", wider, node) == []
    assert check("FORWARD", wider, node) != []


def test_logical_types_resolve_by_their_underlying_type() -> None:
    date = record({"name": "d", "type": {"type": "int", "logicalType": "date"}})
    ts = record({"name": "d", "type": {"type": "long", "logicalType": "timestamp-millis"}})
    assert check("BACKWARD", ts, date) == []


def test_transitive_levels_check_every_earlier_version() -> None:
    v1 = record(ID)
    v2 = record(ID, {"name": "email", "type": "string", "default": ""})
    v3 = record(ID, {"name": "email", "type": "string"})  # drops the default: v1 data cannot be read
    assert check("BACKWARD", v3, v1, v2) == []
    problems = check("BACKWARD_TRANSITIVE", v3, v1, v2)
    assert len(problems) == 1 and "oldSchemaVersion: 1" in problems[0]
    assert check("NONE", record({"name": "other", "type": "string"}), v1) == []


def test_invalid_schemas_are_refused() -> None:
    for text in ['{"type": "record", "name": "X"}', '{"type": "nope"}', "not json",
                 '{"type": "enum", "name": "E", "symbols": ["a", "a"]}',
                 '{"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}, {"name": "a", "type": "long"}]}',
                 '{"type": "record", "name": "R", "fields": [{"name": "a", "type": "int", "default": "x"}]}']:
        with pytest.raises(ValueError):
            parse_schema("AVRO", text, [])


def test_references_define_named_types() -> None:
    address = json.dumps({"type": "record", "name": "Address", "namespace": "com.example",
                          "fields": [{"name": "city", "type": "string"}]})
    user = json.dumps(record({"name": "home", "type": "com.example.Address"}))
    with pytest.raises(ValueError):
        parse_schema("AVRO", user, [])
    parsed = parse_schema("AVRO", user, [address])
    address2 = address.replace('"string"}]', '"string"}, {"name": "zip", "type": "string"}]')
    newer = parse_schema("AVRO", user, [address2])
    problems = check_compatibility("BACKWARD", newer, [(1, parsed)])
    assert len(problems) == 1 and "'zip'" in problems[0]
