"""Runtime: one worker of an app. It consumes, routes records to agents and DSL pipelines,
keeps tables, commits, and follows rebalances.

Lifecycle (``start``):

1. Connect to the broker, or start an embedded one when the app names none.
2. Start the agent functions and let each run up to its first read, so that ``group_by``
   calls have declared their repartition topics.
3. Create the topics the app needs (declared, repartition, compacted changelogs).
4. Start following the changelogs of global tables, and wait until they have caught up
   (``wait_global_tables``): processing never starts with a partial global table.
5. Join the consumer group (the app id) with streamkit's task assignor
   (``streams.assignor``): task *p* is partition *p* of every input topic and of every
   table, so the worker that is assigned it reads those inputs and owns those table
   partitions and their changelog partitions. With ``num.standby.replicas`` > 0 the
   assignment also names standby tasks, whose table partitions this worker keeps warm by
   following their changelogs (``streams.follower``).
6. Consume in batches; restore table partitions from their changelogs when assigned
   (their input partitions stay paused until restored; a standby replays only the tail);
   commit every ``commit.interval.ms``, and earlier when the tables' write caches hold more
   than ``statestore.cache.max.bytes``.

Everything the worker produces goes through its ``RecordCollector`` (``streams.collector``):
one producer under at-least-once, one transactional producer per task under exactly-once.

Commit: take the routing lock, close the processing gate (every agent parks between
events), produce each table partition's net changes to its changelog, flush the producers
and check the delivery of every record produced since the last commit (outputs,
repartitioned records, dead letters, changelogs: a failed one fails the worker before
anything is committed). At-least-once: commit each store transaction with its changelog
offset, then the consumer offsets of acknowledged events; a crash anywhere re-processes from
the last committed offsets, so effects may repeat, never vanish. Exactly-once: commit each
task's Kafka transaction with its input offsets first, then the store transactions; a crash
before the Kafka commit aborts everything since the last one, and the stores never hold
what was not committed.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from aiokafka import AIOKafkaConsumer
from aiokafka.abc import ConsumerRebalanceListener
from aiokafka.admin import AIOKafkaAdminClient, NewTopic, RecordsToDelete
from aiokafka.errors import (
    AuthenticationFailedError,
    KafkaConnectionError,
    KafkaError,
    SaslAuthenticationFailed,
    TopicAlreadyExistsError,
    UnsupportedSaslMechanismError,
)
from aiokafka.structs import TopicPartition

from streamkit import logfmt
from streamkit.clients.errors import BrokerUnreachable
from streamkit.clients.lifecycle import reporting_unreachable, unreachable
from streamkit.clients.security import login_refused
from streamkit.streams.agent import SKIPPED, Agent, AgentStream
from streamkit.streams.assignor import StreamsAssignor
from streamkit.streams.changelog import ChangelogReader
from streamkit.streams.clients import start_client, stop_client
from streamkit.streams.codecs import CodecError
from streamkit.streams.collector import (
    DeliveryError,
    RecordCollector,
    TaskMigratedError,
    task_scope,
)
from streamkit.streams.event import Event
from streamkit.streams.fetching import FetchedRecord, yield_parsed_records
from streamkit.streams.gate import AckTracker, ProcessingGate
from streamkit.streams.metrics import Metrics
from streamkit.streams.ordering import Alignment, by_timestamp
from streamkit.streams.partitioners import PartitionerDetector
from streamkit.streams.processing import LateLog, Out
from streamkit.streams.progress import ProgressReporter
from streamkit.streams.progress import Task as ProgressTask
from streamkit.streams.records import CurrentRecord, DecodedRecords, Placed
from streamkit.streams.settings import SettingsError
from streamkit.streams.table import WindowedTable
from streamkit.streams.task_manager import TaskManager
from streamkit.streams.topic import Topic
from streamkit.streams.watermarks import carries_data
from streamkit.streams.windows import MIN_TIMESTAMP
from streamkit.tasks import cancel_and_wait

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable
    from pathlib import Path

    from streamkit.broker.server import Broker
    from streamkit.streams.dsl import StreamNode
    from streamkit.streams.inbox import RecordInbox
    from streamkit.streams.pipeline import CompiledSource
    from streamkit.streams.settings import AppSettings
    from streamkit.streams.table import Table


class App(Protocol):
    """What the runtime needs of the app it runs: what it declared (topics, tables, agents,
    timers, DSL sinks), its settings and directories; ``runtime`` is set while it runs."""

    runtime: Runtime | None

    @property
    def id(self) -> str: ...

    @property
    def settings(self) -> AppSettings: ...

    @property
    def data_dir(self) -> Path: ...

    @property
    def state_dir(self) -> Path: ...

    @property
    def topics(self) -> dict[str, Topic]: ...

    @property
    def tables(self) -> dict[str, Table]: ...

    @property
    def agents(self) -> dict[str, Agent]: ...

    @property
    def timers(self) -> list[tuple[int, Callable[[], Awaitable[None]], str]]: ...

    @property
    def streams(self) -> list[StreamNode]: ...

    def topic(self, *args: Any, **kwargs: Any) -> Topic: ...

    def internal_topic(self, *args: Any, **kwargs: Any) -> Topic: ...

    def repartition_topic(self, name: str, *args: Any, **kwargs: Any) -> Topic: ...

    def Table(self, *args: Any, **kwargs: Any) -> Table: ...

__all__ = ["BadRecordError", "DeliveryError", "Runtime", "StartupError"]

log = logging.getLogger(__name__)

TP = tuple[str, int]

# A worker this many records behind its inputs reports its progress until it has caught up.
CATCH_UP_MIN_LAG = 10_000
# A worker that has no assignment this long after subscribing says what it waits for.
GROUP_WAIT_LOG_MS = 3000
# How often the lag is looked at for catch-up progress.
LAG_CHECK_MS = 1000


# What a client's start raises when the broker refuses its SASL login.
_AUTHENTICATION_ERRORS = (SaslAuthenticationFailed, UnsupportedSaslMechanismError, AuthenticationFailedError)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]


class StartupError(RuntimeError):
    """The worker could not start (unreachable broker, bad topology); one-line message."""


class BadRecordError(StartupError):
    """A record that cannot be deserialized, with ``deserialization.exception.handler=fail``;
    the message says how to skip it."""


def tables_used(fn: Any, tables: Iterable[Table]) -> list[Table]:
    """The tables among ``tables`` that ``fn`` names: its globals, closure cells, and those
    of the functions and comprehensions defined in it (windowed views count as their table)."""
    by_id = {id(t): t for t in tables}
    found: dict[int, Table] = {}

    def note(obj: Any) -> None:
        table = obj.table if isinstance(obj, WindowedTable) else obj
        if id(table) in by_id:
            found[id(table)] = by_id[id(table)]

    code_objects = [getattr(fn, "__code__", None)]
    scope = getattr(fn, "__globals__", {})
    for cell in getattr(fn, "__closure__", None) or ():
        with contextlib.suppress(ValueError):
            note(cell.cell_contents)
    while code_objects:
        code = code_objects.pop()
        if code is None:
            continue
        for name in code.co_names:
            if name in scope:
                note(scope[name])
        code_objects.extend(c for c in code.co_consts if hasattr(c, "co_names"))
    return list(found.values())


class _Listener(ConsumerRebalanceListener):  # type: ignore[misc]
    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime

    async def on_partitions_revoked(self, revoked: Sequence[TopicPartition]) -> None:
        await self.runtime.on_revoked({(tp.topic, tp.partition) for tp in revoked})

    async def on_partitions_assigned(self, assigned: Sequence[TopicPartition]) -> None:
        await self.runtime.on_assigned({(tp.topic, tp.partition) for tp in assigned})


def _is_repartition(topic: Topic | None) -> bool:
    return topic is not None and topic.internal and topic.name.endswith("-repartition")


class Runtime:
    def __init__(self, app: App, *, broker: str | None = None, web_port: int | None = None) -> None:
        self.app = app
        self.settings = app.settings
        self.bootstrap = broker
        # aiokafka's security arguments (security.protocol, sasl.*, ssl.*) for every client.
        self.client_security: dict[str, Any] = {}
        self.web_port = web_port if web_port is not None else self.settings.web_port
        self.gate = ProcessingGate()
        self.acks = AckTracker()
        self.metrics = Metrics()
        self.late_log = LateLog(self.clock)
        self.progress = ProgressReporter()
        self._catch_up: ProgressTask | None = None
        self._next_lag_check = 0.0
        self._joined = False
        self.assigned: set[TP] = set()
        self._lock = asyncio.Lock()
        self._broker: Broker | None = None
        self.collector: RecordCollector | None = None
        self._consumer: AIOKafkaConsumer | None = None
        self._agent_tasks: list[asyncio.Task[None]] = []
        self._tasks: list[asyncio.Task[None]] = []
        self.tasks = TaskManager(lambda: self.app.tables.values(), app_id=app.id, bootstrap=lambda: self.bootstrap,
                                 security=lambda: self.client_security,
                                 read_committed=self.settings.exactly_once, on_failure=self._fail)
        # Reads of committed offsets for lag: stop() ends them before closing the consumer;
        # one still retrying afterwards reconnected through the closed client and leaked.
        self._lookups: set[asyncio.Task[None]] = set()
        self._agent_readers: dict[str, list[AgentStream]] = {}
        self._forwarders: dict[str, list[AgentStream]] = {}
        self._pipelines: dict[str, list[CompiledSource]] = {}
        self._last_commit = time.monotonic()
        self._committed: dict[TP, int] = {}
        # Per input partition: the offset after the last record routed.
        self._routed_end: dict[TP, int] = {}
        # Per consumed topic: how its producers place keyed records (declared or detected).
        self._partitioning: dict[str, PartitionerDetector] = {}
        # (topic, is_key, id of the codec) that _prepare_codecs prepared
        self._prepared: set[tuple[str, bool, int]] = set()
        self._announced_idle: set[TP] = set()
        self._purged: dict[TP, int] = {}
        self._last_purge = time.monotonic()
        self._admin: AIOKafkaAdminClient | None = None
        # max.task.idle.ms > 0: input partitions ahead of the slowest lagging one are paused.
        self._alignment: Alignment[TP] | None = (
            Alignment(self.settings.max_task_idle_ms) if self.settings.max_task_idle_ms > 0 else None)
        self._assignor = StreamsAssignor(
            standby_replicas=self.settings.num_standby_replicas,
            stateful_tasks=lambda: max((t.partitions for t in self.tasks.local_tables()), default=0),
            local_tasks=self.tasks.local_tasks)
        self.global_tables_ready = asyncio.Event()
        self._background: set[asyncio.Future[Any]] = set()
        self._stopping = False
        self.failure: BaseException | None = None
        self.stopped = asyncio.Event()
        self.web: Any = None

    # -- start ---------------------------------------------------------------------------

    async def start(self) -> None:
        try:
            await self._start()
        except BaseException as exc:
            # A refused start (a topology that is not co-partitioned, an agent failing at once,
            # an unreachable broker) must not leave the producer, the stores, the agent tasks
            # or an embedded broker running, nor app.runtime set: they leaked before.
            if self.failure is None:
                self.failure = exc
            with contextlib.suppress(Exception):
                await self.stop()
            raise

    async def _start(self) -> None:
        app = self.app
        if self.bootstrap is None:
            await self._start_embedded_broker()
        else:
            try:
                self.client_security = self.settings.client_security()
            except SettingsError as exc:
                raise StartupError(str(exc)) from None
        assert self.bootstrap is not None
        app.runtime = self
        self.collector = RecordCollector(self.bootstrap, self.settings, state_dir=app.state_dir,
                                         security=self.client_security)
        await self.collector.start(self._connect)
        for table in app.tables.values():
            table.attach(self)
        await self._prepare_codecs()
        self._start_agents()
        await self._wait_for_agents()
        # the repartition topics of the agents' group_by exist now: their subjects too
        await self._prepare_codecs()
        # Topics first: compiling the pipelines checks co-partitioning, which needs the
        # partition counts of topics that already existed (known only once described).
        # Compiled before, a join over an existing topic of another partition count started,
        # and then failed record by record ("state ... has no partition N").
        await self._create_topics()
        self._check_partition_counts()
        for table in app.tables.values():
            await table.start_global()
        self._build_routes()
        client_id = f"{app.id}-consumer"
        if self.web_port is not None:
            from streamkit.streams.web import WebServer, advertised_client_id

            self.web = WebServer(self, self.web_port)
            try:
                await self.web.start()
            except SettingsError as exc:  # a web.ssl.* or users file that cannot be used
                raise StartupError(str(exc)) from None
            client_id = advertised_client_id(app.id, self.web.host, self.web.port)
        topics = sorted(set(self._agent_readers) | set(self._forwarders) | set(self._pipelines))
        # An app with nothing to consume (only timers, say) joins no group: subscribing to
        # no topics is refused by the client, which made such an app fail to start.
        if topics:
            self._consumer = AIOKafkaConsumer(
                bootstrap_servers=self.bootstrap, group_id=app.id, client_id=client_id, **self.client_security,
                enable_auto_commit=False, auto_offset_reset=self.settings.auto_offset_reset,
                partition_assignment_strategy=(self._assignor,),
                session_timeout_ms=self.settings.session_timeout_ms,
                heartbeat_interval_ms=min(self.settings.heartbeat_interval_ms, self.settings.session_timeout_ms // 3),
                max_poll_interval_ms=self.settings.max_poll_interval_ms,
                max_poll_records=self.settings.max_poll_records,
                fetch_max_bytes=50 << 20, max_partition_fetch_bytes=4 << 20,
                # read_committed (always under exactly-once): inputs written in transactions
                # (repartition topics, other apps' outputs) are read once committed, and never
                # when aborted.
                isolation_level=self.settings.isolation_level,
            )
            await self._connect(self._consumer.start)
            # getmany then returns aiokafka's parsed records, not a FetchedRecord per record.
            yield_parsed_records(self._consumer)
        await self.wait_global_tables()
        if self._consumer is not None:
            self._consumer.subscribe(topics, listener=_Listener(self))
            self._tasks.append(asyncio.create_task(self._consume_loop(), name="streamkit-consume"))
            self._tasks.append(asyncio.create_task(self._announce_group_wait(), name="streamkit-group-wait"))
        for interval_ms, fn, name in app.timers:
            self._tasks.append(asyncio.create_task(self._timer(interval_ms, fn, name), name=f"timer-{name}"))
        log.info("app %s running against %s (topics: %s)", app.id, self.bootstrap, ", ".join(topics))

    async def _announce_group_wait(self) -> None:
        """Say what the worker waits for while its group has not assigned it anything: a
        new group's first rebalance is held back by the broker's
        group.initial.rebalance.delay.ms, and a rebalance waits for every member to rejoin."""
        waited_ms = 0
        delay_ms = GROUP_WAIT_LOG_MS
        while not self._joined:
            await asyncio.sleep(delay_ms / 1000)
            waited_ms += delay_ms
            if self._joined or self._stopping:
                return
            log.info("waiting for consumer group %s to assign partitions (%.0fs so far): the broker delays a new "
                     "group's first rebalance by group.initial.rebalance.delay.ms, and a rebalance waits for "
                     "members that are joining or leaving", self.app.id, waited_ms / 1000)
            delay_ms = 10_000

    def _report_lag(self) -> None:
        """Progress of a long catch-up: while the worker is at least CATCH_UP_MIN_LAG records
        behind, a bar on a terminal or a log line every progress.LOG_INTERVAL_MS."""
        now = time.monotonic()
        if now < self._next_lag_check:
            return
        self._next_lag_check = now + LAG_CHECK_MS / 1000
        behind = sum(self.lag().values())
        task = self._catch_up
        if task is None:
            if behind >= CATCH_UP_MIN_LAG:
                self._catch_up = self.progress.start(f"catching up ({self.app.id})", behind)
            return
        if behind < CATCH_UP_MIN_LAG // 10:
            task.finish()
            self._catch_up = None
            log.info("caught up: %d records behind after %.0fs", behind, now - task.started)
            return
        task.total = max(task.total, task.done + behind)
        task.set_done(task.total - behind)

    async def wait_global_tables(self) -> None:
        """Wait until every GlobalTable has applied its changelog up to the end offsets it
        had when this was called; ``start()`` does it before processing begins, and sets
        ``global_tables_ready``."""
        for table in self.app.tables.values():
            if table.is_global:
                await table.wait_caught_up()
        self.global_tables_ready.set()

    async def _connect(self, start: Any) -> None:
        """Start a client, retrying with a message while the broker is unreachable, for
        ``bootstrap.timeout.ms``."""
        timeout_ms = self.settings.bootstrap_timeout_ms
        deadline = time.monotonic() + timeout_ms / 1000
        delay = 0.5
        while True:
            try:
                with reporting_unreachable():
                    await start()
                return
            except _AUTHENTICATION_ERRORS as exc:
                # A refused login does not get better by retrying: one line, at once.
                raise StartupError(self._login_error(_first_line(exc))) from None
            except KafkaConnectionError as exc:
                if self.client_security and self.bootstrap is not None:
                    refused = await login_refused(self.bootstrap, self.client_security)
                    if refused is not None:
                        raise StartupError(self._login_error(refused)) from None
                error: Exception = exc
                if not isinstance(exc, BrokerUnreachable) and self.bootstrap is not None:
                    error = await unreachable(self.bootstrap)  # a client's own start() says less
                left = deadline - time.monotonic()
                if left <= 0:
                    raise StartupError(f"{error}; gave up after bootstrap.timeout.ms={timeout_ms}") from None
                log.warning("%s; retrying in %.1fs", error, min(delay, left))
                await asyncio.sleep(min(delay, left))
                delay = min(delay * 2, 5.0)

    def _login_error(self, reason: str) -> str:
        s = self.settings
        who = f" as {s.sasl_username} ({s.sasl_mechanism})" if s.security_protocol.startswith("SASL_") else ""
        return f"cannot connect to {self.bootstrap} over {s.security_protocol}{who}: {reason}"

    async def _start_embedded_broker(self) -> None:
        from streamkit.broker.config import BrokerConfig
        from streamkit.broker.server import Broker

        config = BrokerConfig.from_kafka({"group.initial.rebalance.delay.ms": "0",
                                          "num.partitions": str(self.settings.num_partitions)})
        self._broker = Broker(self.app.data_dir / "broker", config, "127.0.0.1", 0)
        await self._broker.start()
        self.bootstrap = self._broker.bootstrap
        log.info("started an embedded broker on %s (data in %s)", self.bootstrap, self.app.data_dir / "broker")

    def _start_agents(self) -> None:
        for agent in self.app.agents.values():
            for stream in agent.new_streams():
                stream.runtime = self
                task = asyncio.create_task(self._run_agent(agent, stream), name=f"agent-{agent.name}-{stream.instance}")
                self._agent_tasks.append(task)

    async def _run_agent(self, agent: Agent, stream: AgentStream) -> None:
        try:
            await agent(stream)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.exception("agent %s failed; stopping the worker", agent.name)
            self.failure = exc
            stream.release()
            # Unblocks _wait_for_agents at once when this happens before the first read: it
            # then reports the agent's error instead of waiting 10 s for a read that never
            # comes and blaming a slow start.
            stream.reading.set()
            self._spawn(self.stop())
            return
        stream.release()
        stream.reading.set()

    async def _wait_for_agents(self) -> None:
        streams = [s for a in self.app.agents.values() for s in a.streams]
        if not streams:
            return
        waits = [asyncio.ensure_future(s.reading.wait()) for s in streams]
        _done, pending = await asyncio.wait(waits, timeout=10)
        for w in pending:
            w.cancel()
        if pending:
            names = sorted({s.agent.name for s in streams if not s.reading.is_set()})
            raise StartupError(f"agents {', '.join(names)} did not start reading their stream within 10 s")
        if self.failure is not None:
            raise StartupError(f"an agent failed at start: {self.failure!r}")

    def _build_routes(self) -> None:
        for agent in self.app.agents.values():
            for stream in agent.streams:
                if stream.repartition is not None:
                    self._forwarders.setdefault(stream.source.name, [])
                    if stream.instance == 0:
                        self._forwarders[stream.source.name].append(stream)
                self._agent_readers.setdefault(stream.reads_from.name, [])
                if stream.instance == 0:
                    self._agent_readers[stream.reads_from.name].append(stream)
        if self.app.streams:
            from streamkit.streams.pipeline import compile_pipelines

            for compiled in compile_pipelines(self.app, self):
                self._pipelines.setdefault(compiled.topic.name, []).append(compiled)

    async def _prepare_codecs(self) -> None:
        """Codecs that need a service before the first record (a Schema Registry serde
        registers its schema, and refuses the start if the registry refuses it):
        ``prepare(topic, is_key)``, off the event loop. A table's codecs write its
        changelog, so they are prepared for the changelog topic (its subjects). Each codec
        once per topic: called again after the agents declared their streams, it prepares the
        repartition topics ``group_by`` added, under their own subjects as Kafka Streams'
        registry serdes register them (``TopicNameStrategy``)."""
        uses = [(topic.name, topic.key_codec, topic.value_codec) for topic in self.app.topics.values()]
        uses += [(table.changelog.name, table.key_codec, table.value_codec) for table in self.app.tables.values()]
        for name, key_codec, value_codec in uses:
            for codec, is_key in ((key_codec, True), (value_codec, False)):
                inner = getattr(codec, "codec", codec)  # a UserCodec wraps the user's object
                prepare = getattr(inner, "prepare", None)
                if callable(prepare) and (name, is_key, id(inner)) not in self._prepared:
                    await asyncio.to_thread(prepare, name, is_key)
                    self._prepared.add((name, is_key, id(inner)))

    async def _create_topics(self) -> None:
        admin = AIOKafkaAdminClient(bootstrap_servers=self.bootstrap, client_id=f"{self.app.id}-admin",
                                    **self.client_security)
        try:
            await self._connect(functools.partial(start_client, admin))
            existing = set(await admin.list_topics())
            # Partition counts first: tables size themselves after the topics that update
            # them before their changelogs are created.
            known = [t.name for t in self.app.topics.values() if t.name in existing]
            self._note_partitions(await admin.describe_topics(known) if known else [], warn=True)
            for topic in self.app.topics.values():
                if topic.name not in existing and topic.partitions is None:
                    topic.partitions = self.settings.num_partitions
            self._size_tables()
            wanted = []
            for topic in self.app.topics.values():
                if topic.name in existing:
                    continue
                wanted.append(NewTopic(topic.name, topic.partitions, self.settings.replication_factor,
                                       topic_configs=topic.config))
            # Error topics too: they were left to the broker's auto-creation, which Apache
            # Kafka clusters commonly disable (the first bad record then failed the worker).
            for name in {self.settings.dead_letter_topic_name, self.settings.late_records_topic} - {None}:
                if name is not None and name not in existing and name not in self.app.topics:
                    wanted.append(NewTopic(name, self.settings.num_partitions, self.settings.replication_factor))
            if wanted:
                with contextlib.suppress(TopicAlreadyExistsError):
                    await admin.create_topics(wanted)
            # Again, for the topics just created (or created by someone else meanwhile).
            described = await admin.describe_topics([t.name for t in self.app.topics.values()])
            self._note_partitions(described, warn=False)
            self._check_changelogs({d["topic"]: len(d["partitions"]) for d in described if not d["error_code"]})
        finally:
            await stop_client(admin)

    def _note_partitions(self, described: list[dict[str, Any]], *, warn: bool) -> None:
        """Take the partition counts of existing topics; warn where a declaration differs."""
        for d in described:
            declared = self.app.topics.get(d["topic"])
            if d["error_code"] or declared is None:
                continue
            count = len(d["partitions"])
            if (warn and not declared.internal and declared.declared_partitions is not None
                    and declared.declared_partitions != count):
                log.warning("topic %s has %d partitions, not the %d the app declares; the app uses %d (declaring "
                            "a count does not change an existing topic)", declared.name, count,
                            declared.declared_partitions, count)
            declared.partitions = count

    def _size_tables(self) -> None:
        """A table declared without ``partitions`` takes the partition count of the topic
        its agents read, when they all read topics of one count (task p owns input partition
        p and table partition p, so the counts must match)."""
        wanted: dict[int, set[int]] = {}
        for agent in self.app.agents.values():
            topic = agent.streams[0].reads_from if agent.streams else agent.topic
            if topic.partitions is None:
                continue
            for table in tables_used(agent.fn, self.tasks.local_tables()):
                wanted.setdefault(id(table), set()).add(topic.partitions)
        for table in self.tasks.local_tables():
            counts = wanted.get(id(table), set())
            if table.declared_partitions is None and len(counts) == 1:
                table.resize(counts.pop())

    def _check_changelogs(self, counts: dict[str, int]) -> None:
        """A table partition mirrors the changelog partition of the same number: a changelog
        that exists with another partition count than its table's cannot be used."""
        for table in self.tasks.local_tables():
            count = counts.get(table.changelog.name)
            if count is not None and count != table.partitions:
                raise StartupError(
                    f"table {table.name!r} has {table.partitions} partitions but its changelog topic "
                    f"{table.changelog.name!r} has {count}: declare app.Table({table.name!r}, partitions={count}), "
                    f"or start the table over: stop every worker, delete the topic ({table.changelog.name}) and "
                    f"the table's local state ({self.app.state_dir / self.app.id / table.name})")

    def _check_partition_counts(self) -> None:
        """Refuse at start an agent that updates a table with another partition count than
        its input's: every record of a partition beyond the table's (or a lookup over the
        wrong count) would fail. Tables are found among the names the agent function uses;
        one reached otherwise is checked at its first use (``Table._new_source``)."""
        from streamkit.streams.table import partition_count_message

        for agent in self.app.agents.values():
            topic = agent.streams[0].reads_from if agent.streams else agent.topic
            count = topic.partitions
            if count is None:
                continue
            for table in tables_used(agent.fn, self.app.tables.values()):
                if not table.is_global and table.partitions != count:
                    raise StartupError(partition_count_message(table, topic.name, count, agent.name))

    # -- consuming -----------------------------------------------------------------------

    async def _consume_loop(self) -> None:
        consumer = self._consumer
        assert consumer is not None
        interval = self.settings.commit_interval_ms / 1000
        try:
            while not self._stopping:
                batch = await consumer.getmany(timeout_ms=min(100, self.settings.commit_interval_ms))
                if batch:
                    async with self._lock:
                        await self._wake_idle_inputs(batch)
                        # Lowest timestamp first, in slices (streamkit.streams.ordering).
                        for tp, records in by_timestamp(batch):
                            await self._route(tp.topic, tp.partition, list(records))
                if self._alignment is not None:
                    await self._align()
                if self.settings.window_idle_close_ms and not any(tp.topic in self._pipelines for tp in batch):
                    # Pipelines tick after each of their batches; with none, idle partitions'
                    # windows would never close by wall clock (an app whose input stopped
                    # altogether never emitted its last windows).
                    await self._tick_pipelines()
                if time.monotonic() - self._last_commit >= interval or self._cache_full():
                    async with self._lock:
                        await self._mark_idle_inputs()
                    await self.commit()
                    await self._purge_repartitions()
                self._report_lag()
                self.late_log.flush()
                for table in self.app.tables.values():
                    table.tick(self.clock())
        except asyncio.CancelledError:
            raise
        except DeliveryError as exc:
            self._fail(exc)
        except Exception as exc:
            log.exception("the consume loop failed; stopping the worker")
            self._fail(exc)

    def _fail(self, exc: BaseException) -> None:
        if isinstance(exc, DeliveryError):
            log.error("%s", exc)  # the message says it all; a traceback would bury it
        if self.failure is None:
            self.failure = exc
        self._spawn(self.stop())

    def _cache_full(self) -> bool:
        """Whether the tables' write caches hold more than statestore.cache.max.bytes:
        committing then empties them (into the stores and changelogs). Writing the cache to
        the store without a commit would put state in the store that neither the changelog
        nor the committed input offsets account for."""
        limit = self.settings.cache_max_bytes_buffering
        total = 0
        for table in self.tasks.local_tables():
            total += table.cache_bytes()
            if total > limit:
                return True
        return False

    async def _tick_pipelines(self) -> None:
        async with self._lock:
            ticked: set[int] = set()
            for compiled in (c for sources in self._pipelines.values() for c in sources):
                if id(compiled.tickers) not in ticked:  # sources of one graph share their tickers
                    ticked.add(id(compiled.tickers))
                    await compiled.tick()

    def lag(self) -> dict[TP, int]:
        """Per assigned partition: the last known end offset minus the committed offset (the
        group's, read when the partition was assigned, or a newer one of this worker)."""
        consumer = self._consumer
        out: dict[TP, int] = {}
        if consumer is None:
            return out
        for tp in sorted(self.assigned):
            committed = self._committed.get(tp)
            high = consumer.highwater(TopicPartition(*tp))
            if high is not None and committed is not None:
                out[tp] = max(high - committed, 0)
        return out

    def stream_times(self) -> dict[tuple[str, int], tuple[int, int]]:
        """Per stateful DSL operator and owned partition: (stream time, lag behind its
        furthest input), for /metrics."""
        out: dict[tuple[str, int], tuple[int, int]] = {}
        seen: set[int] = set()
        for compiled in (c for sources in self._pipelines.values() for c in sources):
            ctx = compiled.ctx
            if id(ctx) in seen:
                continue
            seen.add(id(ctx))
            for operator in ctx.operators:
                for partition in sorted({p for _t, p in self.assigned}):
                    reported = operator.stream_time(partition)
                    if reported is not None:
                        out[(operator.name, partition)] = reported
        return out

    async def _align(self) -> None:
        """Pause the DSL's input partitions that run ahead of the slowest one with records
        left to read, and resume them as it catches up (``ordering.Alignment``): a backfill
        then moves all partitions' event time together, so windows downstream close steadily
        instead of staying open until the last partition is read."""
        consumer, alignment = self._consumer, self._alignment
        if consumer is None or alignment is None:
            return
        watermarks: dict[TP, int] = {}
        lagging: set[TP] = set()
        for topic, sources in self._pipelines.items():
            external = [c for c in sources if not c.stamped]
            if not external:
                continue
            clocks = external[0].ctx.clocks
            for t, p in self.assigned:
                if t != topic:
                    continue
                clock = clocks.get((t, p))
                watermarks[(t, p)] = clock.marks.get(0, MIN_TIMESTAMP) if clock is not None else MIN_TIMESTAMP
                tp = TopicPartition(t, p)
                high = consumer.highwater(tp)
                if high is None or await consumer.position(tp) < high:
                    lagging.add((t, p))
        pause, resume = alignment.update(watermarks, lagging, self.clock())
        if pause:
            consumer.pause(*(TopicPartition(*tp) for tp in sorted(pause)))
            self.metrics.alignment_pauses += len(pause)
        resume = {tp for tp in resume if tp[1] not in self.tasks.restores and tp in self.assigned}
        if resume:
            consumer.resume(*(TopicPartition(*tp) for tp in sorted(resume)))
        self.metrics.paused_for_alignment = len(alignment.paused)

    async def _mark_idle_inputs(self) -> None:
        """Partitions of a pipeline's external topics that never had a record and are read to
        their end say so downstream, so repartition topics' stream time is the minimum of
        the partitions that have data (Flink's idle sources)."""
        consumer = self._consumer
        if consumer is None:
            return
        for topic, sources in self._pipelines.items():
            for compiled in sources:
                if compiled.stamped or not compiled.ctx.stampers.get(topic):
                    continue
                for t, p in sorted(self.assigned):
                    if t != topic or (t, p) in self._announced_idle:
                        continue
                    clock = compiled.ctx.clocks.get((t, p))
                    if clock is not None and clock.marks:
                        continue
                    tp = TopicPartition(t, p)
                    high = consumer.highwater(tp)
                    if high is None or await consumer.position(tp) < high:
                        continue
                    self._announced_idle.add((t, p))
                    compiled.ctx.partition = p
                    compiled.ctx.topic = t
                    compiled.mark_idle(p)
                    await compiled.flush()

    async def _wake_idle_inputs(self, batch: Mapping[TopicPartition, Sequence[FetchedRecord]]) -> None:
        """Partitions announced idle (``_mark_idle_inputs``) that have data now, in this
        batch or on the broker past the position (an open transaction's, under
        read_committed), say so downstream before any record of the batch is routed.

        Under exactly-once the batch's records of different tasks reach downstream
        partitions in separate transactions, visible in any order: the wake-up goes into
        the transaction of every task this worker owns, ahead of their records, so that
        no record of the batch can close a window while a woken partition still counts as
        idle (its records, of the same batch, would come out late)."""
        if not self._announced_idle:
            return
        consumer = self._consumer
        assert consumer is not None
        woken: list[TP] = []
        for t, p in sorted(self._announced_idle):
            tp = TopicPartition(t, p)
            if tp not in batch:
                high = consumer.highwater(tp)
                if high is None or await consumer.position(tp) >= high:
                    continue
            woken.append((t, p))
        if not woken:
            return
        collector = self._records
        for t, p in woken:
            self._announced_idle.discard((t, p))
            tasks = sorted(collector.tasks) if collector.exactly_once else [p]
            for compiled in self._pipelines.get(t, ()):
                if not compiled.stamped:
                    await compiled.wake(p, tasks)

    def clock(self) -> int:
        return time.time_ns() // 1_000_000

    async def _route(self, topic: str, partition: int, records: list[FetchedRecord]) -> None:
        tp = (topic, partition)
        if tp not in self.assigned:
            return  # revoked while the batch was in flight
        self.metrics.consumed(tp, len(records))
        self._routed_end[tp] = records[-1].offset + 1
        detector = self._partitioning.get(topic) or self.partitioning(topic)
        if not detector.done:
            self._detect(detector, topic, partition, records)
        readers = self._agent_readers.get(topic, ())
        source = self.app.topics[topic]
        decoded = None
        if readers and not self._forwarders.get(topic) and not self._pipelines.get(topic):
            # Read by agents only: the batch's columns, and an event for a record only when
            # something asks for it (``records.DecodedRecords``).
            decoded = source.decoded(records, partition)
        events = self._decode_batch(topic, partition, records) if decoded is None else []
        with task_scope(partition):
            for stream in self._forwarders.get(topic, ()):
                await self._forward(stream, tp, records, events)
            for compiled in self._pipelines.get(topic, ()):
                self.acks.register(compiled, tp)
                await compiled.process(partition, records, events)
                self.acks.ack(compiled, tp, records[-1].offset)
        if not readers:
            return
        for stream in readers:
            self.acks.register(stream.agent, tp)
        if decoded is None:
            # Skipped (or dead-lettered) records are acknowledged through the queue, after the
            # records before them: acking one here, while those still wait in the queue, let a
            # commit include them unprocessed, and a crash then lost them.
            decoded = DecodedRecords.of_events(topic, partition, [
                event if event is not None else Event(None, SKIPPED, record.timestamp, [], topic, partition,
                                                      record.offset)
                for record, event in zip(records, events, strict=True)])
        for stream in readers:
            # the agent is behind when the inbox is full: this waits for room
            await stream.agent.stream_for(partition).inbox.put_records(decoded)

    def partitioning(self, topic: str) -> PartitionerDetector:
        """How ``topic``'s producers place keyed records: declared on the topic
        (``partitioner=``), or detected from the records this worker reads."""
        detector = self._partitioning.get(topic)
        if detector is None:
            declared = self.app.topics.get(topic)
            name = declared.partitioner if declared is not None else None
            detector = PartitionerDetector.declared(name) if name else PartitionerDetector()
            self._partitioning[topic] = detector
        return detector

    def topic_partitions(self, topic: str) -> int | None:
        declared = self.app.topics.get(topic)
        return declared.partitions if declared is not None else None

    def _detect(self, detector: PartitionerDetector, topic: str, partition: int,
                records: list[FetchedRecord]) -> None:
        count = self.topic_partitions(topic) or 0
        for record in records:
            detector.observe(record.key, partition, count)
            if detector.done:
                if detector.unknown:
                    log.info("topic %s: its keyed records are not placed by one known partitioner (explicit "
                             "partitions or several producers); key lookups ask every worker", topic)
                else:
                    log.info("topic %s: keyed records are placed by the %s partitioner", topic, detector.name)
                return

    def _decode_batch(self, topic: str, partition: int, records: list[FetchedRecord]) -> list[Event | None]:
        """The events of a fetched batch, for every reader of ``topic`` (agents, ``group_by``
        forwarders, DSL pipelines): each record is deserialized here, once, so a bad one is
        handled (dead letter, log line, metric, or the stop) once however many read it.
        None for a bad record, and for a repartition topic's watermark-only record (no data)."""
        source, decode = self.app.topics[topic], self.decode
        pipelines = self._pipelines.get(topic, ())
        if (pipelines and all(compiled.decodes for compiled in pipelines) and not self._agent_readers.get(topic)
                and not self._forwarders.get(topic)):
            return []  # read only by columnar pipelines, which decode a batch into columns themselves
        if any(compiled.stamped for compiled in pipelines):
            return [decode(source, r, partition) if carries_data(r.headers) else None for r in records]
        events: list[Event | None] = []
        while True:
            events.extend(source.events(records, partition, len(events)))
            if len(events) == len(records):
                return events
            events.append(decode(source, records[len(events)], partition))  # a bad record: the error policy

    def decode(self, topic: Topic, record: FetchedRecord, partition: int) -> Event | None:
        """Deserialize a record of ``topic``'s ``partition`` with the app's error policy;
        None means skipped."""
        try:
            return topic.event(record.key, record.value, record.timestamp, list(record.headers or ()),
                               partition, record.offset)
        except CodecError as exc:
            self._bad_record(topic.name, partition, record, exc)
            return None

    def _bad_record(self, topic: str, partition: int, record: FetchedRecord, exc: Exception) -> None:
        """A record that cannot be deserialized, by ``deserialization.exception.handler``:
        ``dead_letter`` (the default) copies it to the dead-letter topic, ``skip`` drops it,
        both with a log line; ``fail`` stops the worker with the command that skips it."""
        policy = self.settings.deserialization_error
        where = f"{topic}-{partition}@{record.offset}"
        self.metrics.deserialization_errors += 1
        if policy == "fail":
            raise BadRecordError(
                f"cannot deserialize record {where}: {exc}. The worker stops on it "
                f"(deserialization.exception.handler=fail); to skip it, stop every worker and run "
                f"`streamkit groups reset-offsets {self.app.id} --topic {topic} --partition "
                f"{partition} --to-offset {record.offset + 1} --execute`, or send bad records to a "
                f"dead-letter topic: `--set deserialization.exception.handler=dead_letter`")
        dlq = self.settings.dead_letter_topic_name
        if dlq is None:
            log.warning("skipped record %s, which cannot be deserialized: %s", where, exc)
            return
        log.warning("record %s cannot be deserialized (%s); copied to the dead-letter topic %s", where, exc, dlq)
        cause = exc.__cause__ or exc.__context__ or exc  # the codec's own error, e.g. ValidationError
        # Kafka Streams' dead-letter headers (KIP-1034), after the record's own.
        headers = [*(record.headers or ()),
                   ("__streams.errors.exception", type(cause).__name__.encode()),
                   ("__streams.errors.message", str(exc).encode()),
                   ("__streams.errors.topic", topic.encode()),
                   ("__streams.errors.partition", str(partition).encode()),
                   ("__streams.errors.offset", str(record.offset).encode())]
        self._produce(dlq, record.key, record.value, headers=headers, timestamp=record.timestamp,
                      task=partition)

    async def _forward(self, stream: AgentStream, tp: TP, records: list[FetchedRecord],
                       events: list[Event | None]) -> None:
        """group_by: re-key each record and produce it to the repartition topic."""
        assert stream.key_fn is not None and stream.repartition is not None
        self.acks.register(stream, tp)
        target = stream.repartition
        for record, event in zip(records, events, strict=True):
            if event is not None:
                key = stream.key_fn(event.value)
                # The event time (the extractor's, if the topic has one) travels on as the
                # repartitioned record's timestamp, as in Kafka Streams.
                await self.enqueue(target.name, None if key is None else target.key_codec.dumps(key), record.value,
                                   headers=record.headers, timestamp=event.timestamp)
            self.acks.ack(stream, tp, record.offset)

    def owns(self, event: Placed) -> bool:
        return (event.topic, event.partition) in self.assigned

    def ack(self, stream: AgentStream, event: CurrentRecord, count: int = 1) -> None:
        """``event`` and the ``count - 1`` events of the stream before it are processed."""
        self.acks.ack(stream.agent, (event.topic, event.partition), event.offset)
        self.metrics.processed(count)

    def ack_many(self, stream: AgentStream, events: list[Event]) -> None:
        """Acknowledge a ``take()`` batch: the last offset of each of its partitions."""
        last = {(event.topic, event.partition): event.offset for event in events}
        ack, agent = self.acks.ack, stream.agent
        for tp, offset in last.items():
            ack(agent, tp, offset)
        self.metrics.processed(len(events))

    def batch_clock(self) -> float:
        """The clock of ``take()``'s ``within``: monotonic seconds (the test driver's is virtual)."""
        return time.monotonic()

    async def batch_wait(self, inbox: RecordInbox, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for an event in a ``take()``'s inbox."""
        return await inbox.wait_readable(timeout)

    # -- producing -----------------------------------------------------------------------

    @property
    def _records(self) -> RecordCollector:
        assert self.collector is not None, "the runtime is not started"
        return self.collector

    async def enqueue(self, topic: str, key: bytes | None, value: bytes | None, *, headers: Any = None,
                      timestamp: int | None = None, partition: int | None = None,
                      track: bool = True, task: int | None = None) -> asyncio.Future[Any]:
        """Queue a record (``RecordCollector.enqueue``)."""
        return await self._records.enqueue(topic, key, value, headers=headers, timestamp=timestamp,
                                           partition=partition, track=track, task=task)

    async def enqueue_many(self, records: Sequence[Out]) -> None:
        """Queue a DSL batch's outputs, in order (``RecordCollector.enqueue_many``)."""
        await self._records.enqueue_many(
            (o.topic.name, o.key, o.value, o.timestamp, o.headers, o.partition, o.task) for o in records)

    def _produce(self, topic: str, key: bytes | None, value: bytes | None, *, headers: Any = None,
                 timestamp: int | None = None, partition: int | None = None, task: int | None = None) -> None:
        """Produce from synchronous code; delivery is checked by the next commit."""
        self._records.produce(topic, key, value, headers=headers, timestamp=timestamp, partition=partition,
                              task=task)

    def send_soon_raw(self, topic: str, key: bytes | None, value: bytes | None, *, headers: Any = None,
                      timestamp: int | None = None) -> None:
        """Produce already-encoded bytes with headers and timestamp (late records)."""
        self._produce(topic, key, value, headers=headers, timestamp=timestamp)

    def produce_raw(self, topic: str, key: bytes | None, value: bytes | None, partition: int | None = None) -> None:
        """Produce already-encoded bytes (global tables write their changelog this way)."""
        self._produce(topic, key, value, partition=partition)

    def changelog_reader(self, topic: str, partition: int, *, client_id: str, chunk_records: int,
                         read_committed: bool) -> ChangelogReader:
        """A reader of one changelog partition (table restores); the test driver's reads memory."""
        assert self.bootstrap is not None
        return ChangelogReader(self.bootstrap, topic, partition, client_id=client_id, chunk_records=chunk_records,
                               read_committed=read_committed, security=self.client_security)

    async def send(self, topic: Topic, key: Any, value: Any, *, headers: Any = None, timestamp: int | None = None,
                   partition: int | None = None) -> tuple[int, int]:
        k, v = topic.encode(key, value)
        future = await self.enqueue(topic.name, k, v, headers=headers, timestamp=timestamp, partition=partition,
                                    track=False)
        metadata = await future
        return metadata.partition, metadata.offset

    def send_soon(self, topic: Topic, key: Any, value: Any, *, headers: Any = None, timestamp: int | None = None,
                  partition: int | None = None) -> None:
        k, v = topic.encode(key, value)
        self._produce(topic.name, k, v, headers=headers, timestamp=timestamp, partition=partition)

    # -- committing ----------------------------------------------------------------------

    async def commit(self) -> None:
        async with self._lock:
            await self._commit_locked()

    async def _commit_locked(self) -> None:
        collector, consumer = self.collector, self._consumer
        if collector is None or consumer is None:
            return
        if self.failure is not None:
            # A failed agent's event was acknowledged by release() and its partial effects sit
            # in the open transactions; the stop() it spawned may not have run yet, and a
            # periodic or rebalance commit here would commit that event as processed.
            return
        contexts: set[int] = set()
        for compiled in (c for sources in self._pipelines.values() for c in sources):
            if id(compiled.ctx) not in contexts:  # the sources of one graph share one context
                contexts.add(id(compiled.ctx))
                await compiled.before_commit()
        await self.gate.close()
        try:
            offsets = await self._past_markers(
                {tp: o for tp, o in self.acks.committable().items() if tp in self.assigned})
            offsets = {tp: o for tp, o in offsets.items() if self._committed.get(tp) != o}
            pending: list[tuple[Table, int, asyncio.Future[Any], int]] = []
            for table in self.app.tables.values():
                headers = table.changelog_headers()
                for partition, changes in table.prepare_commit().items():
                    last = await collector.send_batches(table.changelog.name, partition, changes, headers,
                                                        task=partition)
                    if last is not None:
                        pending.append((table, partition, *last))
            await collector.check_deliveries()
            if collector.exactly_once:
                await self._commit_transactions(collector, offsets)
            for table, partition, future, count in pending:
                metadata = await future
                # A batch's metadata carries its base offset; the store records the last.
                table.finish_commit(partition, metadata.offset + count - 1)
            for table in self.app.tables.values():
                table.finish_commit_unchanged()
            if offsets:
                if not collector.exactly_once:
                    await consumer.commit({TopicPartition(t, p): o for (t, p), o in offsets.items()})
                self._committed.update(offsets)
            self.metrics.commits += 1
        finally:
            self.gate.reopen()
            self._last_commit = time.monotonic()

    async def _purge_repartitions(self) -> None:
        """Delete what this worker has committed of its repartition topics' partitions
        (DeleteRecords), every repartition.purge.interval.ms, as Kafka Streams does: they
        keep records whatever their timestamps (retention.ms=-1), so without this they would
        only grow."""
        every = self.settings.repartition_purge_interval_ms
        if time.monotonic() - self._last_purge < every / 1000:
            return
        self._last_purge = time.monotonic()
        wanted = {tp: o for tp, o in self._committed.items()
                  if _is_repartition(self.app.topics.get(tp[0])) and tp in self.assigned and self._purged.get(tp) != o}
        if not wanted:
            return
        if self._admin is None:
            self._admin = AIOKafkaAdminClient(bootstrap_servers=self.bootstrap, client_id=f"{self.app.id}-admin",
                                    **self.client_security)
            await start_client(self._admin)
        try:
            await self._admin.delete_records({TopicPartition(*tp): RecordsToDelete(o) for tp, o in wanted.items()})
        except KafkaError as exc:
            log.info("purging repartition topics failed (%s); trying again later", exc)
            return
        self._purged.update(wanted)

    async def _past_markers(self, offsets: dict[TP, int]) -> dict[TP, int]:
        """Where every routed record of a partition is processed, commit the consumer's
        position, as Kafka's clients do: past the transaction markers (and aborted records)
        that follow the last record. Committing the last record's offset + 1 left a
        transactional input (a repartition topic under exactly-once) forever one marker
        behind its end: lag never reached 0."""
        consumer = self._consumer
        if consumer is None:
            return offsets
        out = dict(offsets)
        for tp, routed in self._routed_end.items():
            if tp not in self.assigned or offsets.get(tp, self._committed.get(tp)) != routed:
                continue
            position = await consumer.position(TopicPartition(*tp))
            if position > routed:
                out[tp] = position
        return out

    async def _commit_transactions(self, collector: RecordCollector, offsets: dict[TP, int]) -> None:
        """Exactly-once: commit each task's transaction with its input offsets. Until they
        are committed nothing is written to the local stores, so a store never holds what
        an aborted transaction wrote, and needs no wiping after a crash."""
        try:
            await collector.commit_transactions(offsets, self.app.id)
        except (KafkaError, TaskMigratedError) as exc:
            detail = " ".join(str(exc).split()) or "no detail"
            raise DeliveryError(
                f"committing the exactly-once transactions failed ({type(exc).__name__}: {detail}); another "
                "worker may own the tasks now. Stopping without writing local state: the transactions are "
                "aborted and the records since the last commit are processed again") from exc

    # -- rebalances ----------------------------------------------------------------------

    async def on_revoked(self, revoked: set[TP]) -> None:
        if not revoked:
            return
        log.info("partitions revoked: %s", logfmt.assignment(revoked))
        self.tasks.cancel_restores(self.assigned - revoked)
        async with self._lock:
            try:
                await self._commit_locked()
            except KafkaError as exc:
                log.warning("commit before revocation failed (%s); the new owner will reprocess", exc)
            except DeliveryError as exc:
                self._fail(exc)
            for agent in self.app.agents.values():
                for stream in agent.streams:
                    stream.drop_partitions(revoked)
            self.assigned -= revoked
            self._announced_idle -= revoked
            self.acks.forget(revoked)
            for tp in revoked:
                self._committed.pop(tp, None)
                self._routed_end.pop(tp, None)
            kept = {p for _t, p in self.assigned}
            gone = {p for _t, p in revoked} - kept
            self.tasks.revoke(gone)
            if self.collector is not None:
                await self.collector.close_tasks(gone)

    async def on_assigned(self, assigned: set[TP]) -> None:
        log.info("partitions assigned: %s", logfmt.assignment(assigned))
        self._joined = True
        consumer = self._consumer
        assert consumer is not None
        new = assigned - self.assigned
        self.assigned |= assigned
        if self._stopping:
            # An assignment completing while stop() runs (a worker stopped right after its
            # start): a restore begun now outlived stop(), failed on the closed store and
            # reported the clean stop as a failure, and its changelog reader was never closed.
            return
        lookup = asyncio.create_task(self._load_committed(new), name="streamkit-committed")
        self._lookups.add(lookup)
        lookup.add_done_callback(self._lookups.discard)
        await self.tasks.assign(new, self.assigned, self._assignor.standby, consumer, self.collector)

    async def _load_committed(self, tps: set[TP]) -> None:
        """The group's committed offsets of newly assigned partitions, for lag: without
        them a restarted worker measured lag from offset 0."""
        consumer = self._consumer
        if consumer is None or not tps:
            return
        ordered = sorted(tps)
        try:
            offsets = await asyncio.gather(*(consumer.committed(TopicPartition(*tp)) for tp in ordered))
        except KafkaError as exc:
            log.warning("could not read the committed offsets of %s (%s); lag shows from the next commit",
                        logfmt.assignment(ordered), exc)
            return
        for tp, offset in zip(ordered, offsets, strict=True):
            if tp in self.assigned and tp not in self._committed:
                self._committed[tp] = offset if offset is not None else 0

    def _assignment_work(self) -> list[asyncio.Task[None]]:
        """The tasks assignments started that may still run: restores (revoked ones too)
        and committed-offset lookups."""
        return [*self.tasks.work(), *self._lookups]

    def _spawn(self, coro: Any) -> None:
        """Run ``coro`` in the background, keeping a reference so it is not collected."""
        task = asyncio.ensure_future(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    # -- timers --------------------------------------------------------------------------

    async def _timer(self, interval_ms: int, fn: Any, name: str) -> None:
        """Run ``fn`` every ``interval_ms`` behind the processing gate, like an agent's event:
        a commit waits for a running timer and a timer waits for a running commit, so its
        table writes land in a transaction that is open (a commit prepares them) and are
        committed with it. A timer that raises stops the worker, as a failing agent does."""
        while True:
            await asyncio.sleep(interval_ms / 1000)
            await self.gate.enter()
            try:
                await fn()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.exception("timer %s failed; stopping the worker", name)
                if self.failure is None:
                    self.failure = exc
                self._spawn(self.stop())
                return
            finally:
                self.gate.leave()

    # -- stop ----------------------------------------------------------------------------

    async def stop(self) -> None:
        if self._stopping:
            await self.stopped.wait()
            return
        self._stopping = self.tasks.stopping = True
        await cancel_and_wait(self._tasks)
        # Awaited, not only cancelled: a restore stops its changelog reader on the way out,
        # and left running it did so after the loop (or the test) had moved on.
        await cancel_and_wait(self._assignment_work())
        if self.failure is None:
            try:
                await self.commit()
            except DeliveryError as exc:
                log.error("%s", exc)
                self.failure = exc
            except Exception as exc:
                log.warning("the last commit failed (%s); the next owner will reprocess", exc)
        await cancel_and_wait(self._agent_tasks)
        if self.web is not None:
            await self.web.stop()
        if self._consumer is not None:
            await stop_client(self._consumer)
        # What an assignment started while the above ran (on_assigned starts nothing once
        # stopping, but one may have been past that check): ended before the stores close.
        await cancel_and_wait(self._assignment_work())
        await self.tasks.stop()
        for table in self.app.tables.values():
            await table.close()
        self.progress.close()
        self.late_log.flush(force=True)
        if self._admin is not None:
            await stop_client(self._admin)
        if self.collector is not None:
            await self.collector.stop()
        if self._broker is not None:
            await self._broker.stop()
        self.app.runtime = None
        self.stopped.set()
        log.info("app %s stopped", self.app.id)
