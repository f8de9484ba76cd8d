"""The JDBC connectors' pure parts: URLs, offsets and the incremental queries."""

from __future__ import annotations

import pytest

from streamkit.connect.data import DECIMAL, Field, Schema, SinkRecord
from streamkit.connect.errors import ConfigError
from streamkit.connect.jdbc.fields import shape_key
from streamkit.connect.jdbc.offsets import Offset, build_query, group_offsets
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
