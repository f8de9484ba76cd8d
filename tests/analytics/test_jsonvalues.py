"""JSON values to typed Arrow columns: the fast path and the per-record fallback agree."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa

from streamkit.analytics.jsonvalues import parse_json_values, readable

SCHEMA = pa.schema([("page", pa.string()), ("n", pa.int64()), ("day", pa.date32()),
                    ("at", pa.timestamp("us", tz="UTC")), ("tags", pa.list_(pa.string()))])
GOOD = b'{"page": "a", "n": 1, "day": "2024-01-02", "at": "2024-01-02T00:00:00.5Z", "tags": ["x"], "more": 1}'
ROW = {"page": "a", "n": 1, "day": dt.date(2024, 1, 2), "at": dt.datetime(2024, 1, 2, 0, 0, 0, 500000, tzinfo=dt.UTC),
       "tags": ["x"]}
NULLS = dict.fromkeys(SCHEMA.names)


def rows(values: list[bytes | None]) -> list[dict | None]:
    return parse_json_values(pa.array(values, pa.binary()), SCHEMA).to_pylist()


def test_all_good_values_in_one_parse() -> None:
    assert rows([GOOD, b'{"n": 2}']) == [ROW, {**NULLS, "n": 2}]


def test_null_values_are_null_rows() -> None:
    assert rows([None, GOOD, None]) == [None, ROW, None]
    assert rows([None]) == [None]


def test_a_bad_value_spoils_only_its_own_row() -> None:
    spread = b'{"page": "b",\n "n": 3}'  # newlines inside a value: parsed on its own
    assert rows([GOOD, b"{oops", b'{"n": "x"}', spread]) == [ROW, None, None, {**NULLS, "page": "b", "n": 3}]


def test_readable() -> None:
    assert readable(SCHEMA)
    assert not readable(pa.schema([("m", pa.map_(pa.string(), pa.int64()))]))
    assert not readable(pa.schema([("s", pa.struct([("d", pa.date32())]))]))
