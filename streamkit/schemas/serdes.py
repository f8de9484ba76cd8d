"""Registry-backed serdes for apps: values (and keys) in Confluent's wire format, a magic
byte 0 and the schema id as 4 bytes big-endian before the encoded record, so producers and
consumers in other languages read and write the same topics.

``AvroSerde(Model, "http://registry:8081")`` maps a pydantic model to an Avro record on its
own (``avro_schema_for``). Before the app processes anything it registers that schema under
the ``TopicNameStrategy`` subject (``{topic}-value`` / ``{topic}-key``); a schema that breaks
the subject's compatibility refuses the start, with the registry's reason (it names the
field). Records written with other schema versions decode into the model by Avro schema
resolution (the writer's schema, fetched by id, read as the model's).
``JsonSchemaSerde(Model, url)`` does the same with the model's JSON Schema.

Pass one as a topic's ``value_type`` or ``key_type``: ``app.topic("users",
value_type=AvroSerde(User, url))``, or a table's: ``app.Table("users", value_type=...)``;
the worker calls ``prepare(topic, is_key)`` at start for each topic the serde writes: the
topic, the repartition topic of a stream re-keyed from it, a table's changelog (under the
subject ``{changelog topic}-value``), so internal topics carry the same wire format as the
app's own and any registry-aware client reads them.
"""

from __future__ import annotations

import abc
import datetime
import enum
import io
import struct
import threading
import types
import typing
from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import Any, Union

import fastavro
import fastavro._read
import httpx
import orjson
from pydantic import BaseModel

from streamkit.schemas.avro_reader import compile_reader

__all__ = ["AvroSerde", "JsonSchemaSerde", "RegistrySerde", "SchemaRegistrationError", "avro_schema_for"]

_HEADER = struct.Struct(">bI")
_MAGIC = 0
# fastavro's compiled reader of one datum: what schemaless_reader calls after parsing both
# schemas again (a third of its time on a small record). Private, so the batch path falls
# back to ``loads`` if it is missing or fails.
_READ_DATUM: Callable[..., Any] | None = getattr(fastavro._read, "_read_data", None)
_READ_OPTIONS = {"return_record_name": False, "return_record_name_override": False, "handle_unicode_errors": "strict",
                 "return_named_type": False, "return_named_type_override": False}


class SchemaRegistrationError(RuntimeError):
    """The registry refused an app's schema (incompatible, invalid) or could not be asked."""


def _avro_type(annotation: Any, names: set[str], namespace: str) -> Any:
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin in (Union, types.UnionType):
        branches = [_avro_type(a, names, namespace) for a in args if a is not type(None)]
        return ["null", *branches] if type(None) in args else branches
    if origin in (list, tuple, set, frozenset):
        return {"type": "array", "items": _avro_type(args[0] if args else str, names, namespace)}
    if origin is dict:
        return {"type": "map", "values": _avro_type(args[1] if len(args) > 1 else str, names, namespace)}
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return _record(annotation, names, namespace)
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        if annotation.__name__ in names:
            return annotation.__name__
        names.add(annotation.__name__)
        return {"type": "enum", "name": annotation.__name__, "symbols": [str(m.value) for m in annotation]}
    simple = {bool: "boolean", int: "long", float: "double", str: "string", bytes: "bytes"}
    if annotation in simple:
        return simple[annotation]
    if annotation is datetime.datetime:
        return {"type": "long", "logicalType": "timestamp-millis"}
    if annotation is datetime.date:
        return {"type": "int", "logicalType": "date"}
    if annotation is Decimal:
        return "string"
    raise TypeError(f"no Avro type for {annotation!r}")


def _record(model: type[BaseModel], names: set[str], namespace: str) -> Any:
    if model.__name__ in names:
        return model.__name__
    names.add(model.__name__)
    fields = []
    for name, info in model.model_fields.items():
        field: dict[str, Any] = {"name": name, "type": _avro_type(info.annotation, names, namespace)}
        if not info.is_required():
            default = info.get_default(call_default_factory=True)
            if isinstance(default, enum.Enum):
                default = default.value
            if default is None and isinstance(field["type"], list) and field["type"][0] != "null":
                field["type"] = ["null", *field["type"]]
            field["default"] = default
        fields.append(field)
    return {"type": "record", "name": model.__name__, "namespace": namespace, "fields": fields}


def avro_schema_for(model: type[BaseModel], namespace: str | None = None) -> dict[str, Any]:
    """The Avro record for a pydantic model: ``int`` is long, ``float`` double, optional
    fields are unions with null, fields with defaults keep them (so adding one stays
    BACKWARD compatible), nested models are records, enums Avro enums, ``datetime`` a
    timestamp-millis long and ``date`` a date int."""
    return dict(_record(model, set(), namespace or model.__module__.replace("_", "")))


class RegistrySerde(abc.ABC):
    """What the registry serdes share: registration under the subject at start, the
    wire-format header, and the registry's answers."""

    schema_type = ""

    def __init__(self, name: str, registry_url: str, *, subject: str | None = None,
                 auto_register: bool = True, config: Mapping[str, str] | None = None) -> None:
        from streamkit.schemas.client import RegistryClientError, registry_options

        self.name = name
        self.registry_url = registry_url.rstrip("/")
        # Confluent's client settings of a secured registry: basic.auth.user.info,
        # schema.registry.ssl.ca.location
        try:
            self._http_options = registry_options(config or {})
        except RegistryClientError as exc:
            raise SchemaRegistrationError(str(exc)) from None
        self.subject = subject
        # every subject the schema is registered under: one serde may write several topics
        # (a topic, the repartition topic of a stream read from it, a table's changelog)
        self.subjects: list[str] = []
        self.auto_register = auto_register
        self.schema_id: int | None = None
        self._lock = threading.Lock()
        self._writers: dict[int, Any] = {}

    @abc.abstractmethod
    def schema_text(self) -> str:
        """The schema registered for the model, in this format."""

    def registration(self) -> dict[str, Any]:
        """The body registered (or looked up) under the subject."""
        return {"schema": self.schema_text(), "schemaType": self.schema_type}

    def _http(self, method: str, path: str, body: Any = None) -> Any:
        try:
            with httpx.Client(timeout=30, **self._http_options) as client:
                response = client.request(method, self.registry_url + path, json=body)
        except httpx.HTTPError as exc:
            raise SchemaRegistrationError(f"cannot reach the schema registry at {self.registry_url}: {exc}") from None
        payload = response.json() if response.content else None
        if response.status_code >= 400:
            message = payload.get("message") if isinstance(payload, dict) else response.text
            raise SchemaRegistrationError(f"schema registry: {message}")
        return payload

    def prepare(self, topic: str, is_key: bool) -> None:
        """Register (or, with ``auto_register=False``, look up) the schema under the topic's
        subject; raises SchemaRegistrationError when the registry refuses it."""
        subject = self.subject or f"{topic}-{'key' if is_key else 'value'}"
        try:
            body = self.registration()
        except SchemaRegistrationError as exc:
            raise SchemaRegistrationError(f"{self.name} cannot be used for subject {subject}: {exc}") from None
        path = f"/subjects/{subject}/versions" if self.auto_register else f"/subjects/{subject}"
        try:
            answer = self._http("POST", path, body)
        except SchemaRegistrationError as exc:
            raise SchemaRegistrationError(f"{self.name} cannot be used for subject {subject}: "
                                          f"{str(exc).removeprefix('schema registry: ')}") from None
        with self._lock:
            self.subjects.append(subject)
            self.schema_id = int(answer["id"])

    def _header(self) -> bytes:
        if self.schema_id is None:
            raise SchemaRegistrationError(f"{type(self).__name__}({self.name}) is not registered yet: "
                                          "use it as a topic's value_type (the worker prepares it) or call "
                                          "prepare(topic, is_key)")
        return _HEADER.pack(_MAGIC, self.schema_id)

    @staticmethod
    def _split(data: bytes) -> tuple[int, memoryview]:
        if len(data) < _HEADER.size or data[0] != _MAGIC:
            raise ValueError("not in the Schema Registry wire format (magic byte 0, 4-byte schema id)")
        return _HEADER.unpack_from(data)[1], memoryview(data)[_HEADER.size:]


class AvroSerde(RegistrySerde):
    schema_type = "AVRO"

    def __init__(self, model: type[BaseModel], registry_url: str, *, subject: str | None = None,
                 auto_register: bool = True, config: Mapping[str, str] | None = None) -> None:
        super().__init__(model.__name__, registry_url, subject=subject, auto_register=auto_register, config=config)
        self.model = model
        self.schema = avro_schema_for(model)
        self._parsed = fastavro.parse_schema(self.schema)
        # model_dump's values go to fastavro as they are, unless an enum or a Decimal needs
        # its Avro form
        self._convert = _needs_conversion(model, set())
        self._build: Callable[[Any], Any] = _trusted_constructor(model) or model.model_validate
        self._batch_loads: tuple[int | None, Callable[[bytes], Any]] | None = None
        self._compiled: tuple[int | None, Callable[[bytes], Any] | None] | None = None

    def schema_text(self) -> str:
        return orjson.dumps(self.schema).decode()

    def dumps(self, obj: Any) -> bytes:
        header = self._header()
        record = obj if isinstance(obj, self.model) else self.model.model_validate(obj)
        out = io.BytesIO()
        out.write(header)
        values = record.model_dump()
        fastavro.schemaless_writer(out, self._parsed, _avro_values(values) if self._convert else values)
        return out.getvalue()

    def loads(self, data: bytes) -> Any:
        reader = self._reader()
        if reader is not None and data[:_HEADER.size] == self._header():  # the model's own schema
            try:
                return reader(data)
            except Exception:  # fastavro decides: its value or its error
                pass
        return self._resolve(data)

    def _resolve(self, data: bytes) -> Any:
        schema_id, body = self._split(data)
        if schema_id == self.schema_id:  # written with the model's own schema: nothing to resolve
            return self._build(fastavro.schemaless_reader(io.BytesIO(body), self._parsed, None))
        writer = self._writers.get(schema_id)
        if writer is None:
            text = self._http("GET", f"/schemas/ids/{schema_id}")["schema"]
            writer = fastavro.parse_schema(orjson.loads(text))
            self._writers[schema_id] = writer
        value = fastavro.schemaless_reader(io.BytesIO(body), writer, self._parsed)
        return self.model.model_validate(value)

    def _reader(self) -> Callable[[bytes], Any] | None:
        """The generated reader of records in the model's own schema (``avro_reader``), for
        the current schema id; None before registration or for a schema it does not cover."""
        cached = self._compiled
        if cached is not None and cached[0] == self.schema_id:
            return cached[1]
        if self.schema_id is None:
            return None
        reader = compile_reader(self.schema, self._build, prefix=self._header(), otherwise=self._resolve)
        self._compiled = (self.schema_id, reader)
        return reader

    def batch_loads(self) -> Callable[[bytes], Any]:
        """``loads`` for decoding a fetch batch in one loop (``codecs.raw_loads``): a record
        written with the model's own schema is checked by its 5-byte header and read with
        no resolution: by the reader generated for the schema (``avro_reader``) when it is a
        record of primitive fields, otherwise by fastavro's compiled datum reader; a flat
        model of plain fields is built from the dict without validating it again (Avro's
        types are the fields' types). Any other record goes through ``loads``. It may raise
        anything on bad input; the caller then decodes that record with ``loads`` again,
        under the error policy."""
        cached = self._batch_loads
        if cached is not None and cached[0] == self.schema_id:
            return cached[1]
        if self.schema_id is None:
            return self.loads
        compiled = self._reader()
        if compiled is not None:
            self._batch_loads = (self.schema_id, compiled)
            return compiled
        header, size, build, loads, buffer = self._header(), _HEADER.size, self._build, self.loads, io.BytesIO
        read = _READ_DATUM
        if read is None:
            return self.loads
        named: dict[str, dict[str, Any]] = {"writer": {}, "reader": {}}
        parsed = fastavro.parse_schema(self.schema, named["writer"])

        def batch_loads(data: bytes) -> Any:
            if data[:size] != header:  # another schema version (or not the wire format)
                return loads(data)
            body = buffer(data)
            body.seek(size)
            return build(read(body, parsed, named, None, _READ_OPTIONS))

        self._batch_loads = (self.schema_id, batch_loads)
        return batch_loads


_PLAIN_TYPES = (str, int, float, bool, bytes)
# model_config keys that change nothing about how a dict of exactly the fields validates
_NEUTRAL_CONFIG = {"title", "frozen", "strict", "validate_assignment", "protected_namespaces", "json_schema_extra",
                   "populate_by_name", "from_attributes", "arbitrary_types_allowed", "use_attribute_docstrings",
                   "revalidate_instances", "ser_json_timedelta", "ser_json_bytes", "ser_json_inf_nan"}


def _trusted_constructor(model: type[BaseModel]) -> Callable[[dict[str, Any]], BaseModel] | None:
    """For a model whose fields are all plain types (str, int, float, bool, bytes, or
    optional ones), with no validators, constraints, aliases, private attributes or
    post-init: a builder of the model from fastavro's dict of its own schema that skips
    validation, which could change nothing, giving the same instance ``model_validate``
    would. None for any other model, which is validated."""
    decorators = model.__pydantic_decorators__
    if (decorators.validators or decorators.field_validators or decorators.root_validators
            or decorators.model_validators or model.__private_attributes__
            or model.__pydantic_post_init__ is not None
            or model.model_config.get("extra") == "allow"
            or set(model.model_config) - _NEUTRAL_CONFIG - {"extra"}):
        return None
    for info in model.model_fields.values():
        if info.metadata or info.alias is not None or info.validation_alias is not None or info.discriminator:
            return None
        annotation = info.annotation
        args = typing.get_args(annotation)
        if typing.get_origin(annotation) in (Union, types.UnionType) and len(args) == 2 and type(None) in args:
            annotation = next(a for a in args if a is not type(None))
        if annotation not in _PLAIN_TYPES:
            return None
    fields = frozenset(model.model_fields)
    new, set_attribute = model.__new__, object.__setattr__
    # BaseModel's slots, set through their descriptors (cheaper than a setattr by name)
    set_fields, set_extra, set_private = (vars(BaseModel)[name].__set__ for name in
                                          ("__pydantic_fields_set__", "__pydantic_extra__", "__pydantic_private__"))

    def build(values: dict[str, Any]) -> BaseModel:
        # what model_validate leaves on an instance: the values, every field set (the
        # record has them all), no extra and no private values
        instance = new(model)
        set_attribute(instance, "__dict__", values)
        set_fields(instance, set(fields))
        set_extra(instance, None)
        set_private(instance, None)
        return instance

    return build


def _needs_conversion(annotation: Any, seen: set[Any]) -> bool:
    if annotation in seen:
        return False
    seen.add(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return any(_needs_conversion(f.annotation, seen) for f in annotation.model_fields.values())
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum | Decimal):
        return True
    return any(_needs_conversion(a, seen) for a in typing.get_args(annotation))


def _avro_values(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _avro_values(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_avro_values(v) for v in value]
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, Decimal):
        return str(value)
    return value


class JsonSchemaSerde(RegistrySerde):
    schema_type = "JSON"

    def __init__(self, model: type[BaseModel], registry_url: str, *, subject: str | None = None,
                 auto_register: bool = True, config: Mapping[str, str] | None = None) -> None:
        super().__init__(model.__name__, registry_url, subject=subject, auto_register=auto_register, config=config)
        self.model = model

    def schema_text(self) -> str:
        return orjson.dumps(self.model.model_json_schema()).decode()

    def dumps(self, obj: Any) -> bytes:
        header = self._header()
        record = obj if isinstance(obj, self.model) else self.model.model_validate(obj)
        return header + record.model_dump_json().encode()

    def loads(self, data: bytes) -> Any:
        _, body = self._split(data)
        return self.model.model_validate_json(bytes(body))
