"""Converters against Kafka Connect's documented JSON envelope and behaviour."""

from __future__ import annotations

import datetime as dt
import decimal

import orjson
import pytest

from streamkit.connect.converters import (
    ByteArrayConverter,
    JsonConverter,
    StringConverter,
    make_converter,
)
from streamkit.connect.data import DECIMAL, TIMESTAMP, Field, Schema
from streamkit.connect.errors import ConfigError, DataError
from streamkit.connect.plugins import PluginError

PERSON = Schema("struct", name="person", fields=(
    Field("id", Schema("int32")),
    Field("name", Schema("string", optional=True)),
    Field("photo", Schema("bytes", optional=True)),
))


def json_converter(**settings: str) -> JsonConverter:
    converter = JsonConverter()
    converter.configure(settings, is_key=False)
    return converter


def test_envelope_is_kafka_connects() -> None:
    data = json_converter().from_connect_data("t", PERSON, {"id": 1, "name": "ann", "photo": b"\x01\x02"})
    assert orjson.loads(data) == {
        "schema": {"type": "struct", "optional": False, "name": "person", "fields": [
            {"type": "int32", "optional": False, "field": "id"},
            {"type": "string", "optional": True, "field": "name"},
            {"type": "bytes", "optional": True, "field": "photo"},
        ]},
        "payload": {"id": 1, "name": "ann", "photo": "AQI="},
    }


def test_envelope_round_trip() -> None:
    converter = json_converter()
    value = {"id": 7, "name": None, "photo": b"xyz"}
    schema, back = converter.to_connect_data("t", converter.from_connect_data("t", PERSON, value))
    assert schema == PERSON
    assert back == value


def test_an_envelope_written_by_kafka_connect_reads() -> None:
    raw = (b'{"schema":{"type":"struct","fields":[{"type":"int64","optional":false,"field":"ts",'
           b'"name":"org.apache.kafka.connect.data.Timestamp","version":1},{"type":"array","items":'
           b'{"type":"string","optional":false},"optional":true,"field":"tags"}],"optional":false},'
           b'"payload":{"ts":1483228800000,"tags":["a","b"]}}')
    schema, value = json_converter().to_connect_data("t", raw)
    assert schema is not None and schema.field("ts").schema.name == TIMESTAMP
    assert value == {"ts": 1483228800000, "tags": ["a", "b"]}


def test_decimal_is_base64_of_the_unscaled_value() -> None:
    schema = Schema("bytes", name=DECIMAL, parameters={"scale": "2"})
    converter = json_converter()
    data = converter.from_connect_data("t", schema, decimal.Decimal("1.23"))
    assert orjson.loads(data)["payload"] == "ew=="  # 123 == 0x7b
    assert converter.to_connect_data("t", data)[1] == decimal.Decimal("1.23")
    negative = converter.from_connect_data("t", schema, decimal.Decimal("-1.28"))
    assert converter.to_connect_data("t", negative)[1] == decimal.Decimal("-1.28")
    numeric = json_converter(**{"decimal.format": "NUMERIC"}).from_connect_data("t", schema, decimal.Decimal("1.5"))
    assert orjson.loads(numeric)["payload"] == 1.5


def test_timestamp_from_datetime_is_epoch_millis() -> None:
    schema = Schema("int64", name=TIMESTAMP)
    value = dt.datetime(2017, 1, 1, 0, 0, 0, 5000, tzinfo=dt.UTC)
    assert orjson.loads(json_converter().from_connect_data("t", schema, value))["payload"] == 1483228800005


def test_schemaless_json() -> None:
    converter = json_converter(**{"schemas.enable": "false"})
    assert converter.from_connect_data("t", None, {"a": [1, 2], "b": None}) == b'{"a":[1,2],"b":null}'
    assert converter.to_connect_data("t", b'{"a": 1}') == (None, {"a": 1})


def test_schemaless_value_with_schemas_enabled_has_a_null_schema() -> None:
    assert orjson.loads(json_converter().from_connect_data("t", None, {"a": 1})) == {"schema": None, "payload": {"a": 1}}


def test_plain_json_with_schemas_enabled_is_a_data_error() -> None:
    with pytest.raises(DataError, match=r"schemas\.enable=false"):
        json_converter().to_connect_data("t", b'{"a": 1}')
    with pytest.raises(DataError, match="serialization error"):
        json_converter().to_connect_data("t", b"not json")


def test_null_is_a_tombstone_both_ways() -> None:
    for converter in (json_converter(), json_converter(**{"schemas.enable": "false"})):
        assert converter.from_connect_data("t", None, None) is None
        assert converter.to_connect_data("t", None) == (None, None)


def test_value_that_does_not_match_its_schema() -> None:
    with pytest.raises(DataError):
        json_converter().from_connect_data("t", Schema("int32"), "seven")
    with pytest.raises(DataError, match="required"):
        json_converter().from_connect_data("t", PERSON, {"name": "no id"})


def test_string_converter() -> None:
    converter = StringConverter()
    converter.configure({}, is_key=True)
    assert converter.from_connect_data("t", None, True) == b"true"
    assert converter.from_connect_data("t", None, 42) == b"42"
    assert converter.from_connect_data("t", None, None) is None
    schema, value = converter.to_connect_data("t", "héllo".encode())
    assert (schema.type, schema.optional, value) == ("string", True, "héllo")
    latin = StringConverter()
    latin.configure({"converter.encoding": "latin-1"}, is_key=False)
    assert latin.from_connect_data("t", None, "é") == b"\xe9"


def test_byte_array_converter() -> None:
    converter = ByteArrayConverter()
    assert converter.from_connect_data("t", Schema("bytes"), b"\x00\xff") == b"\x00\xff"
    assert converter.to_connect_data("t", b"\x01")[1] == b"\x01"
    with pytest.raises(DataError):
        converter.from_connect_data("t", None, "text")
    with pytest.raises(DataError):
        converter.from_connect_data("t", Schema("string"), b"x")


@pytest.mark.parametrize(("name", "cls"), [
    ("org.apache.kafka.connect.json.JsonConverter", JsonConverter),
    ("org.apache.kafka.connect.storage.StringConverter", StringConverter),
    ("org.apache.kafka.connect.converters.ByteArrayConverter", ByteArrayConverter),
    ("streamkit.connect.converters.JsonConverter", JsonConverter),
    ("StringConverter", StringConverter),
])
def test_converters_by_apache_class_name(name: str, cls: type) -> None:
    assert isinstance(make_converter(name, {}, is_key=False), cls)


def test_bad_converter_settings() -> None:
    with pytest.raises(PluginError, match="could not be found"):
        make_converter("com.example.NoSuchConverter", {}, is_key=False)
    with pytest.raises(ConfigError) as info:
        make_converter("org.apache.kafka.connect.json.JsonConverter", {"schemas.enable": "maybe"}, is_key=False)
    assert "schemas.enable" in info.value.problems
