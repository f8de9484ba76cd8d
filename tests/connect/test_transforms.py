"""Single message transforms and predicates against Kafka Connect's documented behaviour."""

from __future__ import annotations

import pytest

from streamkit.connect.data import TIMESTAMP, Field, Schema, SinkRecord, SourceRecord
from streamkit.connect.errors import ConfigError, DataError
from streamkit.connect.transforms import TransformChain, transform_class

T = "org.apache.kafka.connect.transforms."
ROW = Schema("struct", name="row", fields=(
    Field("id", Schema("int64")), Field("name", Schema("string", optional=True)),
    Field("score", Schema("float64", optional=True)),
))


def sink(value: object, schema: Schema | None = None, topic: str = "orders", key: object = None,
         headers: tuple = ()) -> SinkRecord:
    return SinkRecord(topic, 3, 42, value, key, schema, None, 1483228800000, headers)


def chain(**config: str) -> TransformChain:
    return TransformChain(config)


def one(kind: str, record: SinkRecord | SourceRecord, **settings: str):  # type: ignore[no-untyped-def]
    return transform_class(kind)(settings)(record)


def test_insert_field_schemaless() -> None:
    out = one(T + "InsertField$Value", sink({"id": 1}), **{
        "static.field": "MessageSource", "static.value": "Kafka Connect framework",
        "topic.field": "t", "partition.field": "p", "offset.field": "o!", "timestamp.field": "ts"})
    assert out.value == {"id": 1, "MessageSource": "Kafka Connect framework", "t": "orders", "p": 3,
                         "o": 42, "ts": 1483228800000}


def test_insert_field_with_schema_extends_the_struct() -> None:
    out = one(T + "InsertField$Value", sink({"id": 1, "name": "a", "score": None}, ROW),
              **{"topic.field": "t!", "timestamp.field": "ts"})
    assert [f.name for f in out.value_schema.fields] == ["id", "name", "score", "t", "ts"]
    assert out.value_schema.field("t").schema == Schema("string", optional=False)
    ts = out.value_schema.field("ts").schema
    assert (ts.type, ts.name, ts.optional) == ("int64", TIMESTAMP, True)
    assert out.value["t"] == "orders"


def test_insert_field_leaves_tombstones_and_needs_sink_records_for_offsets() -> None:
    assert one(T + "InsertField$Value", sink(None), **{"topic.field": "t"}).value is None
    source = SourceRecord({"f": 1}, {"p": 1}, "t", {"a": 1})
    with pytest.raises(DataError, match="Offset insertion is only supported for sink"):
        one(T + "InsertField$Value", source, **{"offset.field": "o"})
    with pytest.raises(DataError, match="Only Map objects supported"):
        one(T + "InsertField$Value", sink("text"), **{"topic.field": "t"})


def test_replace_field_include_exclude_renames() -> None:
    value = {"id": 1, "name": "a", "score": 2.0}
    assert one(T + "ReplaceField$Value", sink(value), exclude="score").value == {"id": 1, "name": "a"}
    assert one(T + "ReplaceField$Value", sink(value), include="id,score").value == {"id": 1, "score": 2.0}
    assert one(T + "ReplaceField$Value", sink(value), renames="id:key,name:title").value == {
        "key": 1, "title": "a", "score": 2.0}
    # the deprecated names still work
    assert one(T + "ReplaceField$Value", sink(value), blacklist="id,name").value == {"score": 2.0}
    out = one(T + "ReplaceField$Value", sink(value, ROW), exclude="name", renames="score:points")
    assert [f.name for f in out.value_schema.fields] == ["id", "points"]
    assert out.value == {"id": 1, "points": 2.0}


def test_replace_field_on_the_key() -> None:
    out = one(T + "ReplaceField$Key", sink(None, key={"a": 1, "b": 2}), exclude="b")
    assert out.key == {"a": 1} and out.value is None


def test_mask_field() -> None:
    value = {"id": 5, "name": "ann", "vip": True, "tags": ["x"], "score": 1.5, "none": None}
    out = one(T + "MaskField$Value", sink(value), fields="id,name,vip,tags,score,none")
    assert out.value == {"id": 0, "name": "", "vip": False, "tags": [], "score": 0.0, "none": None}
    out = one(T + "MaskField$Value", sink({"ssn": "123-45", "age": 40}), fields="ssn,age", replacement="9")
    assert out.value == {"ssn": "9", "age": 9}
    with pytest.raises(DataError):
        one(T + "MaskField$Value", sink({"ok": True}), fields="ok", replacement="x")


def test_cast_fields_and_whole_values() -> None:
    out = one(T + "Cast$Value", sink({"id": 300, "name": "7", "score": 2.9, "flag": "TRUE"}),
              spec="id:int8,name:int32,score:int64,flag:boolean")
    assert out.value == {"id": 44, "name": 7, "score": 2, "flag": True}  # int8 wraps as Java casts
    assert one(T + "Cast$Value", sink({"on": True, "n": 3}), spec="on:string,n:float64").value == {
        "on": "true", "n": 3.0}
    out = one(T + "Cast$Value", sink({"id": 1, "name": "a", "score": 2.5}, ROW), spec="id:string,score:int32")
    assert out.value_schema.field("id").schema.type == "string"
    assert out.value == {"id": "1", "name": "a", "score": 2}
    whole = one(T + "Cast$Key", sink(None, key="42", ), spec="int64")
    assert whole.key == 42
    with pytest.raises(DataError):
        one(T + "Cast$Value", sink({"n": "seven"}), spec="n:int32")


def test_value_to_key() -> None:
    out = one(T + "ValueToKey", sink({"id": 1, "name": "a"}), fields="id")
    assert out.key == {"id": 1} and out.key_schema is None
    out = one(T + "ValueToKey", sink({"id": 1, "name": "a", "score": None}, ROW), fields="id,name")
    assert [f.name for f in out.key_schema.fields] == ["id", "name"]
    assert out.key == {"id": 1, "name": "a"}


def test_extract_field() -> None:
    assert one(T + "ExtractField$Key", sink(None, key={"id": 9}), field="id").key == 9
    out = one(T + "ExtractField$Value", sink({"id": 1, "name": "a", "score": 1.0}, ROW), field="name")
    assert out.value == "a" and out.value_schema == Schema("string", optional=True)
    with pytest.raises(DataError, match="Unknown field"):
        one(T + "ExtractField$Value", sink({"id": 1}, ROW), field="missing")


def test_timestamp_router() -> None:
    out = one(T + "TimestampRouter", sink({"a": 1}))
    assert out.topic == "orders-20170101"
    out = one(T + "TimestampRouter", sink({"a": 1}), **{"topic.format": "${timestamp}_${topic}",
                                                          "timestamp.format": "yyyy-MM-dd'T'HH"})
    assert out.topic == "2017-01-01T00_orders"
    with pytest.raises(DataError):
        one(T + "TimestampRouter", SinkRecord("t", 0, 0, 1, timestamp_ms=None))


def test_regex_router() -> None:
    settings = {"regex": r"([^.]+)\.([^.]+)\.([^.]+)", "replacement": "$3"}
    assert one(T + "RegexRouter", sink(1, topic="db.public.users"), **settings).topic == "users"
    assert one(T + "RegexRouter", sink(1, topic="plain"), **settings).topic == "plain"
    assert one(T + "RegexRouter", sink(1, topic="a-1"), regex="(.*)-(\\d+)", replacement="${1}_v$2").topic == "a_v1"


def test_filter_with_predicates() -> None:
    drop_foo = chain(transforms="dropFoo", predicates="isFoo", **{
        "transforms.dropFoo.type": T + "Filter", "transforms.dropFoo.predicate": "isFoo",
        "predicates.isFoo.type": T + "predicates.TopicNameMatches", "predicates.isFoo.pattern": "foo.*"})
    assert drop_foo(sink(1, topic="foo-1")) is None
    assert drop_foo(sink(1, topic="bar")) is not None
    keep_foo = chain(transforms="onlyFoo", predicates="isFoo", **{
        "transforms.onlyFoo.type": "Filter", "transforms.onlyFoo.predicate": "isFoo",
        "transforms.onlyFoo.negate": "true",
        "predicates.isFoo.type": "TopicNameMatches", "predicates.isFoo.pattern": "foo.*"})
    assert keep_foo(sink(1, topic="foo-1")) is not None
    assert keep_foo(sink(1, topic="bar")) is None


def test_tombstone_and_header_predicates() -> None:
    drop = chain(transforms="noTombstones,noMarked", predicates="tomb,marked", **{
        "transforms.noTombstones.type": T + "Filter", "transforms.noTombstones.predicate": "tomb",
        "transforms.noMarked.type": T + "Filter", "transforms.noMarked.predicate": "marked",
        "predicates.tomb.type": T + "predicates.RecordIsTombstone",
        "predicates.marked.type": T + "predicates.HasHeaderKey", "predicates.marked.name": "skip"})
    assert drop(sink(None)) is None
    assert drop(sink(1, headers=(("skip", b""),))) is None
    assert drop(sink(1, headers=(("other", b""),))) is not None


def test_chain_applies_in_order_and_a_predicate_gates_one_step() -> None:
    run = chain(transforms="route,tag", predicates="isUsers", **{
        "transforms.route.type": T + "RegexRouter", "transforms.route.regex": "db\\.(.*)",
        "transforms.route.replacement": "$1",
        "transforms.tag.type": T + "InsertField$Value", "transforms.tag.static.field": "src",
        "transforms.tag.static.value": "db", "transforms.tag.predicate": "isUsers",
        "predicates.isUsers.type": T + "predicates.TopicNameMatches", "predicates.isUsers.pattern": "users"})
    users = run(sink({"a": 1}, topic="db.users"))
    assert (users.topic, users.value) == ("users", {"a": 1, "src": "db"})
    orders = run(sink({"a": 1}, topic="db.orders"))
    assert (orders.topic, orders.value) == ("orders", {"a": 1})


def test_every_config_problem_is_listed() -> None:
    with pytest.raises(ConfigError) as info:
        chain(transforms="a,b,c,d,e", predicates="p", **{
            "transforms.b.type": "com.example.Nope",
            "transforms.c.type": T + "Cast$Value", "transforms.c.spec": "id:uuid",
            "transforms.d.type": T + "Filter", "transforms.d.predicate": "undeclared",
            "transforms.e.type": T + "RegexRouter", "transforms.e.regex": "(", "transforms.e.replacement": "$1",
            "predicates.p.type": T + "predicates.TopicNameMatches"})
    problems = info.value.problems
    assert set(problems) == {"transforms.a.type", "transforms.b.type", "transforms.c.spec",
                             "transforms.d.predicate", "transforms.e.regex", "predicates.p.pattern"}


def test_hoist_field() -> None:
    assert one(T + "HoistField$Value", sink(42), field="n").value == {"n": 42}
    out = one(T + "HoistField$Key", SinkRecord("t", 0, 0, None, "k", key_schema=Schema("string")), field="id")
    assert out.key == {"id": "k"} and out.key_schema == Schema("struct", fields=(Field("id", Schema("string")),))


def test_flatten() -> None:
    nested = {"id": 1, "address": {"city": "Oslo", "geo": {"lat": 1.5}}, "tags": ["a"]}
    assert one(T + "Flatten$Value", sink(nested)).value == {
        "id": 1, "address.city": "Oslo", "address.geo.lat": 1.5, "tags": ["a"]}
    geo = Schema("struct", optional=True, fields=(Field("lat", Schema("float64")),))
    schema = Schema("struct", fields=(Field("id", Schema("int64")), Field("geo", geo)))
    out = one(T + "Flatten$Value", sink({"id": 1, "geo": {"lat": 2.0}}, schema), delimiter="_")
    assert out.value == {"id": 1, "geo_lat": 2.0}
    assert out.value_schema.field("geo_lat").schema == Schema("float64", optional=True)


def test_insert_and_drop_headers() -> None:
    out = one(T + "InsertHeader", sink(1, headers=(("a", b"1"), ("b", b"2"))), header="source",
              **{"value.literal": "connect"})
    assert out.headers == (("a", b"1"), ("b", b"2"), ("source", b"connect"))
    assert one(T + "DropHeaders", out, headers="a,source").headers == (("b", b"2"),)
