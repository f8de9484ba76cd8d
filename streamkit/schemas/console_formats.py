"""Record values in a registry's wire format for ``streamkit produce`` and ``streamkit
consume`` (``--value-format avro|json-schema|protobuf --schema-registry URL``), like
Confluent's kafka-avro-, kafka-json-schema- and kafka-protobuf-console-producer and
-consumer: a produced line is a JSON document, checked and encoded with the schema
(registered under ``{topic}-value``; for Protobuf the file's first message, written with
the message-index array ``[0]``); a consumed record is decoded with the schema its id names
and printed as JSON (Protobuf in its JSON mapping, with the .proto's field names)."""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import io
import struct
from collections.abc import Callable
from typing import Any

import fastavro
import jsonschema
import orjson
from google.protobuf import json_format
from google.protobuf.message import DecodeError

from streamkit.clients.security import command_settings
from streamkit.schemas.client import RegistryClient, RegistryClientError
from streamkit.schemas.protobuf_wire import ProtobufTypes, decode_indexes

__all__ = ["VALUE_FORMATS", "value_decoder", "value_encoder"]

VALUE_FORMATS = {"avro": "AVRO", "json-schema": "JSON", "protobuf": "PROTOBUF"}
_HEADER = struct.Struct(">bI")


def _default(value: Any) -> Any:
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    raise TypeError(f"cannot print {type(value).__name__}")


def value_encoder(url: str, topic: str, value_format: str, schema: str) -> Callable[[bytes], bytes]:
    """Register ``schema`` under ``{topic}-value``; the function that turns a JSON line
    into the record value (ValueError: the line does not fit the schema)."""
    schema_type = VALUE_FORMATS[value_format]
    with RegistryClient(url, settings=command_settings()) as client:
        schema_id = client.register(f"{topic}-value", schema, schema_type)
    header = _HEADER.pack(0, schema_id)
    if schema_type == "PROTOBUF":
        with RegistryClient(url) as client:
            try:
                message_class = ProtobufTypes(client).message_class(schema_id, [0])
            except ValueError as exc:
                raise RegistryClientError(str(exc)) from None

        def encode_protobuf(line: bytes) -> bytes:
            try:
                message = json_format.Parse(line, message_class())
            except json_format.ParseError as exc:
                raise ValueError(f"the value does not match the Protobuf schema: {exc}") from None
            encoded: bytes = message.SerializeToString()
            return header + b"\x00" + encoded

        return encode_protobuf
    if schema_type == "AVRO":
        parsed = fastavro.parse_schema(orjson.loads(schema))

        def encode_avro(line: bytes) -> bytes:
            try:
                datum = orjson.loads(line)
            except orjson.JSONDecodeError as exc:
                raise ValueError(f"not JSON: {exc}") from None
            if not fastavro.validate(datum, parsed, raise_errors=False):
                raise ValueError("the value does not match the Avro schema")
            out = io.BytesIO()
            out.write(header)
            fastavro.schemaless_writer(out, parsed, datum)
            return out.getvalue()

        return encode_avro
    validator = jsonschema.validators.validator_for(orjson.loads(schema))(orjson.loads(schema))

    def encode_json(line: bytes) -> bytes:
        try:
            datum = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            raise ValueError(f"not JSON: {exc}") from None
        error = jsonschema.exceptions.best_match(validator.iter_errors(datum))
        if error is not None:
            raise ValueError(f"the value does not match the JSON Schema: {error.message}")
        return header + orjson.dumps(datum)

    return encode_json


def value_decoder(url: str) -> Callable[[bytes], str]:
    """The function that prints a registry-encoded value as JSON (ValueError: it is not in
    the wire format, or its schema cannot be had)."""
    client = RegistryClient(url, settings=command_settings())
    writers: dict[int, tuple[str, Any]] = {}
    protobuf_types = ProtobufTypes(client)

    def decode(data: bytes) -> str:
        if len(data) < _HEADER.size or data[0] != 0:
            raise ValueError("not in the Schema Registry wire format (magic byte 0, 4-byte schema id)")
        schema_id = _HEADER.unpack_from(data)[1]
        if schema_id not in writers:
            try:
                kind, text = client.by_id(schema_id)
            except RegistryClientError as exc:
                raise ValueError(f"schema {schema_id}: {exc}") from None
            writers[schema_id] = (kind, fastavro.parse_schema(orjson.loads(text)) if kind == "AVRO" else None)
        kind, parsed = writers[schema_id]
        body = memoryview(data)[_HEADER.size:]
        if kind == "AVRO":
            value = fastavro.schemaless_reader(io.BytesIO(body), parsed)
            return orjson.dumps(value, default=_default).decode()
        if kind == "JSON":
            return bytes(body).decode("utf-8", "replace")
        if kind == "PROTOBUF":
            indexes, offset = decode_indexes(body, 0)
            message_class = protobuf_types.message_class(schema_id, indexes)
            try:
                message = message_class.FromString(bytes(body[offset:]))
            except DecodeError as exc:
                raise ValueError(f"not a {message_class.DESCRIPTOR.full_name}: {exc}") from None
            return orjson.dumps(json_format.MessageToDict(message, preserving_proto_field_name=True)).decode()
        raise ValueError(f"schema {schema_id} is {kind}: only Avro, JSON Schema and Protobuf values are printed")

    return decode
