"""Config validation, the plugin registry and the worker config."""

from __future__ import annotations

from pathlib import Path

import pytest

from streamkit.connect.config import validate_config, validation_report
from streamkit.connect.converters import JsonConverter, StringConverter
from streamkit.connect.errors import ConfigError
from streamkit.connect.file import FileStreamSinkConnector, FileStreamSourceConnector
from streamkit.connect.plugins import BUILTIN_CONNECTORS, PluginError, PluginRegistry
from streamkit.connect.worker_config import load_worker_config, read_config_file

SOURCE = "org.apache.kafka.connect.file.FileStreamSourceConnector"
SINK = "org.apache.kafka.connect.file.FileStreamSinkConnector"


@pytest.fixture(scope="module")
def registry() -> PluginRegistry:
    return PluginRegistry()


@pytest.mark.parametrize("name", [
    SOURCE, "FileStreamSourceConnector", "FileStreamSource",
    "streamkit.connect.file.FileStreamSourceConnector", "streamkit.connect.file:FileStreamSourceConnector",
])
def test_connector_by_every_name(registry: PluginRegistry, name: str) -> None:
    assert registry.connector_class(name) is FileStreamSourceConnector


def test_unknown_connector_lists_the_known_ones(registry: PluginRegistry) -> None:
    with pytest.raises(PluginError, match="FileStreamSinkConnector"):
        registry.connector_class("com.example.Missing")


def test_missing_builtins_are_skipped() -> None:
    registry = PluginRegistry(builtins=("streamkit.connect.not_merged_yet.source:Nope", *BUILTIN_CONNECTORS))
    assert registry.connector_class(SINK) is FileStreamSinkConnector
    with pytest.raises(PluginError):
        registry.connector_class("Nope")


def test_third_party_connectors_by_entry_point(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    package = tmp_path / "acme_connectors.py"
    package.write_text(
        "from streamkit.connect.file import FileStreamSinkConnector\n"
        "class AcmeSink(FileStreamSinkConnector):\n"
        "    aliases = ('com.acme.AcmeSinkConnector',)\n")
    dist = tmp_path / "acme_connectors-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-connectors\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[streamkit.connectors]\nacme-sink = acme_connectors:AcmeSink\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    registry = PluginRegistry()
    cls = registry.connector_class("acme-sink")
    assert cls.__name__ == "AcmeSink"
    assert registry.connector_class("com.acme.AcmeSinkConnector") is cls
    assert {"class": "com.acme.AcmeSinkConnector", "type": "sink", "version": "0.1.0"} in registry.connectors()


def test_valid_config_builds_converters_and_transforms(registry: PluginRegistry) -> None:
    valid = validate_config({
        "name": "s", "connector.class": SINK, "tasks.max": "2", "topics": "a, b", "file": "/tmp/x",
        "value.converter": "org.apache.kafka.connect.storage.StringConverter",
        "transforms": "r", "transforms.r.type": "org.apache.kafka.connect.transforms.RegexRouter",
        "transforms.r.regex": "a", "transforms.r.replacement": "c"}, registry,
        {"key.converter": "org.apache.kafka.connect.json.JsonConverter", "key.converter.schemas.enable": "false"})
    assert valid.common.tasks_max == 2 and valid.common.topics == ["a", "b"]
    assert isinstance(valid.value_converter, StringConverter)
    assert isinstance(valid.key_converter, JsonConverter) and not valid.key_converter.schemas_enable
    assert valid.type == "sink"


def test_connector_converter_settings_win_over_the_workers(registry: PluginRegistry) -> None:
    valid = validate_config({"name": "s", "connector.class": SINK, "topics": "a", "file": "/tmp/x",
                             "value.converter": "org.apache.kafka.connect.json.JsonConverter",
                             "value.converter.schemas.enable": "false"}, registry,
                            {"value.converter": "org.apache.kafka.connect.json.JsonConverter",
                             "value.converter.schemas.enable": "true"})
    assert not valid.value_converter.schemas_enable


def test_every_problem_of_both_models_is_listed(registry: PluginRegistry) -> None:
    with pytest.raises(ConfigError) as info:
        validate_config({"name": "s", "connector.class": SOURCE, "tasks.max": "zero", "errors.tolerance": "some",
                         "batch.size": "-1", "format": "xml", "value.converter": "com.example.Nope",
                         "transforms": "x"}, registry)
    assert set(info.value.problems) == {"tasks.max", "errors.tolerance", "file", "topic", "batch.size", "format",
                                        "value.converter", "transforms.x.type"}
    assert "tasks.max" in str(info.value) and "file" in str(info.value)


def test_sinks_need_topics_or_a_regex(registry: PluginRegistry) -> None:
    with pytest.raises(ConfigError, match=r"Must configure one of topics or topics\.regex"):
        validate_config({"name": "s", "connector.class": SINK, "file": "/tmp/x"}, registry)
    with pytest.raises(ConfigError, match="mutually exclusive"):
        validate_config({"name": "s", "connector.class": SINK, "file": "/tmp/x", "topics": "a",
                         "topics.regex": "a.*"}, registry)


def test_exactly_once_required_needs_it_enabled_on_the_worker(registry: PluginRegistry) -> None:
    config = {"name": "s", "connector.class": SOURCE, "file": "f", "topic": "t", "exactly.once.support": "required"}
    for support in ("disabled", "preparing"):
        worker = load_worker_config({"bootstrap.servers": "b:9092", "exactly.once.source.support": support}).raw()
        with pytest.raises(ConfigError) as info:
            validate_config(config, registry, worker)
        assert "exactly.once.source.support=enabled" in " ".join(info.value.problems["exactly.once.support"])
    with pytest.raises(ConfigError, match=r"exactly\.once\.source\.support=enabled"):
        validate_config(config, registry)  # no worker settings: disabled
    enabled = load_worker_config({"bootstrap.servers": "b:9092", "exactly.once.source.support": "enabled",
                                  "offset.storage.topic": "offsets"}).raw()
    valid = validate_config({**config, "transaction.boundary": "interval",
                             "transaction.boundary.interval.ms": "250"}, registry, enabled)
    assert valid.common.exactly_once_support == "required"
    assert valid.common.transaction_boundary_interval_ms == 250


def test_exactly_once_required_is_refused_for_a_connector_that_cannot(registry: PluginRegistry) -> None:
    class NoExactlyOnce(FileStreamSourceConnector):
        def exactly_once_support(self, config: object) -> bool:
            return False

    mine = PluginRegistry()
    mine.register(NoExactlyOnce)
    enabled = {"exactly.once.source.support": "enabled"}
    config = {"name": "s", "connector.class": "NoExactlyOnce", "file": "f", "topic": "t"}
    validate_config(config, mine, enabled)  # exactly.once.support=requested: accepted
    with pytest.raises(ConfigError) as info:
        validate_config({**config, "exactly.once.support": "required"}, mine, enabled)
    assert "NoExactlyOnce cannot write its records and offsets in one transaction" in " ".join(
        info.value.problems["exactly.once.support"])


def test_unsupported_exactly_once_settings_are_refused_with_a_reason(registry: PluginRegistry) -> None:
    enabled = {"exactly.once.source.support": "enabled", "offset.storage.topic": "offsets"}
    base = {"name": "s", "connector.class": SOURCE, "file": "f", "topic": "t"}
    with pytest.raises(ConfigError) as info:
        validate_config({**base, "transaction.boundary": "connector", "offsets.storage.topic": "mine"},
                        registry, enabled)
    assert "does not define its own transaction boundaries" in info.value.problems["transaction.boundary"][0]
    assert "per-connector offset topics are not supported" in info.value.problems["offsets.storage.topic"][0]
    validate_config({**base, "offsets.storage.topic": "offsets"}, registry, enabled)
    # the worker's setting itself is accepted now: standalone refuses it when it starts
    assert load_worker_config({"exactly.once.source.support": "enabled"}).exactly_once_source_support == "enabled"


def test_validation_report_has_kafkas_shape(registry: PluginRegistry) -> None:
    report = validation_report({"connector.class": SINK, "name": "s", "topics": "a", "tasks.max": "0"}, registry)
    assert report["name"] == "FileStreamSinkConnector"
    assert report["error_count"] == 2  # tasks.max, file
    by_name = {c["definition"]["name"]: c for c in report["configs"]}
    assert by_name["tasks.max"]["value"]["errors"] and by_name["file"]["value"]["errors"]
    assert by_name["topics"]["value"] == {"name": "topics", "value": "a", "recommended_values": [],
                                          "errors": [], "visible": True}
    assert by_name["file"]["definition"]["required"] is True
    assert {"Common", "FileStreamSinkConnector"} <= set(report["groups"])


def test_worker_config_files(tmp_path: Path) -> None:
    props = tmp_path / "worker.properties"
    props.write_text("# comment\nbootstrap.servers=k:9092\nlisteners=http://127.0.0.1:18083\n"
                     "plugin.path=/usr/share/java\nvalue.converter.schemas.enable=false\n")
    worker = load_worker_config(read_config_file(props))
    assert worker.bootstrap_servers == "k:9092"
    assert worker.rest_address() == ("127.0.0.1", 18083)
    assert worker.raw()["value.converter.schemas.enable"] == "false"
    assert load_worker_config({"rest.port": 9999}).rest_address() == ("0.0.0.0", 9999)
    with pytest.raises(ConfigError) as info:
        load_worker_config({"rest.port": "http", "offset.flush.interval.ms": "0"})
    assert set(info.value.problems) == {"rest.port", "offset.flush.interval.ms"}


def test_client_settings_from_worker_and_connector_overrides() -> None:
    from streamkit.connect.client_config import client_kwargs

    worker = {"consumer.auto.offset.reset": "latest", "consumer.max.poll.records": "10",
              "producer.compression.type": "lz4", "producer.linger.ms": "20"}
    connector = {"consumer.override.max.poll.records": "5", "producer.override.acks": "1",
                 "producer.override.compression.type": "none"}
    assert client_kwargs("consumer", worker, connector) == {"auto_offset_reset": "latest", "max_poll_records": 5}
    assert client_kwargs("producer", worker, connector) == {"compression_type": None, "linger_ms": 20, "acks": 1}
    # exactly-once sources: a transaction.boundary.interval.ms longer than the default
    # transaction timeout needs a longer one
    assert client_kwargs("producer", {}, {"producer.override.transaction.timeout.ms": "120000"}) == {
        "transaction_timeout_ms": 120000}


def test_bad_client_overrides_are_config_problems(registry: PluginRegistry) -> None:
    with pytest.raises(ConfigError) as info:
        validate_config({"name": "s", "connector.class": SINK, "topics": "a", "file": "/tmp/x",
                         "consumer.override.auto.offset.reset": "sometime",
                         "producer.override.sasl.mechanism": "GSSAPI",
                         "producer.override.ssl.ca.location": "/nonexistent/ca.pem",
                         # a known security setting, taken with the worker's at the task's start
                         "producer.override.sasl.username": "alice"}, registry)
    assert set(info.value.problems) == {"consumer.override.auto.offset.reset", "producer.override.sasl.mechanism",
                                        "producer.override.ssl.ca.location"}
    assert "GSSAPI" in info.value.problems["producer.override.sasl.mechanism"][0]
    with pytest.raises(ConfigError) as worker:
        load_worker_config({"consumer.max.poll.records": "many"})
    assert set(worker.value.problems) == {"consumer.max.poll.records"}


def test_problems_use_kafkas_wording(registry: PluginRegistry) -> None:
    with pytest.raises(ConfigError) as info:
        validate_config({"name": "s", "connector.class": SINK, "topics": "t", "tasks.max": "none",
                         "errors.tolerance": "some", "errors.retry.timeout": "-5"}, registry)
    assert info.value.problems == {
        "tasks.max": ["Invalid value none for configuration tasks.max: Not a number of type INT"],
        "errors.tolerance": ["Invalid value some for configuration errors.tolerance: String must be one of: none, all"],
        "errors.retry.timeout": ["Invalid value -5 for configuration errors.retry.timeout: Value must be at least -1"],
        "file": ['Missing required configuration "file" which has no default value.'],
    }


def test_unknown_keys_are_warnings_naming_the_nearest_known_key(registry: PluginRegistry) -> None:
    valid = validate_config({
        "name": "s", "connector.class": SOURCE, "file": "/tmp/x", "topic": "t", "batch.sise": "10",
        "tasks.maximum": "2", "value.converter.schemas.enable": "false", "producer.override.linger.ms": "5",
        "transforms": "k", "transforms.k.type": "org.apache.kafka.connect.transforms.ValueToKey",
        "transforms.k.fields": "line", "transforms.K.negate": "true", "predicates.p.type": "Nope"}, registry)
    assert valid.warnings == {
        "batch.sise": ["The configuration 'batch.sise' was supplied but isn't a known config "
                       "(did you mean 'batch.size'?)"],
        "tasks.maximum": ["The configuration 'tasks.maximum' was supplied but isn't a known config "
                          "(did you mean 'tasks.max'?)"],
        "transforms.K.negate": ["The configuration 'transforms.K.negate' was supplied but isn't a "
                                "known config (did you mean 'transforms.k.negate'?)"],
        "predicates.p.type": ["The configuration 'predicates.p.type' was supplied but isn't a known config"],
    }
    report = validation_report(valid.raw, registry)
    assert report["error_count"] == 0
    assert report["warnings"] == valid.warnings


def test_a_missing_required_key_names_the_supplied_key_it_was_mistyped_as(registry: PluginRegistry) -> None:
    jdbc = {"name": "j", "connector.class": "JdbcSourceConnector", "mode": "incrementing", "topic.prefix": ""}
    with pytest.raises(ConfigError) as info:
        validate_config({**jdbc, "conection.url": "jdbc:sqlite:x.db", "incrementing.column.name": "id"}, registry)
    assert info.value.problems == {"connection.url": [
        "Missing required configuration \"connection.url\" which has no default value; "
        "'conection.url' was supplied (did you mean 'connection.url'?)"]}
    with pytest.raises(ConfigError) as info:
        validate_config({**jdbc, "connection.url": "jdbc:sqlite:x.db", "incrementing.colum.name": "id"}, registry)
    assert info.value.problems == {"incrementing.column.name": [
        "required with mode=incrementing; 'incrementing.colum.name' was supplied "
        "(did you mean 'incrementing.column.name'?)"]}
