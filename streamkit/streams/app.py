"""App: what a stream application declares (topics, tables, agents, timers, DSL streams).

An ``App`` holds declarations only; running them is the job of ``Runtime`` (started by
``streamkit worker -A module:app`` or ``await app.start()`` in tests). The app id is the
consumer group id and the prefix of every internal topic (repartition and changelog), as
in Kafka Streams and Faust.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from streamkit.streams.agent import Agent, AgentFn
from streamkit.streams.codecs import Codec
from streamkit.streams.event import TimestampExtractor
from streamkit.streams.settings import AppSettings, SettingsError
from streamkit.streams.topic import Topic
from streamkit.streams.windows import seconds_ms

if TYPE_CHECKING:
    from streamkit.streams.dsl import StreamNode
    from streamkit.streams.runtime import Runtime
    from streamkit.streams.table import GlobalTable, Table

__all__ = ["REPARTITION_TOPIC_CONFIG", "App", "AppNotRunning"]

# Kafka Streams' configs of its repartition topics.
REPARTITION_TOPIC_CONFIG: dict[str, str] = {"cleanup.policy": "delete", "retention.ms": "-1",
                                            "segment.bytes": "52428800"}

TimerFn = Callable[[], Awaitable[None]]


class AppNotRunning(RuntimeError):
    """Something that needs a running worker (an agent's ``send``, a table read) was
    asked of an app that has not been started."""


def _broker_address(broker: str | None) -> str | None:
    """'kafka://h:p;h2:p2' or 'h:p,h2:p2' -> 'h:p,h2:p2'; None means an embedded broker."""
    if broker is None:
        return None
    parts = [p.strip() for p in broker.replace(";", ",").split(",") if p.strip()]
    out = []
    for part in parts:
        _scheme, sep, rest = part.partition("://")
        out.append(rest if sep else part)
    if not out:
        raise SettingsError("broker must be host:port (or kafka://host:port)")
    return ",".join(out)


def _interval_ms(interval: float | timedelta) -> int:
    """Timers take seconds (as Faust) or a timedelta; kept as integer milliseconds."""
    return seconds_ms(interval, "timer interval")


class App:
    """A stream-processing app: its topics, agents, tables, timers and DSL pipelines, run
    by ``streamkit worker`` (or ``await app.start()``).

    ``id`` is Kafka Streams' ``application.id``: the consumer group and the prefix of the
    internal topics. ``broker`` is ``host:port`` (several separated by commas); without one,
    the worker starts an embedded broker. ``config`` takes the app settings under their
    Kafka names.

    Example::

        app = streamkit.App("pageviews", config={"commit.interval.ms": 500})
        views = app.topic("page_views", value_type=PageView)

        @app.agent(views)
        async def count(stream):
            async for view in stream:
                ...
    """

    def __init__(self, id: str, *, broker: str | None = None, data_dir: str | Path | None = None,
                 processing_guarantee: str = "at_least_once", config: dict[str, Any] | None = None) -> None:
        values: dict[str, Any] = {"application.id": id, "processing.guarantee": processing_guarantee}
        values.update(config or {})
        self.settings = AppSettings.build(values)
        self.id = self.settings.application_id
        self.broker = _broker_address(broker or self.settings.bootstrap_servers)
        self.data_dir = Path(data_dir) if data_dir is not None else Path("data") / self.id
        self.topics: dict[str, Topic] = {}
        self.tables: dict[str, Table] = {}
        self.agents: dict[str, Agent] = {}
        self.timers: list[tuple[int, TimerFn, str]] = []
        self.streams: list[StreamNode] = []
        self.runtime: Runtime | None = None

    def __repr__(self) -> str:
        return f"App({self.id!r})"

    def configure(self, overrides: Mapping[str, Any]) -> None:
        """Override settings by their Kafka names, values as text or typed
        (``{"commit.interval.ms": "500", "deserialization.exception.handler": "fail"}``), as
        ``streamkit worker --set name=value`` does. Call it before the app starts. Raises
        ``SettingsError`` (one line, naming the setting) for an unknown name or a bad value.
        ``bootstrap.servers`` given here wins over ``App(broker=...)``."""
        if self.runtime is not None:
            raise SettingsError("settings cannot change while the app runs; stop it first")
        settings = self.settings.override(overrides)
        if settings.application_id != self.id and any(t.internal for t in self.topics.values()):
            raise SettingsError("application.id cannot be overridden: it names the app's internal topics, "
                                "already declared; set it in App(...)")
        old_partitions = self.settings.num_partitions
        self.settings = settings
        self.id = settings.application_id
        if settings.bootstrap_servers is not None and "bootstrap.servers" in overrides:
            self.broker = _broker_address(settings.bootstrap_servers)
        if settings.num_partitions != old_partitions:
            # What was sized by num.partitions when declared follows it.
            for topic in self.topics.values():
                if topic.internal and topic.declared_partitions == old_partitions:
                    topic.partitions = topic.declared_partitions = settings.num_partitions
            for table in self.tables.values():
                if table.declared_partitions is None:
                    table.resize(settings.num_partitions)

    @property
    def state_dir(self) -> Path:
        """Where the app's local stores live (``state.dir``, default ``{data_dir}/state``)."""
        return self.settings.state_dir or self.data_dir / "state"

    # -- declarations --------------------------------------------------------------------

    def topic(self, name: str, *, key_type: Any = str, value_type: Any = None,
              partitions: int | None = None, config: dict[str, str] | None = None,
              timestamp: TimestampExtractor | None = None, partitioner: str | None = None) -> Topic:
        """Declare a topic (the same name returns the same Topic). ``timestamp``: the event
        time of each record, ``fn(event) -> int`` milliseconds (default: the record timestamp).
        ``partitioner``: how its producers place keyed records (``murmur2``,
        ``consistent_random``, ``fnv1a``); detected from the records when not given."""
        existing = self.topics.get(name)
        if existing is not None:
            return existing
        topic = Topic(self, name, key_type=key_type, value_type=value_type, partitions=partitions,
                      config=config, timestamp=timestamp, partitioner=partitioner)
        self.topics[name] = topic
        return topic

    def repartition_topic(self, name: str, *, key_codec: Codec | None = None,
                          value_codec: Codec | None = None) -> Topic:
        """``{app}-{name}-repartition``, configured as Kafka Streams configures its own: kept
        whatever its records' timestamps (``retention.ms=-1``: a backfill's old event times
        must not expire before the app reads them), and purged by the worker up to what it
        has committed (``repartition.purge.interval.ms``)."""
        return self.internal_topic(f"{name}-repartition", key_codec=key_codec, value_codec=value_codec,
                                   config=dict(REPARTITION_TOPIC_CONFIG))

    def internal_topic(self, suffix: str, *, key_type: Any = None, value_type: Any = None,
                       key_codec: Codec | None = None, value_codec: Codec | None = None,
                       config: dict[str, str] | None = None) -> Topic:
        """A topic the app owns, named ``{application.id}-{suffix}`` (created at start with
        the app's ``num.partitions``)."""
        name = self.settings.internal_topic(suffix)
        existing = self.topics.get(name)
        if existing is not None:
            return existing
        from streamkit.streams.codecs import BytesCodec

        topic = Topic(self, name, key_type=key_type, value_type=value_type,
                      partitions=self.settings.num_partitions, config=config, internal=True,
                      key_codec=key_codec or BytesCodec(), value_codec=value_codec)
        self.topics[name] = topic
        return topic

    def agent(self, topic: Topic | str, *, name: str | None = None, concurrency: int = 1) -> Callable[[AgentFn], Agent]:
        """Register an async stream function over ``topic``."""
        source = topic if isinstance(topic, Topic) else self.topic(topic)

        def register(fn: AgentFn) -> Agent:
            agent_name = name or fn.__name__
            if agent_name in self.agents:
                raise ValueError(f"an agent named {agent_name!r} already exists")
            agent = Agent(self, fn, source, name=agent_name, concurrency=concurrency)
            self.agents[agent_name] = agent
            return agent

        return register

    def timer(self, interval: float | timedelta, *, name: str | None = None) -> Callable[[TimerFn], TimerFn]:
        """Run ``fn`` every ``interval`` seconds on every worker."""
        ms = _interval_ms(interval)

        def register(fn: TimerFn) -> TimerFn:
            self.timers.append((ms, fn, name or fn.__name__))
            return fn

        return register

    def Table(self, name: str, *, default: Callable[[], Any] | None = None, key_type: Any = None,
              value_type: Any = None, partitions: int | None = None, store: str = "rocksdb") -> Table:
        """A partitioned table backed by a local store and a compacted changelog topic.

        ``partitions``: as many as the topic that updates it (task p owns input partition p
        and table partition p). Left out, the worker takes the partition count of the topic
        its agents read (or ``num.partitions``, when they read several of different counts);
        a table whose count differs from its input's is refused at start."""
        from streamkit.streams.table import Table

        if name in self.tables:
            raise ValueError(f"a table named {name!r} already exists")
        table = Table(self, name, default=default, key_type=key_type, value_type=value_type,
                      partitions=partitions or self.settings.num_partitions, store=store)
        table.declared_partitions = partitions
        self.tables[name] = table
        return table

    def GlobalTable(self, name: str, *, default: Callable[[], Any] | None = None, key_type: Any = None,
                    value_type: Any = None, partitions: int | None = None, store: str = "rocksdb") -> GlobalTable:
        """A table every worker holds completely (it reads all changelog partitions)."""
        from streamkit.streams.table import GlobalTable

        if name in self.tables:
            raise ValueError(f"a table named {name!r} already exists")
        table = GlobalTable(self, name, default=default, key_type=key_type, value_type=value_type,
                            partitions=partitions or self.settings.num_partitions, store=store)
        table.declared_partitions = partitions
        self.tables[name] = table
        return table

    def stream(self, topic: Topic | str) -> StreamNode:
        """Start a declarative pipeline over ``topic`` (see ``streamkit.streams.dsl``)."""
        from streamkit.streams.dsl import source

        src = topic if isinstance(topic, Topic) else self.topic(topic)
        return source(self, src)

    # -- running -------------------------------------------------------------------------

    def require_runtime(self) -> Runtime:
        """The running worker of this app; ``AppNotRunning`` if there is none."""
        if self.runtime is None:
            raise AppNotRunning(f"app {self.id!r} is not running: start it with `streamkit worker` or `await app.start()`")
        return self.runtime

    async def start(self, *, broker: str | None = None, web_port: int | None = None) -> Runtime:
        """Start a worker for this app in the running event loop (tests, notebooks)."""
        from streamkit.streams.runtime import Runtime

        runtime = Runtime(self, broker=broker or self.broker, web_port=web_port)
        await runtime.start()
        return runtime

    async def stop(self) -> None:
        """Stop the worker ``start`` started: commit, close tasks, leave the group."""
        if self.runtime is not None:
            await self.runtime.stop()
