"""Single message transforms and predicates, with Kafka Connect's class names, keys and behaviour.

Each transform is built from its config map (the keys after ``transforms.<alias>.``) and
maps a record to a record, or to None to drop it. ``$Key``/``$Value`` variants work on the
record's key or value. Records without a schema must hold a dict (Kafka's Map) where a
transform needs fields; records with a struct schema get a new schema as Kafka builds it.
A tombstone (null value) passes the field transforms unchanged, as in Kafka.

A transform with ``predicate`` (and ``negate``) runs only on the records the predicate
matches (or does not); ``Filter`` drops what it runs on, so with a predicate it filters.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any, ClassVar, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator
from pydantic import Field as PField

from streamkit.connect.data import TIMESTAMP, Field, Schema, SinkRecord, SourceRecord
from streamkit.connect.errors import ConfigError, DataError
from streamkit.connect.plugins import PluginError, import_class

__all__ = [
    "PREDICATES",
    "TRANSFORMS",
    "Cast",
    "DropHeaders",
    "ExtractField",
    "Filter",
    "Flatten",
    "HasHeaderKey",
    "HoistField",
    "InsertField",
    "InsertHeader",
    "MaskField",
    "RecordIsTombstone",
    "RegexRouter",
    "ReplaceField",
    "TimestampRouter",
    "TopicNameMatches",
    "TransformChain",
    "ValueToKey",
    "config_problems",
    "predicate_class",
    "transform_class",
]

R = TypeVar("R", SourceRecord, SinkRecord)
Record = SourceRecord | SinkRecord


class _Config(BaseModel):
    model_config = ConfigDict(populate_by_name=True, extra="ignore", frozen=True)


def _csv(value: Any) -> Any:
    if isinstance(value, str):
        return [part.strip() for part in value.split(",") if part.strip()]
    return value


_KAFKA_TYPES = {"int_parsing": "Not a number of type INT", "int_type": "Not a number of type INT",
                "float_parsing": "Not a number of type DOUBLE", "bool_parsing": "Expected value to be either true or false",
                "bool_type": "Expected value to be either true or false"}


def _kafka_message(key: str, error: Any) -> str:
    """Kafka's ConfigException wording for a pydantic error."""
    kind = error["type"]
    if kind == "missing":
        return f'Missing required configuration "{key}" which has no default value.'
    given = error.get("input")
    ctx = error.get("ctx") or {}
    if kind in _KAFKA_TYPES:
        reason = _KAFKA_TYPES[kind]
    elif kind in ("greater_than_equal", "greater_than"):
        reason = f"Value must be at least {ctx.get('ge', ctx.get('gt'))}"
    elif kind in ("less_than_equal", "less_than"):
        reason = f"Value must be no more than {ctx.get('le', ctx.get('lt'))}"
    elif kind == "literal_error":
        reason = f"String must be one of: {str(ctx.get('expected', '')).replace(' or ', ', ').replace(chr(39), '')}"
    else:
        reason = str(error["msg"]).removeprefix("Value error, ")
    return f"Invalid value {given} for configuration {key}: {reason}"


def config_problems(exc: ValidationError) -> dict[str, list[str]]:
    """A pydantic error as Kafka-style problems per key (the alias, e.g. ``static.field``)."""
    problems: dict[str, list[str]] = {}
    for error in exc.errors():
        key = ".".join(str(p) for p in error["loc"])
        if key:
            problems.setdefault(key, []).append(_kafka_message(key, error))
            continue
        # A rule over several keys (a model validator) names the key at fault first.
        message = str(error["msg"]).removeprefix("Value error, ")
        named, sep, rest = message.partition(": ")
        if sep and named and " " not in named:
            problems.setdefault(named, []).append(rest)
        else:
            problems.setdefault("config", []).append(message)
    return problems


def _parse(model: type[BaseModel], configs: Mapping[str, Any]) -> Any:
    try:
        return model.model_validate(dict(configs))
    except ValidationError as exc:
        raise ConfigError(config_problems(exc)) from None


def _struct_like(schema: Schema, fields: tuple[Field, ...]) -> Schema:
    return Schema("struct", optional=schema.optional, name=schema.name, version=schema.version,
                  doc=schema.doc, fields=fields)


class _Side:
    """The key or the value of a record, for the ``$Key``/``$Value`` variants."""

    def __init__(self, side: Literal["key", "value"]) -> None:
        self.side = side

    def get(self, record: Record) -> tuple[Schema | None, Any]:
        if self.side == "key":
            return record.key_schema, record.key
        return record.value_schema, record.value

    def set(self, record: R, schema: Schema | None, value: Any) -> R:
        if self.side == "key":
            return record.with_(key_schema=schema, key=value)
        return record.with_(value_schema=schema, value=value)


def _require_map(value: Any, purpose: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise DataError(f"Only Map objects supported in absence of schema for [{purpose}], "
                        f"found: {type(value).__name__}")
    return value


def _require_struct(schema: Schema, purpose: str) -> None:
    if schema.type != "struct":
        raise DataError(f"Only Struct objects supported for [{purpose}], found: {schema.type.upper()}")


# -- InsertField ---------------------------------------------------------------------------


class _InsertFieldConfig(_Config):
    topic_field: str | None = PField(None, alias="topic.field")
    partition_field: str | None = PField(None, alias="partition.field")
    offset_field: str | None = PField(None, alias="offset.field")
    timestamp_field: str | None = PField(None, alias="timestamp.field")
    static_field: str | None = PField(None, alias="static.field")
    static_value: str | None = PField(None, alias="static.value")


def _field_spec(spec: str | None) -> tuple[str, bool] | None:
    """``name`` or ``name?`` is optional, ``name!`` required (Kafka's InsertField syntax)."""
    if not spec:
        return None
    if spec.endswith("!"):
        return spec[:-1], False
    if spec.endswith("?"):
        return spec[:-1], True
    return spec, True


class InsertField:
    config_model: ClassVar[type[BaseModel]] = _InsertFieldConfig

    def __init__(self, side: Literal["key", "value"], configs: Mapping[str, Any]) -> None:
        self._side = _Side(side)
        c = _parse(_InsertFieldConfig, configs)
        self.topic = _field_spec(c.topic_field)
        self.partition = _field_spec(c.partition_field)
        self.offset = _field_spec(c.offset_field)
        self.timestamp = _field_spec(c.timestamp_field)
        self.static = _field_spec(c.static_field)
        self.static_value = c.static_value

    def _additions(self, record: Record) -> list[tuple[tuple[str, bool], Schema, Any]]:
        out: list[tuple[tuple[str, bool], Schema, Any]] = []
        if self.topic:
            out.append((self.topic, Schema("string"), record.topic))
        if self.partition:
            out.append((self.partition, Schema("int32"), record.partition))
        if self.offset:
            if not isinstance(record, SinkRecord):
                raise DataError("Offset insertion is only supported for sink connectors, record is of "
                                f"type: {type(record).__name__}")
            out.append((self.offset, Schema("int64"), record.offset))
        if self.timestamp:
            out.append((self.timestamp, Schema("int64", name=TIMESTAMP, version=1), record.timestamp_ms))
        if self.static:
            out.append((self.static, Schema("string"), self.static_value))
        return out

    def __call__(self, record: R) -> R | None:
        schema, value = self._side.get(record)
        if value is None:
            return record
        additions = self._additions(record)
        if schema is None:
            updated = dict(_require_map(value, "field insertion"))
            for (name, _optional), _s, v in additions:
                updated[name] = v
            return self._side.set(record, None, updated)
        _require_struct(schema, "field insertion")
        fields = list(schema.fields)
        updated = dict(value)
        for (name, optional), field_schema, v in additions:
            fields.append(Field(name, replace(field_schema, optional=optional)))
            updated[name] = v
        return self._side.set(record, _struct_like(schema, tuple(fields)), updated)


# -- ReplaceField --------------------------------------------------------------------------


class _ReplaceFieldConfig(_Config):
    exclude: list[str] = PField(default_factory=list)
    include: list[str] = PField(default_factory=list)
    blacklist: list[str] = PField(default_factory=list)
    whitelist: list[str] = PField(default_factory=list)
    renames: dict[str, str] = PField(default_factory=dict)

    _split = field_validator("exclude", "include", "blacklist", "whitelist", mode="before")(
        lambda cls, v: _csv(v))

    @field_validator("renames", mode="before")
    @classmethod
    def _pairs(cls, value: Any) -> Any:
        if not isinstance(value, str):
            return value
        out = {}
        for part in _csv(value):
            old, sep, new = part.partition(":")
            if not sep or not old or not new:
                raise ValueError(f"Invalid rename mapping: {part}")
            out[old] = new
        return out


class ReplaceField:
    config_model: ClassVar[type[BaseModel]] = _ReplaceFieldConfig

    def __init__(self, side: Literal["key", "value"], configs: Mapping[str, Any]) -> None:
        self._side = _Side(side)
        c = _parse(_ReplaceFieldConfig, configs)
        self.exclude = set(c.exclude or c.blacklist)
        self.include = set(c.include or c.whitelist)
        self.renames = dict(c.renames)

    def _keep(self, name: str) -> bool:
        return name not in self.exclude and (not self.include or name in self.include)

    def __call__(self, record: R) -> R | None:
        schema, value = self._side.get(record)
        if value is None:
            return record
        if schema is None:
            updated = {self.renames.get(k, k): v for k, v in _require_map(value, "field replacement").items()
                       if self._keep(k)}
            return self._side.set(record, None, updated)
        _require_struct(schema, "field replacement")
        fields = tuple(Field(self.renames.get(f.name, f.name), f.schema) for f in schema.fields if self._keep(f.name))
        updated = {self.renames.get(f.name, f.name): value.get(f.name) for f in schema.fields if self._keep(f.name)}
        return self._side.set(record, _struct_like(schema, fields), updated)


# -- MaskField -----------------------------------------------------------------------------


class _MaskFieldConfig(_Config):
    fields: list[str] = PField(min_length=1)
    replacement: str | None = None

    _split = field_validator("fields", mode="before")(lambda cls, v: _csv(v))


_EMPTY: dict[type, Any] = {bool: False, int: 0, float: 0.0, str: "", bytes: b"", list: [], dict: {}}


class MaskField:
    config_model: ClassVar[type[BaseModel]] = _MaskFieldConfig

    def __init__(self, side: Literal["key", "value"], configs: Mapping[str, Any]) -> None:
        self._side = _Side(side)
        c = _parse(_MaskFieldConfig, configs)
        self.fields = set(c.fields)
        self.replacement = c.replacement

    def _masked(self, value: Any) -> Any:
        if value is None:
            return None
        if self.replacement is None:
            for kind, empty in _EMPTY.items():
                if isinstance(value, kind):
                    return type(empty)(empty) if isinstance(empty, (list, dict)) else empty
            raise DataError(f"Cannot mask value of type: {type(value).__name__}")
        if isinstance(value, str):
            return self.replacement
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise DataError(f"Cannot mask value of type {type(value).__name__} with custom replacement.")
        try:
            return type(value)(self.replacement)
        except ValueError:
            raise DataError(f"Unable to convert {self.replacement} to {type(value).__name__}") from None

    def __call__(self, record: R) -> R | None:
        schema, value = self._side.get(record)
        if value is None:
            return record
        source = _require_map(value, "masking fields") if schema is None else value
        if schema is not None:
            _require_struct(schema, "masking fields")
        updated = {k: self._masked(v) if k in self.fields else v for k, v in source.items()}
        return self._side.set(record, schema, updated)


# -- Cast ----------------------------------------------------------------------------------

_CASTABLE = ("int8", "int16", "int32", "int64", "float32", "float64", "boolean", "string")
_INT_RANGE = {"int8": 8, "int16": 16, "int32": 32, "int64": 64}


class _CastConfig(_Config):
    spec: list[str] = PField(min_length=1)

    @field_validator("spec", mode="before")
    @classmethod
    def _split(cls, value: Any) -> Any:
        parts = _csv(value)
        if isinstance(parts, list):
            for part in parts:
                target = part.rpartition(":")[2]
                if target not in _CASTABLE:
                    raise ValueError(f"Invalid type found in casting spec: {part}; expected one of "
                                     f"{', '.join(_CASTABLE)}")
        return parts


def _cast(value: Any, target: str) -> Any:
    if value is None:
        return None
    try:
        if target == "string":
            if isinstance(value, bool):
                return "true" if value else "false"
            if isinstance(value, bytes):
                import base64

                return base64.b64encode(value).decode()
            return str(value)
        if target == "boolean":
            if isinstance(value, str):
                return value.strip().lower() == "true"
            return bool(value)
        if target in _INT_RANGE:
            number = int(value) if not isinstance(value, str) else int(float(value)) if "." in value else int(value)
            bits = _INT_RANGE[target]
            # Java's narrowing conversion wraps around
            number &= (1 << bits) - 1
            return number - (1 << bits) if number >= 1 << (bits - 1) else number
        return float(value)
    except (TypeError, ValueError) as exc:
        raise DataError(f"Cast transformation cannot cast {value!r} to {target}: {exc}") from None


class Cast:
    config_model: ClassVar[type[BaseModel]] = _CastConfig

    def __init__(self, side: Literal["key", "value"], configs: Mapping[str, Any]) -> None:
        self._side = _Side(side)
        c = _parse(_CastConfig, configs)
        self.whole: str | None = None
        self.casts: dict[str, str] = {}
        for part in c.spec:
            name, sep, target = part.rpartition(":")
            if not sep:
                if len(c.spec) != 1:
                    raise ConfigError({"spec": ["Cast transformations that specify a type to cast the "
                                                "entire value to may only specify a single cast in their spec"]})
                self.whole = target
            else:
                self.casts[name] = target

    def __call__(self, record: R) -> R | None:
        schema, value = self._side.get(record)
        if self.whole is not None:
            new_schema = None if schema is None else Schema(self.whole, optional=schema.optional)  # type: ignore[arg-type]  # validated
            return self._side.set(record, new_schema, _cast(value, self.whole))
        if value is None:
            return record
        if schema is None:
            source = _require_map(value, "cast types")
            return self._side.set(record, None, {k: _cast(v, self.casts[k]) if k in self.casts else v
                                                 for k, v in source.items()})
        _require_struct(schema, "cast types")
        fields = tuple(Field(f.name, Schema(self.casts[f.name], optional=f.schema.optional))  # type: ignore[arg-type]
                       if f.name in self.casts else f for f in schema.fields)
        updated = {f.name: _cast(value.get(f.name), self.casts[f.name]) if f.name in self.casts
                   else value.get(f.name) for f in schema.fields}
        return self._side.set(record, _struct_like(schema, fields), updated)


# -- ValueToKey, ExtractField ----------------------------------------------------------------


class _ValueToKeyConfig(_Config):
    fields: list[str] = PField(min_length=1)

    _split = field_validator("fields", mode="before")(lambda cls, v: _csv(v))


class ValueToKey:
    config_model: ClassVar[type[BaseModel]] = _ValueToKeyConfig

    def __init__(self, configs: Mapping[str, Any]) -> None:
        self.fields = list(_parse(_ValueToKeyConfig, configs).fields)

    def __call__(self, record: R) -> R | None:
        if record.value is None:
            return record
        if record.value_schema is None:
            value = _require_map(record.value, "copying fields from value to key")
            return record.with_(key={f: value.get(f) for f in self.fields}, key_schema=None)
        schema = record.value_schema
        _require_struct(schema, "copying fields from value to key")
        fields = []
        for name in self.fields:
            found = schema.field(name)
            if found is None:
                raise DataError(f"Field does not exist: {name}")
            fields.append(found)
        key_schema = Schema("struct", fields=tuple(fields))
        return record.with_(key={f: record.value.get(f) for f in self.fields}, key_schema=key_schema)


class _ExtractFieldConfig(_Config):
    field: str = PField(min_length=1)


class ExtractField:
    config_model: ClassVar[type[BaseModel]] = _ExtractFieldConfig

    def __init__(self, side: Literal["key", "value"], configs: Mapping[str, Any]) -> None:
        self._side = _Side(side)
        self.field = _parse(_ExtractFieldConfig, configs).field

    def __call__(self, record: R) -> R | None:
        schema, value = self._side.get(record)
        if schema is None:
            if value is None:
                return self._side.set(record, None, None)
            return self._side.set(record, None, _require_map(value, "field extraction").get(self.field))
        _require_struct(schema, "field extraction")
        found = schema.field(self.field)
        if found is None:
            raise DataError(f"Unknown field: {self.field}")
        return self._side.set(record, found.schema, None if value is None else value.get(self.field))


# -- HoistField, Flatten, headers ------------------------------------------------------------


class HoistField:
    config_model: ClassVar[type[BaseModel]] = _ExtractFieldConfig

    def __init__(self, side: Literal["key", "value"], configs: Mapping[str, Any]) -> None:
        self._side = _Side(side)
        self.field = _parse(_ExtractFieldConfig, configs).field

    def __call__(self, record: R) -> R | None:
        schema, value = self._side.get(record)
        if schema is None:
            return self._side.set(record, None, {self.field: value})
        return self._side.set(record, Schema("struct", fields=(Field(self.field, schema),)), {self.field: value})


class _FlattenConfig(_Config):
    delimiter: str = "."


class Flatten:
    config_model: ClassVar[type[BaseModel]] = _FlattenConfig

    def __init__(self, side: Literal["key", "value"], configs: Mapping[str, Any]) -> None:
        self._side = _Side(side)
        self.delimiter = _parse(_FlattenConfig, configs).delimiter

    def _values(self, value: Mapping[str, Any], prefix: str, out: dict[str, Any]) -> None:
        for key, item in value.items():
            name = f"{prefix}{self.delimiter}{key}" if prefix else str(key)
            if isinstance(item, Mapping):
                self._values(item, name, out)
            else:
                out[name] = item

    def _fields(self, schema: Schema, value: Mapping[str, Any] | None, prefix: str, optional: bool,
                fields: list[Field], out: dict[str, Any]) -> None:
        for f in schema.fields:
            name = f"{prefix}{self.delimiter}{f.name}" if prefix else f.name
            item = None if value is None else value.get(f.name)
            if f.schema.type == "struct":
                self._fields(f.schema, item, name, optional or f.schema.optional, fields, out)
            else:
                fields.append(Field(name, f.schema.as_optional() if optional else f.schema))
                out[name] = item

    def __call__(self, record: R) -> R | None:
        schema, value = self._side.get(record)
        if value is None:
            return record
        out: dict[str, Any] = {}
        if schema is None:
            self._values(_require_map(value, "flattening"), "", out)
            return self._side.set(record, None, out)
        _require_struct(schema, "flattening")
        fields: list[Field] = []
        self._fields(schema, value, "", False, fields, out)
        return self._side.set(record, _struct_like(schema, tuple(fields)), out)


class _InsertHeaderConfig(_Config):
    header: str = PField(min_length=1)
    value_literal: str = PField(alias="value.literal")


class InsertHeader:
    config_model: ClassVar[type[BaseModel]] = _InsertHeaderConfig

    def __init__(self, configs: Mapping[str, Any]) -> None:
        c = _parse(_InsertHeaderConfig, configs)
        self.header = (c.header, c.value_literal.encode())

    def __call__(self, record: R) -> R | None:
        return record.with_(headers=(*record.headers, self.header))


class _DropHeadersConfig(_Config):
    headers: list[str] = PField(min_length=1)

    _split = field_validator("headers", mode="before")(lambda cls, v: _csv(v))


class DropHeaders:
    config_model: ClassVar[type[BaseModel]] = _DropHeadersConfig

    def __init__(self, configs: Mapping[str, Any]) -> None:
        self.names = set(_parse(_DropHeadersConfig, configs).headers)

    def __call__(self, record: R) -> R | None:
        return record.with_(headers=tuple(h for h in record.headers if h[0] not in self.names))


# -- routers -------------------------------------------------------------------------------

# Java SimpleDateFormat letters -> strftime, longest first
_DATE_TOKENS = (("yyyy", "%Y"), ("yy", "%y"), ("MM", "%m"), ("dd", "%d"), ("HH", "%H"),
                ("mm", "%M"), ("ss", "%S"), ("SSS", "{ms}"))


def _strftime_pattern(java: str) -> str:
    out, i = [], 0
    while i < len(java):
        if java[i] == "'":
            end = java.find("'", i + 1)
            end = len(java) if end < 0 else end
            out.append(java[i + 1:end].replace("%", "%%") or "'")
            i = end + 1
            continue
        for token, repl in _DATE_TOKENS:
            if java.startswith(token, i):
                out.append(repl)
                i += len(token)
                break
        else:
            if java[i].isalpha():
                raise ValueError(f"unsupported date pattern letter {java[i]!r} in {java!r}")
            out.append(java[i].replace("%", "%%"))
            i += 1
    return "".join(out)


class _TimestampRouterConfig(_Config):
    topic_format: str = PField("${topic}-${timestamp}", alias="topic.format")
    timestamp_format: str = PField("yyyyMMdd", alias="timestamp.format")

    @field_validator("timestamp_format")
    @classmethod
    def _known(cls, value: str) -> str:
        _strftime_pattern(value)
        return value


class TimestampRouter:
    config_model: ClassVar[type[BaseModel]] = _TimestampRouterConfig

    def __init__(self, configs: Mapping[str, Any]) -> None:
        c = _parse(_TimestampRouterConfig, configs)
        self.topic_format = c.topic_format
        self.pattern = _strftime_pattern(c.timestamp_format)

    def __call__(self, record: R) -> R | None:
        if record.timestamp_ms is None:
            raise DataError(f"Timestamp missing on record: {record}")
        when = dt.datetime.fromtimestamp(record.timestamp_ms / 1000, dt.UTC)
        stamp = when.strftime(self.pattern).replace("{ms}", f"{record.timestamp_ms % 1000:03d}")
        return record.with_(topic=self.topic_format.replace("${topic}", record.topic).replace("${timestamp}", stamp))


def _python_replacement(java: str) -> str:
    """Java's ``$1``/``${name}`` group references as Python's ``\\g<1>``."""
    out, i = [], 0
    while i < len(java):
        ch = java[i]
        if ch == "\\" and i + 1 < len(java):
            out.append(java[i + 1].replace("\\", "\\\\"))
            i += 2
        elif ch == "$" and java.startswith("{", i + 1):
            end = java.index("}", i)
            out.append(f"\\g<{java[i + 2:end]}>")
            i = end + 1
        elif ch == "$":
            j = i + 1
            while j < len(java) and java[j].isdigit():
                j += 1
            if j == i + 1:
                raise ValueError(f"Illegal group reference in {java!r}")
            out.append(f"\\g<{java[i + 1:j]}>")
            i = j
        else:
            out.append("\\\\" if ch == "\\" else ch)
            i += 1
    return "".join(out)


class _RegexRouterConfig(_Config):
    regex: str
    replacement: str

    @field_validator("regex")
    @classmethod
    def _compiles(cls, value: str) -> str:
        try:
            re.compile(value)
        except re.error as exc:
            raise ValueError(f"Invalid regex: {exc}") from None
        return value

    @field_validator("replacement")
    @classmethod
    def _groups(cls, value: str) -> str:
        _python_replacement(value)
        return value


class RegexRouter:
    config_model: ClassVar[type[BaseModel]] = _RegexRouterConfig

    def __init__(self, configs: Mapping[str, Any]) -> None:
        c = _parse(_RegexRouterConfig, configs)
        self.regex = re.compile(c.regex)
        self.replacement = _python_replacement(c.replacement)

    def __call__(self, record: R) -> R | None:
        match = self.regex.fullmatch(record.topic)
        if match is None:
            return record
        return record.with_(topic=match.expand(self.replacement))


class Filter:
    config_model: ClassVar[type[BaseModel]] = _Config

    def __init__(self, configs: Mapping[str, Any]) -> None:
        pass

    def __call__(self, record: R) -> R | None:
        return None


# -- predicates ----------------------------------------------------------------------------


class _PatternConfig(_Config):
    pattern: str

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, value: str) -> str:
        try:
            re.compile(value)
        except re.error as exc:
            raise ValueError(f"Invalid regex: {exc}") from None
        return value


class TopicNameMatches:
    config_model: ClassVar[type[BaseModel]] = _PatternConfig

    def __init__(self, configs: Mapping[str, Any]) -> None:
        self.pattern = re.compile(_parse(_PatternConfig, configs).pattern)

    def __call__(self, record: Record) -> bool:
        return record.topic is not None and self.pattern.fullmatch(record.topic) is not None


class _HeaderConfig(_Config):
    name: str = PField(min_length=1)


class HasHeaderKey:
    config_model: ClassVar[type[BaseModel]] = _HeaderConfig

    def __init__(self, configs: Mapping[str, Any]) -> None:
        self.name = _parse(_HeaderConfig, configs).name

    def __call__(self, record: Record) -> bool:
        return any(key == self.name for key, _ in record.headers)


class RecordIsTombstone:
    config_model: ClassVar[type[BaseModel]] = _Config

    def __init__(self, configs: Mapping[str, Any]) -> None:
        pass

    def __call__(self, record: Record) -> bool:
        return record.value is None


# -- registry and chain ----------------------------------------------------------------------

Factory = Callable[[Mapping[str, Any]], Callable[[Any], Any]]
_T = "org.apache.kafka.connect.transforms."


def _sided(cls: Any, side: Literal["key", "value"]) -> Factory:
    def build(configs: Mapping[str, Any]) -> Any:
        return cls(side, configs)

    build.config_model = cls.config_model  # type: ignore[attr-defined]
    return build


TRANSFORMS: dict[str, Any] = {}
_sided_classes: tuple[Any, ...] = (InsertField, ReplaceField, MaskField, Cast, ExtractField, HoistField, Flatten)
_plain_classes: tuple[Any, ...] = (ValueToKey, TimestampRouter, RegexRouter, Filter, InsertHeader, DropHeaders)
_predicate_classes: tuple[Any, ...] = (TopicNameMatches, HasHeaderKey, RecordIsTombstone)
for _cls in _sided_classes:
    for _suffix, _side_name in (("$Key", "key"), ("$Value", "value")):
        _factory = _sided(_cls, _side_name)  # type: ignore[arg-type]  # the loop's literal
        for _prefix in (_T, ""):
            TRANSFORMS[f"{_prefix}{_cls.__name__}{_suffix}"] = _factory
for _cls in _plain_classes:
    for _prefix in (_T, ""):
        TRANSFORMS[f"{_prefix}{_cls.__name__}"] = _cls

PREDICATES: dict[str, Any] = {}
for _cls in _predicate_classes:
    for _prefix in (_T + "predicates.", ""):
        PREDICATES[f"{_prefix}{_cls.__name__}"] = _cls


def _lookup(table: Mapping[str, Any], name: str, what: str) -> Any:
    found = table.get(name.strip())
    if found is not None:
        return found
    try:
        return import_class(name.strip())
    except PluginError:
        known = ", ".join(sorted(k for k in table if k.startswith(_T)))
        raise PluginError(f"Class {name} could not be found as a {what}; built-ins are: {known}") from None


def transform_class(name: str) -> Any:
    return _lookup(TRANSFORMS, name, "transformation")


def predicate_class(name: str) -> Any:
    return _lookup(PREDICATES, name, "predicate")


def _sub(config: Mapping[str, Any], prefix: str) -> dict[str, Any]:
    return {k[len(prefix):]: v for k, v in config.items() if k.startswith(prefix)}


class TransformChain:
    """The ``transforms`` of a connector config, in order, each gated by its predicate.

    Building it validates every transform's and predicate's config; the problems of all
    of them are raised together in one ConfigError keyed by the full config key
    (``transforms.<alias>.<key>``)."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        problems: dict[str, list[str]] = {}
        aliases = _csv(config.get("transforms", "")) or []
        predicate_aliases = _csv(config.get("predicates", "")) or []
        predicates: dict[str, Callable[[Any], bool]] = {}
        for alias in predicate_aliases:
            made = self._build(config, f"predicates.{alias}.", predicate_class, problems)
            if made is not None:
                predicates[alias] = made
        self.steps: list[tuple[str, Callable[[Any], Any], Callable[[Any], bool] | None, bool]] = []
        for alias in aliases:
            prefix = f"transforms.{alias}."
            step = self._build(config, prefix, transform_class, problems)
            gate_name = config.get(prefix + "predicate")
            negate_text = str(config.get(prefix + "negate", "false")).strip().lower()
            if negate_text not in ("true", "false"):
                problems.setdefault(prefix + "negate", []).append("Expected value to be either true or false")
            gate = None
            if gate_name:
                if gate_name not in predicate_aliases:
                    problems.setdefault(prefix + "predicate", []).append(
                        f"Invalid value {gate_name}: it is not one of the declared predicates "
                        f"({', '.join(predicate_aliases) or 'none'})")
                gate = predicates.get(gate_name)
            if step is not None:
                self.steps.append((alias, step, gate, negate_text == "true"))
        if problems:
            raise ConfigError(problems)

    @staticmethod
    def _build(config: Mapping[str, Any], prefix: str, lookup: Callable[[str], Any],
               problems: dict[str, list[str]]) -> Any:
        type_name = config.get(prefix + "type")
        if not type_name:
            problems.setdefault(prefix + "type", []).append("Missing required configuration "
                                                           f"\"{prefix}type\" which has no default value.")
            return None
        try:
            factory = lookup(str(type_name))
        except PluginError as exc:
            problems.setdefault(prefix + "type", []).append(str(exc))
            return None
        settings = {k: v for k, v in _sub(config, prefix).items() if k not in ("type", "predicate", "negate")}
        try:
            return factory(settings)
        except ConfigError as exc:
            for key, msgs in exc.problems.items():
                problems.setdefault(prefix + key, []).extend(msgs)
        return None

    def __call__(self, record: R) -> R | None:
        current: R | None = record
        for _alias, step, gate, negate in self.steps:
            if current is None:
                return None
            if gate is not None and bool(gate(current)) == negate:
                continue
            current = step(current)
        return current
