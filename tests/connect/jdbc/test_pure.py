"""The JDBC connectors' pure parts: URLs, offsets, the incremental queries, converters."""

from __future__ import annotations

import datetime as dt
import decimal

import pytest

from streamkit.connect.data import DECIMAL, TIMESTAMP, Field, Schema, SinkRecord
from streamkit.connect.errors import ConfigError
from streamkit.connect.jdbc.fields import shape_key
from streamkit.connect.jdbc.offsets import Offset, build_query, group_offsets
from streamkit.connect.jdbc.schema import INLINE_GLOBALS, inline_nullable, to_connect_converter
from streamkit.connect.jdbc.urls import to_sqlalchemy_url


@pytest.mark.parametrize(("jdbc", "expected"), [
    ("jdbc:postgresql://db.local:5433/shop?user=app&password=pw&ssl=true",
     "postgresql+psycopg://app:pw@db.local:5433/shop"),
    ("jdbc:mysql://127.0.0.1:3306/test?user=root&useSSL=false",
     "mysql+pymysql://root@127.0.0.1:3306/test"),
    ("jdbc:mariadb://maria/test", "mysql+pymysql://maria/test"),
    ("jdbc:sqlite:/var/data/app.db", "sqlite:////var/data/app.db"),
    ("jdbc:sqlite:app.db", "sqlite:///app.db"),
    ("jdbc:sqlite::memory:", "sqlite://"),
    ("postgresql://u@h/d", "postgresql+psycopg://u@h/d"),
    ("mysql+pymysql://u@h/d", "mysql+pymysql://u@h/d"),
])
def test_jdbc_and_sqlalchemy_urls(jdbc: str, expected: str) -> None:
    assert to_sqlalchemy_url(jdbc).render_as_string(hide_password=False) == expected


def test_connection_user_and_password_win_over_the_url() -> None:
    url = to_sqlalchemy_url("jdbc:postgresql://h/d?user=a&password=b", "c", "d")
    assert (url.username, url.password) == ("c", "d")


@pytest.mark.parametrize("bad", ["", "jdbc:oracle:thin:@h:1521:x", "jdbc:postgresql:/nohost",
                                 "not a url"])
def test_bad_urls_name_the_key(bad: str) -> None:
    with pytest.raises(ConfigError) as info:
        to_sqlalchemy_url(bad)
    assert list(info.value.problems) == ["connection.url"]


def test_offsets_keep_microseconds_in_confluents_layout() -> None:
    offset = Offset(incrementing=7, timestamp_us=1_704_067_200_123_456)
    stored = offset.to_dict()
    assert stored == {"incrementing": 7, "timestamp": 1_704_067_200_123,
                      "timestamp_nanos": 123_456_000}
    assert Offset.from_dict(stored) == offset
    assert Offset.from_dict({"timestamp": 1000}) == Offset(timestamp_us=1_000_000)
    assert Offset.from_dict(None) == Offset()


def test_timestamp_incrementing_query_resumes_inside_a_timestamp() -> None:
    sql, params = build_query(mode="timestamp+incrementing", select="SELECT * FROM t",
                              inc_column="id", ts_expr="ts", limit=10,
                              offset=Offset(incrementing=3, timestamp_us=5))
    assert sql == ("SELECT * FROM t WHERE ts < :end AND ((ts = :ts AND id > :inc) OR ts > :ts)"
                   " ORDER BY ts ASC, id ASC LIMIT 10")
    assert params == ["end", "ts", "inc"]
    first, _ = build_query(mode="incrementing", select="S", inc_column="id", ts_expr=None,
                           offset=Offset(), limit=5)
    assert first == "S ORDER BY id ASC LIMIT 5"


def test_group_offsets_never_end_a_batch_inside_a_timestamp() -> None:
    n, offsets = group_offsets([1, 1, 2, 2, 3], Offset(timestamp_us=0), full=True)
    assert n == 4  # the 3 may have more rows beyond the batch
    assert [o.timestamp_us for o in offsets] == [0, 1, 1, 2]
    n, offsets = group_offsets([1, 1, 2], Offset(), full=False)
    assert n == 3
    assert [o.timestamp_us for o in offsets] == [None, 1, 2]


def test_equal_schemas_in_new_objects_share_one_shape_key() -> None:
    def schema() -> Schema:
        return Schema("struct", fields=(Field("id", Schema("int64")), Field(
            "price", Schema("bytes", name=DECIMAL, parameters={"scale": "2"}))))

    def rec(value_schema: Schema | None, value: dict) -> SinkRecord:
        return SinkRecord(topic="t", partition=0, offset=0, key=None, value=value,
                          value_schema=value_schema)

    assert shape_key(rec(schema(), {})) == shape_key(rec(schema(), {}))
    other = Schema("struct", fields=(Field("id", Schema("int32")),))
    assert shape_key(rec(schema(), {})) != shape_key(rec(other, {}))
    assert shape_key(rec(None, {"a": 1})) == shape_key(rec(None, {"a": 2}))
    assert shape_key(rec(None, {"a": 1})) != shape_key(rec(None, {"a": "x"}))


def test_inlined_converters_give_what_the_converters_give() -> None:
    """The generated per-row code's fast paths (schema.inline_nullable) agree with the
    converters on every kind of value, around the epoch and its millisecond boundaries."""
    epoch = dt.datetime(1970, 1, 1)
    plus_two = dt.timezone(dt.timedelta(hours=2))
    cases = [
        (Schema("int64", name=TIMESTAMP), [
            *(epoch + dt.timedelta(microseconds=u) for u in (
                -1, -999, -1000, -1001, 0, 1, 999, 1000, 1500, -86_400_000_001, 10**15 + 999)),
            "2024-01-01 00:00:00.5", dt.datetime(2024, 1, 1, 2, tzinfo=plus_two)]),
        (Schema("string"), ["a", 7]),
        (Schema("float64"), [0.5, decimal.Decimal("0.1")]),
        (Schema("bytes", name=DECIMAL, parameters={"scale": "2"}), [
            decimal.Decimal("1.25"), 1.5, "2"]),
    ]
    for schema, values in cases:
        convert = to_connect_converter(schema)
        assert convert is not None
        namespace = dict(INLINE_GLOBALS, c=convert)
        exec(f"def f(x):\n    return {inline_nullable(convert, 'x', 'c')}\n", namespace)
        for value in [*values, None]:
            want = None if value is None else convert(value)
            assert namespace["f"](value) == want, (schema, value)
