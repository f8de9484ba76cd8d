"""The pure parts of the Spark/Dask core: option parsing, range splitting, rate limiting,
model schemas."""

from __future__ import annotations

import datetime as dt
from enum import Enum

import pyarrow as pa
import pytest
from pydantic import BaseModel, Field

from streamkit.analytics.options import (
    EARLIEST,
    LATEST,
    OffsetSpec,
    OptionError,
    parse_offsets,
    read_options,
)
from streamkit.analytics.planning import OffsetRange, rate_limit, split_ranges
from streamkit.analytics.schema import model_arrow_schema

BOOT = {"kafka.bootstrap.servers": "h:1"}


def test_options_are_case_insensitive_and_pass_kafka_settings_through() -> None:
    o = read_options({**BOOT, "SUBSCRIBE": "a, b", "kafka.Security.Protocol": "SSL", "includeHeaders": "TRUE",
                      "minPartitions": "4", "kafka.isolation.level": "read_committed"})
    assert o.subscribe == ("a", "b")
    assert o.client_config == {"bootstrap.servers": "h:1", "security.protocol": "SSL",
                               "isolation.level": "read_committed"}
    assert o.include_headers and o.min_partitions == 4
    assert o.starting == OffsetSpec("earliest") and o.ending == OffsetSpec("latest")


def test_offsets_json_and_timestamps() -> None:
    spec = parse_offsets('{"t": {"0": 23, "1": -2}, "u": {"0": -1}}', "startingOffsets")
    assert spec.per_partition == {("t", 0): 23, ("t", 1): EARLIEST, ("u", 0): LATEST}
    o = read_options({**BOOT, "assign": '{"t": [1, 0]}', "startingTimestamp": "5",
                      "startingOffsets": "earliest", "endingOffsetsByTimestamp": '{"t": {"0": 9}}'})
    assert o.assign == (("t", 0), ("t", 1))
    assert o.starting == OffsetSpec("timestamp", timestamp=5)  # the timestamp wins, as in Spark
    assert o.ending == OffsetSpec("timestamps", {("t", 0): 9})


@pytest.mark.parametrize(("options", "message"), [
    ({"subscribe": "t"}, "kafka.bootstrap.servers is required"),
    ({**BOOT, "subscribe": "t", "subscribePattern": "x"}, "exactly one of"),
    ({**BOOT, "subscribe": "t", "startingOffsets": '{"t": {"0": -3}}'}, "is negative"),
    ({**BOOT, "subscribe": "t", "endingOffsets": "earliest"}, "cannot be earliest"),
    ({**BOOT, "subscribe": "t", "minPartitions": "0"}, "positive integer"),
    ({**BOOT, "subscribe": "t", "kafka.group.id": "g"}, "kafka.group.id is not supported"),
    ({**BOOT, "assign": "[1]"}, "assign must be JSON"),
    ({**BOOT, "subscribe": "t", "startingTimestamp": "soon"}, "milliseconds"),
])
def test_bad_options(options: dict[str, str], message: str) -> None:
    with pytest.raises(OptionError, match=message):
        read_options(options)


def test_streams_have_no_end() -> None:
    assert read_options({**BOOT, "subscribe": "t"}, streaming=True).starting == OffsetSpec("latest")
    with pytest.raises(OptionError, match="batch reads only"):
        read_options({**BOOT, "subscribe": "t", "endingOffsets": "latest"}, streaming=True)


def test_split_ranges_in_proportion_to_size() -> None:
    ranges = [OffsetRange("t", 0, 0, 300), OffsetRange("t", 1, 10, 110), OffsetRange("t", 2, 5, 5)]
    assert split_ranges(ranges, None) == ranges[:2]  # empty ranges are dropped
    parts = split_ranges(ranges, 8)
    assert [(r.partition, r.start, r.end) for r in parts] == [
        (0, 0, 50), (0, 50, 100), (0, 100, 150), (0, 150, 200), (0, 200, 250), (0, 250, 300),
        (1, 10, 60), (1, 60, 110)]
    assert split_ranges([OffsetRange("t", 0, 0, 2)], 5) == [OffsetRange("t", 0, 0, 1), OffsetRange("t", 0, 1, 2)]


def test_rate_limit_shares_by_lag() -> None:
    begin = {("t", 0): 0, ("t", 1): 100}
    end = {("t", 0): 300, ("t", 1): 200, ("t", 2): 50}  # t-2 is new: no lag known, kept as is
    assert rate_limit(begin, end, 1000) == end
    assert rate_limit(begin, end, 40) == {("t", 0): 30, ("t", 1): 110, ("t", 2): 50}
    assert rate_limit({("t", 0): 0, ("t", 1): 0}, {("t", 0): 1000, ("t", 1): 1}, 10) == {("t", 0): 9, ("t", 1): 1}


class Color(Enum):
    RED = "red"


class Inner(BaseModel):
    x: float


class Event(BaseModel):
    name: str
    count: int | None = None
    flag: bool
    at: dt.datetime
    day: dt.date
    color: Color
    tags: list[str]
    attrs: dict[str, int]
    inner: Inner
    renamed: str = Field(alias="Renamed")


def test_model_schema() -> None:
    assert model_arrow_schema(Event) == pa.schema([
        ("name", pa.string()), ("count", pa.int64()), ("flag", pa.bool_()), ("at", pa.timestamp("us", tz="UTC")),
        ("day", pa.date32()), ("color", pa.string()), ("tags", pa.list_(pa.string())),
        ("attrs", pa.map_(pa.string(), pa.int64())), ("inner", pa.struct([("x", pa.float64())])),
        ("Renamed", pa.string())])

    class Bad(BaseModel):
        either: int | str

    with pytest.raises(TypeError, match="union"):
        model_arrow_schema(Bad)
