"""ConnectorTestDriver: the built-in file connectors (source and sink) and a test connector,
run in memory with converters and transforms applied, offsets committed and restored."""

from __future__ import annotations

from pathlib import Path

import pytest

from streamkit.connect.errors import ConfigError
from streamkit.testing.connect import ConnectorTestDriver

T = "org.apache.kafka.connect.transforms."


def test_a_source_connector_writes_transformed_converted_records(tmp_path: Path) -> None:
    source = tmp_path / "in.txt"
    source.write_text("alpha\nbeta\n")
    config = {"name": "lines", "connector.class": "FileStreamSource", "file": str(source), "topic": "lines",
              "value.converter": "org.apache.kafka.connect.json.JsonConverter",
              "value.converter.schemas.enable": "false",
              "transforms": "hoist,tag", "transforms.hoist.type": T + "HoistField$Value",
              "transforms.hoist.field": "line",
              "transforms.tag.type": T + "InsertField$Value", "transforms.tag.static.field": "origin",
              "transforms.tag.static.value": "file"}
    with ConnectorTestDriver(config) as driver:
        assert driver.poll() == 2
        assert [r.value for r in driver.output("lines")] == [{"line": "alpha", "origin": "file"},
                                                           {"line": "beta", "origin": "file"}]
        driver.commit()
        with source.open("a") as f:
            f.write("gamma\n")
        driver.poll()  # read, not committed: a restart reads it again
        driver.restart()
        driver.poll()
        assert [r.value["line"] for r in driver.output("lines")] == ["gamma", "gamma"]
        driver.commit()
        driver.restart()
        assert driver.poll() == 0  # resumes after what was committed
        assert len(driver.source_offsets()) == 1


def test_a_sink_connector_gets_converted_records_and_commits(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    config = {"name": "to-file", "connector.class": "FileStreamSink", "file": str(out), "format": "jsonl",
              "topics": "events", "tasks.max": "2",  # one file: the connector makes one task
              "value.converter": "org.apache.kafka.connect.json.JsonConverter",
              "value.converter.schemas.enable": "false",
              "transforms": "mask", "transforms.mask.type": T + "MaskField$Value", "transforms.mask.fields": "card"}
    with ConnectorTestDriver(config, partitions=2) as driver:
        assert len(driver.tasks) == 1
        driver.send("events", {"id": 1, "card": "4111"}, key="a", partition=0)
        driver.send("events", {"id": 2, "card": "5500"}, key="b", partition=1)
        driver.commit()
        assert driver.committed_sink_offsets() == {("events", 0): 1, ("events", 1): 1}
        with pytest.raises(KeyError, match="does not read"):
            driver.send("other", {"id": 3})
    lines = sorted(out.read_text().splitlines())
    assert lines == ['{"id":1,"card":""}', '{"id":2,"card":""}']


def test_a_bad_config_is_refused_as_a_worker_refuses_it() -> None:
    with pytest.raises(ConfigError, match="file"):
        ConnectorTestDriver({"name": "x", "connector.class": "FileStreamSource", "topic": "t"})
