"""Confluent's ``io.confluent.connect.avro.AvroConverter``: Connect data as Avro in the
Schema Registry's wire format (magic byte 0, 4-byte schema id), its schema registered under
``{topic}-value`` / ``{topic}-key`` (TopicNameStrategy) at ``schema.registry.url``.

Connect schemas map to Avro as Confluent's ``AvroData`` maps them: structs are records
(``ConnectDefault`` when unnamed), int8/int16 are Avro ints tagged ``connect.type``,
optional schemas are unions with null and a null default, string-keyed maps are Avro maps,
and the logical types Decimal, Date, Time and Timestamp are Avro's decimal, date, time-millis
and timestamp-millis. Reading goes back by the writer's schema (fetched by id), with Date,
Time and Timestamp values as the integers the JsonConverter gives.
"""

from __future__ import annotations

import datetime as dt
import decimal
import io
from collections.abc import Mapping
from typing import Any

import fastavro
import orjson

from streamkit.connect.data import DATE, DECIMAL, TIME, TIMESTAMP, Field, Schema
from streamkit.connect.errors import DataError
from streamkit.connect.registry_converter import HEADER_LEN, RegistryConverterBase

__all__ = ["AvroConverter", "avro_to_connect", "connect_to_avro"]

_PRIMITIVES = {"int32": "int", "int64": "long", "float32": "float", "float64": "double", "boolean": "boolean",
               "string": "string", "bytes": "bytes"}
_LOGICAL = {DATE: ("int", "date"), TIME: ("int", "time-millis"), TIMESTAMP: ("long", "timestamp-millis")}
_DEFAULT_NAMESPACE = "io.confluent.connect.avro"
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def connect_to_avro(schema: Schema) -> Any:
    """The Avro schema for a Connect schema (JSON-able)."""
    return _to_avro(schema, [0])


def _to_avro(schema: Schema, counter: list[int]) -> Any:
    avro = _to_avro_required(schema, counter)
    return ["null", avro] if schema.optional else avro


def _to_avro_required(schema: Schema, counter: list[int]) -> Any:
    if schema.name == DECIMAL:
        params = dict(schema.parameters or {})
        scale = int(params.get("scale", "0"))
        precision = int(params.get("connect.decimal.precision", "64"))
        return {"type": "bytes", "logicalType": "decimal", "precision": precision, "scale": scale,
                "connect.version": 1, "connect.parameters": params, "connect.name": DECIMAL}
    if schema.name in _LOGICAL:
        base, logical = _LOGICAL[schema.name]
        return {"type": base, "logicalType": logical, "connect.version": 1, "connect.name": schema.name}
    kind = schema.type
    if kind in ("int8", "int16"):
        return {"type": "int", "connect.type": kind}
    if kind in _PRIMITIVES:
        return _PRIMITIVES[kind]
    if kind == "array":
        assert schema.items is not None
        return {"type": "array", "items": _to_avro(schema.items, counter)}
    if kind == "map":
        assert schema.keys is not None and schema.values is not None
        if schema.keys.type != "string":
            raise DataError(f"AvroConverter writes maps with string keys only, not {schema.keys.type}")
        return {"type": "map", "values": _to_avro(schema.values, counter)}
    if kind == "struct":
        counter[0] += 1
        if schema.name:
            namespace, _, name = schema.name.rpartition(".")
        else:
            namespace, name = _DEFAULT_NAMESPACE, "ConnectDefault" + ("" if counter[0] == 1 else str(counter[0]))
        fields = []
        for f in schema.fields:
            entry: dict[str, Any] = {"name": f.name, "type": _to_avro(f.schema, counter)}
            if f.schema.optional:
                entry["default"] = None
            fields.append(entry)
        record: dict[str, Any] = {"type": "record", "name": name, "fields": fields}
        if namespace:
            record["namespace"] = namespace
        return record
    raise DataError(f"AvroConverter cannot write Connect type {kind}")


def avro_to_connect(avro: Any, names: dict[str, Any] | None = None) -> Schema:
    """The Connect schema for an Avro schema (JSON form)."""
    names = {} if names is None else names
    if isinstance(avro, list):
        branches = [b for b in avro if b != "null"]
        if len(branches) != 1:
            raise DataError("AvroConverter reads unions of null and one type only")
        return avro_to_connect(branches[0], names).as_optional()
    if isinstance(avro, str):
        if avro in names:
            named: Schema = names[avro]
            return named
        avro = {"type": avro}
    kind = avro["type"]
    if isinstance(kind, (dict, list)):
        return avro_to_connect(kind, names)
    logical = avro.get("logicalType")
    if logical == "decimal":
        params = {"scale": str(avro.get("scale", 0)), "connect.decimal.precision": str(avro.get("precision", 64))}
        return Schema("bytes", name=DECIMAL, version=1, parameters=params)
    for connect_name, (base, logical_name) in _LOGICAL.items():
        if logical == logical_name and kind == base:
            return Schema("int64" if base == "long" else "int32", name=connect_name, version=1)
    if kind == "int":
        return Schema(avro.get("connect.type", "int32"))
    simple = {"long": "int64", "float": "float32", "double": "float64", "boolean": "boolean", "string": "string",
              "bytes": "bytes", "enum": "string", "fixed": "bytes"}
    if kind in simple:
        return Schema(simple[kind])  # type: ignore[arg-type]
    if kind == "array":
        return Schema("array", items=avro_to_connect(avro["items"], names))
    if kind == "map":
        return Schema("map", keys=Schema("string"), values=avro_to_connect(avro["values"], names))
    if kind == "record":
        full = f"{avro['namespace']}.{avro['name']}" if avro.get("namespace") else avro["name"]
        fields = tuple(Field(f["name"], avro_to_connect(f["type"], names)) for f in avro["fields"])
        name = None if full.startswith(f"{_DEFAULT_NAMESPACE}.ConnectDefault") else full
        result = Schema("struct", name=name, fields=fields)
        names[full] = result
        names[avro["name"]] = result
        return result
    raise DataError(f"AvroConverter cannot read Avro type {kind}")


def _to_avro_value(schema: Schema, value: Any) -> Any:
    if value is None:
        return None
    if schema.name == DECIMAL:
        return value if isinstance(value, decimal.Decimal) else decimal.Decimal(str(value))
    if schema.type == "struct":
        if not isinstance(value, Mapping):
            raise DataError(f"Invalid type for STRUCT: {type(value).__name__}")
        return {f.name: _to_avro_value(f.schema, value.get(f.name)) for f in schema.fields}
    if schema.type == "array" and schema.items is not None:
        return [_to_avro_value(schema.items, v) for v in value]
    if schema.type == "map" and schema.values is not None:
        return {k: _to_avro_value(schema.values, v) for k, v in value.items()}
    return value


def _from_avro_value(schema: Schema, value: Any) -> Any:
    if value is None:
        return None
    if schema.name == TIMESTAMP and isinstance(value, dt.datetime):
        aware = value if value.tzinfo else value.replace(tzinfo=dt.UTC)
        return (aware - _EPOCH) // dt.timedelta(milliseconds=1)
    if schema.name == DATE and isinstance(value, dt.date):
        return (value - dt.date(1970, 1, 1)).days
    if schema.name == TIME and isinstance(value, dt.time):
        return ((value.hour * 60 + value.minute) * 60 + value.second) * 1000 + value.microsecond // 1000
    if schema.type == "struct":
        return {f.name: _from_avro_value(f.schema, value.get(f.name)) for f in schema.fields}
    if schema.type == "array" and schema.items is not None:
        return [_from_avro_value(schema.items, v) for v in value]
    if schema.type == "map" and schema.values is not None:
        return {k: _from_avro_value(schema.values, v) for k, v in value.items()}
    return value


class AvroConverter(RegistryConverterBase):
    schema_type = "AVRO"
    format_name = "Avro"

    def __init__(self) -> None:
        super().__init__()
        self._writers: dict[int, tuple[Schema, str, Any]] = {}
        self._readers: dict[int, tuple[Schema, Any]] = {}

    def from_connect_data(self, topic: str, schema: Schema | None, value: Any) -> bytes | None:
        if value is None and (schema is None or schema.optional):
            return None
        if schema is None:
            raise DataError("AvroConverter needs a schema: this record's value has none")
        # a source hands over the same Schema object record after record (Schemas with
        # parameters do not hash): cached by identity, the object kept so the id stays its own
        cached = self._writers.get(id(schema))
        if cached is None or cached[0] is not schema:
            avro = connect_to_avro(schema)
            if len(self._writers) > 1000:
                self._writers.clear()
            cached = (schema, orjson.dumps(avro).decode(), fastavro.parse_schema(avro))
            self._writers[id(schema)] = cached
        _, text, parsed = cached
        out = io.BytesIO()
        out.write(self.header(topic, text))
        try:
            fastavro.schemaless_writer(out, parsed, _to_avro_value(schema, value))
        except (ValueError, TypeError, AttributeError) as exc:
            raise DataError(f"Failed to serialize Avro data from topic {topic}: {exc}") from None
        return out.getvalue()

    def to_connect_data(self, topic: str, data: bytes | None) -> tuple[Schema | None, Any]:
        if data is None:
            return None, None
        schema_id = int.from_bytes(data[1:HEADER_LEN], "big") if len(data) >= HEADER_LEN and data[0] == 0 else -1
        found = self._readers.get(schema_id)
        if found is None:
            schema_id, text = self.writer_schema(topic, data)
            avro = orjson.loads(text)
            found = (avro_to_connect(avro), fastavro.parse_schema(avro))
            self._readers[schema_id] = found
        schema, parsed = found
        try:
            value = fastavro.schemaless_reader(io.BytesIO(memoryview(data)[HEADER_LEN:]), parsed)
        except (ValueError, EOFError, IndexError) as exc:
            raise DataError(f"Failed to deserialize data for topic {topic} to Avro: {exc}") from None
        return schema, _from_avro_value(schema, value)
