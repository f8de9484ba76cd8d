"""App settings under Kafka Streams' names, and what an App refuses at declaration time."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

import streamkit
from streamkit.streams.agent import AgentStream
from streamkit.streams.app import App, AppNotRunning, _broker_address
from streamkit.streams.settings import AppSettings, SettingsError, setting_names


def build(**values: object) -> AppSettings:
    return AppSettings.build({"application.id": "app", **{k.replace("_", "."): v for k, v in values.items()}})


# -- names and defaults ----------------------------------------------------------------


def test_defaults() -> None:
    s = AppSettings.build({"application.id": "app"})
    assert s.processing_guarantee == "at_least_once"
    assert s.commit_interval_ms == 1000
    assert s.num_standby_replicas == 0
    assert s.session_timeout_ms == 10000
    assert s.max_poll_records == 10000
    assert s.auto_offset_reset == "earliest"
    assert s.isolation_level == "read_uncommitted"  # Kafka Streams' default under at-least-once
    assert s.num_partitions == 4
    assert s.deserialization_error == "dead_letter"  # a bad record never stops the app, nor is lost
    assert s.window_idle_close_ms == 0
    assert s.producer_acks == "all"
    assert s.bootstrap_timeout_ms == 60000
    assert s.cache_max_bytes_buffering == 10 * 1024 * 1024
    assert s.dead_letter_topic_name == f"{s.application_id}-dead-letter"
    assert not s.exactly_once


def test_kafka_names_are_accepted_and_coerced() -> None:
    s = AppSettings.build({
        "application.id": "my-app.v2_x",
        "bootstrap.servers": "h:1",
        "commit.interval.ms": "250",  # strings, as from a properties file
        "state.dir": "/tmp/state",
        "num.partitions": 8,
        "session.timeout.ms": 6000,
        "heartbeat.interval.ms": 1000,
        "max.poll.interval.ms": 60000,
        "max.poll.records": 5,
        "auto.offset.reset": "latest",
        "deserialization.exception.handler": "dead_letter",
        "errors.deadletterqueue.topic.name": "dlq",
        "late.records.topic.name": "late",
        "window.idle.close.ms": 500,
        "statestore.cache.max.bytes": 0,
        "linger.ms": 0,
        "acks": "1",
        "web.port": 8080,
        "num.standby.replicas": 2,
        "bootstrap.timeout.ms": 1500,
    })
    assert s.application_id == "my-app.v2_x"
    assert s.bootstrap_servers == "h:1"
    assert s.commit_interval_ms == 250
    assert s.state_dir == Path("/tmp/state")
    assert s.num_partitions == 8
    assert s.max_poll_records == 5
    assert s.auto_offset_reset == "latest"
    assert s.deserialization_error == "dead_letter"
    assert s.dead_letter_topic == "dlq"
    assert s.late_records_topic == "late"
    assert s.window_idle_close_ms == 500
    assert s.producer_acks == "1"
    assert s.web_port == 8080
    assert s.num_standby_replicas == 2
    assert s.bootstrap_timeout_ms == 1500
    assert s.cache_max_bytes_buffering == 0
    assert s.dead_letter_topic_name == "dlq"
    assert build(deserialization_exception_handler="dead_letter").dead_letter_topic_name == "app-dead-letter"


def test_attribute_names_are_accepted_too() -> None:
    assert AppSettings.build({"application_id": "a", "commit_interval_ms": 5}).commit_interval_ms == 5


def test_internal_topic_names_are_prefixed_with_the_app_id() -> None:
    assert build().internal_topic("counts-changelog") == "app-counts-changelog"


# -- errors: one line, naming the setting ----------------------------------------------


@pytest.mark.parametrize(
    ("values", "name", "fragment"),
    [
        ({"commit.interval.ms": 0}, "commit.interval.ms", "greater than or equal to 1"),
        ({"commit.interval.ms": "soon"}, "commit.interval.ms", "integer"),
        ({"commit.interval.ms": 1.5}, "commit.interval.ms", "fractional"),
        ({"num.partitions": 0}, "num.partitions", "greater than"),
        ({"num.standby.replicas": -1}, "num.standby.replicas", "greater than"),
        ({"auto.offset.reset": "middle"}, "auto.offset.reset", "earliest"),
        ({"isolation.level": "committed"}, "isolation.level", "read_committed"),
        ({"processing.guarantee": "exactly_twice"}, "processing.guarantee", "at_least_once"),
        ({"deserialization.exception.handler": "ignore"}, "deserialization.exception.handler", "skip"),
        ({"acks": "2"}, "acks", "all"),
        ({"window.idle.close.ms": -5}, "window.idle.close.ms", "greater than"),
        ({"bootstrap.timeout.ms": -1}, "bootstrap.timeout.ms", "greater than"),
        ({"statestore.cache.max.bytes": -1}, "statestore.cache.max.bytes", "greater than"),
        ({"application.id": "has space"}, "application.id", "pattern"),
        ({"application.id": ""}, "application.id", "at least 1"),
    ],
)
def test_bad_values_name_the_setting(values: dict[str, object], name: str, fragment: str) -> None:
    with pytest.raises(SettingsError) as info:
        AppSettings.build({"application.id": "app", **values})
    message = str(info.value)
    assert "\n" not in message
    assert f"bad value for app setting {name!r}" in message
    assert fragment in message


@pytest.mark.parametrize("name", ["commit.interval.msec", "bogus", "consumer.group.id", "num_partition"])
def test_unknown_names_are_refused(name: str) -> None:
    with pytest.raises(SettingsError) as info:
        AppSettings.build({"application.id": "app", name: 1})
    assert str(info.value).startswith(f"unknown app setting {name!r}")


def test_app_reports_settings_errors(tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match=r"unknown app setting 'comit\.interval\.ms'"):
        App("a", data_dir=tmp_path, config={"comit.interval.ms": 10})
    with pytest.raises(SettingsError, match=r"'application\.id'"):
        App("no/slashes", data_dir=tmp_path)


@pytest.mark.parametrize("guarantee", ["exactly_once", "exactly_once_v2"])
def test_exactly_once_commits_every_100_ms_unless_told(guarantee: str, tmp_path: Path) -> None:
    """Kafka Streams' default under exactly-once; an explicit interval wins."""
    for kwargs in ({"processing_guarantee": guarantee}, {"config": {"processing.guarantee": guarantee}}):
        app = App("a", data_dir=tmp_path, **kwargs)  # type: ignore[arg-type]
        assert app.settings.exactly_once
        assert app.settings.commit_interval_ms == 100
    app = App("a", data_dir=tmp_path, processing_guarantee=guarantee, config={"commit.interval.ms": 700})
    assert app.settings.commit_interval_ms == 700
    app.configure({"processing.guarantee": "at_least_once"})
    assert app.settings.commit_interval_ms == 700
    back = App("b", data_dir=tmp_path, processing_guarantee=guarantee)
    back.configure({"processing.guarantee": "at_least_once"})
    assert back.settings.commit_interval_ms == 1000


def test_standby_replicas_are_accepted(tmp_path: Path) -> None:
    """The issue's own example config: standby replicas are supported (test_standby.py)."""
    app = App("a", data_dir=tmp_path, config={"commit.interval.ms": 1000, "session.timeout.ms": 10000,
                                              "num.standby.replicas": 1, "state.dir": str(tmp_path / "s")})
    assert app.settings.num_standby_replicas == 1


# -- broker address --------------------------------------------------------------------


def test_broker_address_forms() -> None:
    assert _broker_address(None) is None
    assert _broker_address("h:1") == "h:1"
    assert _broker_address("kafka://h:1") == "h:1"
    assert _broker_address("kafka://h:1;kafka://h2:2") == "h:1,h2:2"
    assert _broker_address(" h:1 , h2:2 ") == "h:1,h2:2"
    with pytest.raises(SettingsError):
        _broker_address(" ; ")


def test_bootstrap_servers_setting_is_the_default_broker(tmp_path: Path) -> None:
    app = App("a", data_dir=tmp_path, config={"bootstrap.servers": "kafka://h:9"})
    assert app.broker == "h:9"
    assert App("a", broker="x:1", data_dir=tmp_path, config={"bootstrap.servers": "h:9"}).broker == "x:1"
    assert App("a", data_dir=tmp_path).broker is None  # embedded


def test_state_dir_defaults_under_data_dir(tmp_path: Path) -> None:
    assert App("a", data_dir=tmp_path).state_dir == tmp_path / "state"
    assert App("a", data_dir=tmp_path, config={"state.dir": str(tmp_path / "s")}).state_dir == tmp_path / "s"
    assert App("a").data_dir == Path("data") / "a"


# -- declarations ----------------------------------------------------------------------


def test_same_topic_name_returns_the_same_topic(tmp_path: Path) -> None:
    app = App("a", data_dir=tmp_path)
    t = app.topic("views", value_type=int, partitions=3)
    assert app.topic("views") is t
    assert t.partitions == 3
    assert app.internal_topic("x-repartition") is app.internal_topic("x-repartition")
    assert app.internal_topic("x-repartition").name == "a-x-repartition"
    assert app.internal_topic("x-repartition").internal


def test_duplicate_agent_names_are_refused(tmp_path: Path) -> None:
    app = App("a", data_dir=tmp_path)

    @app.agent("t")
    async def process(stream: AgentStream) -> None:
        async for _ in stream:
            pass

    with pytest.raises(ValueError, match="an agent named 'process' already exists"):

        @app.agent("other")
        async def process(stream: AgentStream) -> None:
            pass

    # A different name for the same function is fine.
    app.agent("other", name="process2")(process.fn)
    assert set(app.agents) == {"process", "process2"}
    assert app.agents["process"].topic is app.topic("t")


def test_duplicate_table_names_are_refused(tmp_path: Path) -> None:
    app = App("a", data_dir=tmp_path)
    table = app.Table("counts", default=int)
    assert table.changelog.name == "a-counts-changelog"
    assert table.changelog.config == {"cleanup.policy": "compact"}
    assert table.partitions == 4
    with pytest.raises(ValueError, match="a table named 'counts' already exists"):
        app.Table("counts")
    with pytest.raises(ValueError, match="a table named 'counts' already exists"):
        app.GlobalTable("counts")
    app.GlobalTable("everything")
    with pytest.raises(ValueError, match="'everything' already exists"):
        app.Table("everything")


def test_table_partitions_follow_num_partitions(tmp_path: Path) -> None:
    app = App("a", data_dir=tmp_path, config={"num.partitions": 6})
    assert app.Table("t").partitions == 6
    assert app.Table("u", partitions=2).partitions == 2
    assert app.Table("u2", partitions=2).changelog.partitions == 2


def test_windowing_declarations(tmp_path: Path) -> None:
    app = App("a", data_dir=tmp_path)
    table = app.Table("w", default=int)
    windowed = table.tumbling(10)
    assert table.window is not None and table.window.size_ms == 10_000
    assert table.expires_ms == 100_000  # ten windows by default
    with pytest.raises(ValueError, match="already windowed"):
        table.hopping(10, 5)
    hop = app.Table("h").hopping(timedelta(seconds=10), 2.5, expires=timedelta(minutes=1))
    assert hop.spec.size_ms == 10_000 and hop.spec.advance_ms == 2_500
    assert hop.table.expires_ms == 60_000
    with pytest.raises(ValueError, match="must not exceed its size"):
        app.Table("bad").hopping(5, 10)
    with pytest.raises(ValueError, match="window size must be positive"):
        app.Table("zero").tumbling(0)
    assert windowed.name == "w"


def test_timer_and_agent_arguments(tmp_path: Path) -> None:
    app = App("a", data_dir=tmp_path)

    async def tick() -> None:
        return None

    app.timer(0.5)(tick)
    app.timer(timedelta(seconds=2), name="slow")(tick)
    assert [(ms, name) for ms, _fn, name in app.timers] == [(500, "tick"), (2000, "slow")]
    with pytest.raises(ValueError, match="timer interval must be positive"):
        app.timer(0)
    with pytest.raises(ValueError, match="concurrency must be at least 1"):

        @app.agent("t", concurrency=0)
        async def nothing(stream: AgentStream) -> None:
            pass


async def test_sending_needs_a_running_app(tmp_path: Path) -> None:
    app = App("a", data_dir=tmp_path)
    topic = app.topic("t")
    with pytest.raises(AppNotRunning, match="app 'a' is not running"):
        await topic.send("x")
    with pytest.raises(AppNotRunning):
        topic.send_soon("x")
    await app.stop()  # a no-op on an app that never started


def test_top_level_names() -> None:
    assert streamkit.App is App
    assert streamkit.SettingsError is SettingsError
    assert streamkit.tumbling(minutes=1).size_ms == 60_000
    with pytest.raises(AttributeError):
        streamkit.NoSuchThing  # noqa: B018


@pytest.mark.parametrize("guarantee", ["exactly_once", "exactly_once_v2"])
def test_exactly_once_reads_committed_and_refuses_read_uncommitted(guarantee: str, tmp_path: Path) -> None:
    """Kafka Streams reads inputs read_committed under exactly-once; an at-least-once app
    reads read_uncommitted unless told, and keeps what it was told across overrides."""
    assert build(processing_guarantee=guarantee).isolation_level == "read_committed"
    assert build(processing_guarantee=guarantee, isolation_level="read_committed").isolation_level == "read_committed"
    with pytest.raises(SettingsError) as info:
        build(processing_guarantee=guarantee, isolation_level="read_uncommitted")
    assert str(info.value) == (f"isolation.level=read_uncommitted cannot be used with processing.guarantee={guarantee}, "
                               "which reads its inputs read_committed: leave isolation.level unset (or set it to "
                               "read_committed)")
    app = App("a", data_dir=tmp_path, processing_guarantee=guarantee)
    app.configure({"processing.guarantee": "at_least_once"})
    assert app.settings.isolation_level == "read_uncommitted"
    app.configure({"isolation.level": "read_committed"})
    app.configure({"processing.guarantee": guarantee})
    app.configure({"processing.guarantee": "at_least_once"})
    assert app.settings.isolation_level == "read_committed"


# -- overrides by Kafka name (``streamkit worker --set name=value``) ---------------------------


def test_every_setting_can_be_overridden_by_its_kafka_name_as_text(tmp_path: Path) -> None:
    app = App("ov", data_dir=tmp_path, config={"commit.interval.ms": 100})
    app.configure({"commit.interval.ms": "500", "deserialization.exception.handler": "LogAndFailExceptionHandler",
                   "errors.dead.letter.queue.topic.name": "bad-ones", "bootstrap.servers": "h1:9092,h2:9092",
                   "state.dir": str(tmp_path / "s")})
    assert app.settings.commit_interval_ms == 500
    assert app.settings.deserialization_error == "fail"
    assert app.settings.dead_letter_topic == "bad-ones"
    assert app.broker == "h1:9092,h2:9092"
    assert app.state_dir == tmp_path / "s"
    assert app.settings.session_timeout_ms == 10000  # untouched
    # Each name the settings know can be given as text.
    assert {"commit.interval.ms", "num.partitions", "deserialization.exception.handler",
            "errors.deadletterqueue.topic.name"} <= set(setting_names())


def test_an_override_of_num_partitions_sizes_undeclared_tables(tmp_path: Path) -> None:
    app = App("ov2", data_dir=tmp_path)
    free, fixed = app.Table("free"), app.Table("fixed", partitions=2)
    app.configure({"num.partitions": "8"})
    assert (free.partitions, free.changelog.partitions, fixed.partitions) == (8, 8, 2)


@pytest.mark.parametrize(("overrides", "fragment"), [
    ({"commit.interval.msec": "1"}, "unknown app setting 'commit.interval.msec' (did you mean 'commit.interval.ms'?)"),
    ({"commit.interval.ms": "soon"}, "bad value for app setting 'commit.interval.ms'"),
    ({"application.id": "other"}, "application.id cannot be overridden"),
])
def test_bad_overrides_are_refused_in_one_line(tmp_path: Path, overrides: dict[str, str], fragment: str) -> None:
    app = App("ov3", data_dir=tmp_path)
    app.Table("t")
    before = app.settings
    with pytest.raises(SettingsError) as info:
        app.configure(overrides)
    assert fragment in str(info.value) and "\n" not in str(info.value)
    assert app.settings is before
