"""AppTestDriver: an app's agents, DSL pipelines, tables and timers, run in-process and
deterministically, with no broker, sockets, threads or sleeps (Kafka Streams'
TopologyTestDriver, Faust's ``agent.test_context()``).

The code path is the worker's own: ``DriverRuntime`` is the streams ``Runtime`` with the
transport swapped. Its producers, group consumer and changelog readers are the in-memory
ones of ``streamkit.testing.memory``; routing (``_route``), the processing gate, commits
(changelogs, offsets, exactly-once transactions), restores from changelogs, late records
and the DSL's operators are the runtime's, unchanged. What the driver adds is the schedule
that a worker's consume loop and timers keep by the wall clock: here a record is routed and
every agent has finished with it before ``send()`` returns, and time moves only with
``advance_time()`` (a virtual clock that starts at the real time), which fires timers,
closes windows by idleness and commits every ``commit.interval.ms``.

One worker owns every task, as a single ``streamkit worker`` does. ``restart()`` is a crash
after the last commit (``commit()``, or one that ``advance_time`` made): local state and
uncommitted exactly-once transactions are lost, tables are restored from their changelogs
and processing resumes from the committed offsets, as a worker that was killed and started
again.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import shutil
import sysconfig
import tempfile
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from streamkit.streams.agent import Agent, AgentStream
from streamkit.streams.collector import RecordCollector
from streamkit.streams.event import Event
from streamkit.streams.ordering import by_timestamp
from streamkit.streams.processing import LateLog
from streamkit.streams.runtime import Runtime, StartupError
from streamkit.streams.worker import young_gc_threshold
from streamkit.tasks import cancel_and_wait
from streamkit.testing.memory import (
    ABORTED,
    MemoryChangelogReader,
    MemoryConsumer,
    MemoryLog,
    MemoryProducer,
)

if TYPE_CHECKING:
    from streamkit.streams.app import App
    from streamkit.streams.inbox import RecordInbox
    from streamkit.streams.records import Cursor
    from streamkit.streams.settings import AppSettings
    from streamkit.streams.table import Table

__all__ = ["AppTestDriver", "DriverError", "InputTopic", "OutputRecord", "OutputTopic", "TableView"]

# How many turns of the event loop the agents get to finish with what they were given
# before the driver says which one is stuck (it awaits something that never comes: a
# sleep, a lock, another service).
SETTLE_TURNS = 10_000


@contextlib.contextmanager
def worker_gc(max_poll_records: int) -> Iterator[None]:
    """While the driver processes: the young-generation threshold of the cyclic collector
    that ``streamkit worker`` runs the app with (``young_gc_threshold``), so the records and
    events of a ``send_many`` are not walked every few hundred allocations (about half of its
    CPU with Python's default). The test's own thresholds are back on return; nothing is
    frozen."""
    saved = gc.get_threshold()
    gc.set_threshold(young_gc_threshold(max_poll_records), *saved[1:])
    try:
        yield
    finally:
        gc.set_threshold(*saved)


class DriverError(RuntimeError):
    """Processing failed or stalled in the driver; the message names the agent or operator,
    and the topic, partition and offset of the record at fault."""


def where(event: Event | Cursor | None) -> str:
    if event is None:
        return "no record (between records)"
    return f"record {event.topic}-{event.partition}@{event.offset} (key {event.key!r})"


_PACKAGE = str(Path(__file__).resolve().parents[1]) + os.sep
# Where Python's own and installed libraries live: a frame there is not the app's code.
_LIBRARIES = tuple({sysconfig.get_paths()[name] + os.sep for name in ("stdlib", "platstdlib", "purelib", "platlib")})


def raised_in(exc: BaseException) -> str:
    """`` (raised in FUNCTION at FILE:LINE)``: the innermost frame of the traceback in the
    app's own code (its agent, lambda or timer; else the innermost outside streamkit), or ""
    when there is none."""
    own = outside = None
    tb = exc.__traceback__
    while tb is not None:
        filename = tb.tb_frame.f_code.co_filename
        if not filename.startswith(_PACKAGE):
            outside = tb
            if not filename.startswith(_LIBRARIES):
                own = tb
        tb = tb.tb_next
    frame = own or outside
    if frame is None:
        return ""
    code = frame.tb_frame.f_code
    return f" (raised in {code.co_name} at {code.co_filename}:{frame.tb_lineno})"


def save_declarations(app: App) -> dict[str, Any]:
    """What running an app changes on its declarations (settings, partition counts, the
    tables' stores), for ``restore_declarations``: the next test starts from the app as
    declared, also when it is a module's app that many tests share."""
    return {"settings": app.settings, "id": app.id, "broker": app.broker,
            "topics": {n: (t.partitions, t.declared_partitions) for n, t in app.topics.items()},
            "tables": {n: (t.partitions, t.declared_partitions, t.changelog.partitions, t.store_kind)
                       for n, t in app.tables.items()}}


def restore_declarations(app: App, saved: dict[str, Any]) -> None:
    app.settings, app.id, app.broker = saved["settings"], saved["id"], saved["broker"]
    for name, (partitions, declared) in saved["topics"].items():
        if name in app.topics:
            app.topics[name].partitions, app.topics[name].declared_partitions = partitions, declared
    for name, (partitions, declared, changelog, kind) in saved["tables"].items():
        table = app.tables.get(name)
        if table is not None:
            table.partitions, table.declared_partitions, table.store_kind = partitions, declared, kind
            table.changelog.partitions = changelog


class RecordingLateLog(LateLog):
    """The runtime's late-record log, also keeping each operator's late records for
    ``AppTestDriver.late``."""

    def __init__(self, clock: Any, late: dict[str, list[Event]]) -> None:
        super().__init__(clock)
        self.records = late

    def note(self, operator: str, ev: Event, watermark: int) -> None:
        self.records.setdefault(operator, []).append(ev)
        super().note(operator, ev, watermark)


class MemoryCollector(RecordCollector):
    """The runtime's collector, producing into the in-memory log."""

    def __init__(self, log: MemoryLog, settings: AppSettings, *, state_dir: Path) -> None:
        super().__init__("in-memory", settings, state_dir=state_dir)
        self._log = log

    def _new_producer(self, transactional_id: str | None, client_id: str) -> Any:
        return MemoryProducer(self._log, transactional_id)


class DriverRuntime(Runtime):
    """The streams runtime over the in-memory log, driven step by step (see the module doc)."""

    def __init__(self, app: App, log: MemoryLog, clock: Any, late: dict[str, list[Event]]) -> None:
        super().__init__(app, broker="in-memory", web_port=None)
        self.web_port = None
        self._log = log
        self._virtual_clock = clock
        self.late_log = RecordingLateLog(self.clock, late)
        self.failed_at: str | None = None
        self.memory_consumer: MemoryConsumer | None = None
        # take() batches being filled: id of the stream's inbox -> the virtual time (ms) at
        # which ``within`` hands the batch over; woken by ``time_moved``.
        self.batch_deadlines: dict[int, int] = {}
        self._moved = asyncio.Event()

    def clock(self) -> int:
        return int(self._virtual_clock())

    # -- take() batches on the virtual clock ---------------------------------------------

    def batch_clock(self) -> float:
        """``take()``'s ``within`` runs on the virtual clock (seconds)."""
        return self.clock() / 1000

    async def batch_wait(self, inbox: RecordInbox, timeout: float) -> bool:
        """Wait for an event in the inbox of a ``take()`` batch being filled, or until
        ``advance_time`` moves the virtual clock past ``timeout`` seconds from now."""
        deadline = self.clock() + round(timeout * 1000)
        self.batch_deadlines[id(inbox)] = deadline
        try:
            while not inbox and self.clock() < deadline:
                moved = self._moved
                waiters = {asyncio.ensure_future(inbox.wait_readable(86_400.0)), asyncio.ensure_future(moved.wait())}
                try:
                    await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    for waiter in waiters:
                        waiter.cancel()
        finally:
            self.batch_deadlines.pop(id(inbox), None)
        return bool(inbox)

    def time_moved(self) -> None:
        """Wake the ``take()`` batches waiting on the virtual clock."""
        self._moved.set()
        self._moved = asyncio.Event()

    def next_batch_deadline(self) -> int | None:
        return min(self.batch_deadlines.values(), default=None)

    def changelog_reader(self, topic: str, partition: int, *, client_id: str, chunk_records: int,
                         read_committed: bool) -> Any:
        return MemoryChangelogReader(self._log, topic, partition, chunk_records=chunk_records,
                                     read_committed=read_committed)

    # -- start ---------------------------------------------------------------------------

    async def start_in_memory(self) -> None:
        """``Runtime._start`` with the in-memory transport: the same steps, in the same order."""
        app = self.app
        for table in app.tables.values():
            if table.is_global:
                raise StartupError(f"GlobalTable {table.name!r}: the test driver does not run global tables; test "
                                   "this app against a broker (streamkit.testing.embedded_broker)")
        app.runtime = self
        self.collector = MemoryCollector(self._log, self.settings, state_dir=app.state_dir)
        await self.collector.start()
        for table in app.tables.values():
            table.attach(self)
        self._start_agents()
        await self._wait_for_agents()
        self._create_memory_topics()
        self._check_partition_counts()
        self._build_routes()
        topics = sorted(set(self._agent_readers) | set(self._forwarders) | set(self._pipelines))
        consumer = MemoryConsumer(self._log, app.id, auto_offset_reset=self.settings.auto_offset_reset)
        self.memory_consumer = consumer
        self._consumer = consumer
        tps = {(t, p) for t in topics for p in range(self._log.partitions(t) or 0)}
        consumer.assign(tps)
        if tps:
            await self.on_assigned(tps)
            await self.settle()
        self.raise_failure()

    def _create_memory_topics(self) -> None:
        """``Runtime._create_topics`` against the in-memory log."""
        app, log = self.app, self._log
        for topic in app.topics.values():
            existing = log.partitions(topic.name)
            if existing is not None:
                topic.partitions = existing
            elif topic.partitions is None:
                topic.partitions = self.settings.num_partitions
        self._size_tables()
        for topic in app.topics.values():
            assert topic.partitions is not None
            log.create(topic.name, topic.partitions)
        for name in {self.settings.dead_letter_topic_name, self.settings.late_records_topic} - {None}:
            if name is not None:
                log.create(name, self.settings.num_partitions)
        self._check_changelogs({t.name: log.partitions(t.name) or 0 for t in app.topics.values()})

    # -- failures ------------------------------------------------------------------------

    async def _run_agent(self, agent: Agent, stream: AgentStream) -> None:
        try:
            await agent(stream)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self.failed_at = (f"agent {agent.name!r} failed on {where(stream._held)}: {type(exc).__name__}: {exc}"
                              f"{raised_in(exc)}")
            if self.failure is None:
                self.failure = exc
        stream.release()
        stream.reading.set()

    def _fail(self, exc: BaseException) -> None:
        if self.failure is None:
            self.failure = exc

    def raise_failure(self) -> None:
        if self.failure is None:
            return
        message = self.failed_at or f"{type(self.failure).__name__}: {self.failure}"
        raise DriverError(f"{message} (the app is stopped as a worker would be; driver.restart() starts it "
                          "again from the last commit)") from self.failure

    # -- processing ----------------------------------------------------------------------

    def _busy(self) -> list[AgentStream]:
        """Streams with events queued or being processed, or a ``take()`` batch whose
        ``within`` has passed on the virtual clock and is about to be handed over."""
        now = self.clock()
        due = {i for i, at in self.batch_deadlines.items() if at <= now}
        return [s for a in self.app.agents.values() for s in a.streams
                if len(s.inbox) or s._held is not None or s._held_batch is not None or id(s.inbox) in due]

    async def settle(self) -> None:
        """Let the agents finish with every record routed to them, the sends they started
        be delivered, and restores end."""
        collector = self.collector
        for _ in range(SETTLE_TURNS):
            await asyncio.sleep(0)
            if self.failure is not None:
                return
            if self._busy():
                continue
            if collector is not None and any(not f.done() for _t, f in collector._pending_sends):
                continue
            if any(not t.done() for t in self._assignment_work()):
                continue
            return
        stuck = self._busy()
        if stuck:
            stream = stuck[0]
            held = stream._held or (stream._held_batch[0] if stream._held_batch else None)
            raise DriverError(f"agent {stream.agent.name!r} has not finished with {where(held)} after "
                              f"{SETTLE_TURNS} turns of the event loop: it awaits something other than its stream "
                              "(a sleep, a lock, a service), which a test driver cannot move on")
        raise DriverError("sends or restores did not complete in the driver")

    async def pump(self) -> None:
        """Route every record there is to read, until there is none (records produced while
        processing are read too), as the consume loop would."""
        consumer = self.memory_consumer
        if consumer is None:
            return
        while True:
            self.raise_failure()
            batch = consumer.poll()
            if not batch:
                async with self._lock:
                    await self._mark_idle_inputs()
                await self.settle()
                self.raise_failure()
                if consumer.has_more():
                    continue
                break
            async with self._lock:
                await self._wake_idle_inputs(batch)
                for tp, records in by_timestamp(batch):
                    try:
                        await self._route(tp.topic, tp.partition, list(records))
                    except Exception as exc:
                        self.failure = exc
                        first, last = records[0].offset, records[-1].offset
                        offsets = f"@{first}" if first == last else f"@{first}..{last}"
                        self.failed_at = (f"processing {tp.topic}-{tp.partition}{offsets} in the DSL pipelines "
                                          f"failed: {type(exc).__name__}: {exc}{raised_in(exc)}")
                        raise DriverError(self.failed_at) from exc
            await self.settle()
        self.late_log.flush()
        now = self.clock()
        for table in self.app.tables.values():
            table.tick(now)

    async def crash(self) -> None:
        """Stop as a killed worker stops: nothing committed, local state closed."""
        self._stopping = self.tasks.stopping = True
        await cancel_and_wait(self._agent_tasks)
        await cancel_and_wait(self._assignment_work())
        for table in self.app.tables.values():
            with contextlib.suppress(Exception):
                await table.close()
        self.app.runtime = None
        self.stopped.set()


@dataclass(frozen=True, slots=True)
class OutputRecord:
    """A record read from an output topic, decoded with the topic's codecs."""

    key: Any
    value: Any
    timestamp: int
    headers: dict[str, bytes | None] = field(default_factory=dict)
    partition: int = 0
    offset: int = 0


class InputTopic:
    """``driver.input(name)``: send records into a topic; each is processed on return."""

    def __init__(self, driver: AppTestDriver, name: str) -> None:
        self._driver = driver
        self.name = name

    def send(self, value: Any = None, *, key: Any = None, timestamp: int | None = None,
             headers: Mapping[str, str | bytes] | None = None, partition: int | None = None) -> tuple[int, int]:
        """Produce one record (``timestamp`` in epoch milliseconds, the virtual clock's now by
        default) and process it; returns its (partition, offset)."""
        return self._driver._send(self.name, [dict(value=value, key=key, timestamp=timestamp, headers=headers,
                                                   partition=partition)])[0]

    def send_raw(self, value: bytes | None, *, key: bytes | None = None, timestamp: int | None = None,
                 headers: Mapping[str, str | bytes] | None = None, partition: int | None = None) -> tuple[int, int]:
        """``send()`` of bytes as they are, past the topic's codecs (a record another client
        wrote, or one that does not deserialize)."""
        return self._driver._send(self.name, [dict(value=value, key=key, timestamp=timestamp, headers=headers,
                                                   partition=partition)], raw=True)[0]

    def send_many(self, records: Iterable[Mapping[str, Any]]) -> list[tuple[int, int]]:
        """Produce records given as dicts of ``send()``'s arguments, then process them."""
        return self._driver._send(self.name, [dict(r) for r in records])


class OutputTopic:
    """``driver.output(name)``: the records produced to a topic, each returned once.

    ``read_committed`` (Kafka's isolation.level=read_committed) shows only what committed
    transactions wrote (exactly-once apps: outputs appear with ``commit()``); by default
    every record not aborted is shown as soon as it is produced."""

    def __init__(self, driver: AppTestDriver, name: str, *, read_committed: bool = False) -> None:
        self._driver = driver
        self.name = name
        self.read_committed = read_committed
        self._positions: dict[int, int] = {}

    def read_all(self) -> list[OutputRecord]:
        """Every record produced since the last read, in the order produced."""
        log = self._driver.log
        topic = self._driver.app.topics.get(self.name)
        found = []
        for p in range(log.partitions(self.name) or 0):
            start = self._positions.get(p, 0)
            end = log.end_offset((self.name, p), committed_only=self.read_committed)
            found += [(r, p) for r in log.read((self.name, p), start, end, committed_only=self.read_committed)]
            self._positions[p] = max(start, end)
        found.sort(key=lambda rp: rp[0].seq)
        out = []
        for record, p in found:
            key, value = (topic.decode(record.key, record.value) if topic is not None
                          else (record.key, record.value))
            out.append(OutputRecord(key, value, record.timestamp, dict(record.headers), p, record.offset))
        return out

    def read_one(self) -> OutputRecord | None:
        """The next record, or None when there is none left to read."""
        log = self._driver.log
        candidates = []
        for p in range(log.partitions(self.name) or 0):
            start = self._positions.get(p, 0)
            records = log.read((self.name, p), start, committed_only=self.read_committed)
            if records:
                candidates.append((records[0], p))
        if not candidates:
            return None
        record, p = min(candidates, key=lambda rp: rp[0].seq)
        self._positions[p] = record.offset + 1
        topic = self._driver.app.topics.get(self.name)
        key, value = topic.decode(record.key, record.value) if topic is not None else (record.key, record.value)
        return OutputRecord(key, value, record.timestamp, dict(record.headers), p, record.offset)


class TableView:
    """``driver.table(name)``: reads as ``GET /tables/NAME/KEY`` answers."""

    def __init__(self, driver: AppTestDriver, name: str) -> None:
        self._driver = driver
        self.name = name

    def _table(self) -> Table:
        table = self._driver.app.tables.get(self.name)
        if table is None:
            raise KeyError(f"app {self._driver.app.id!r} has no table {self.name!r} "
                           f"(tables: {', '.join(sorted(self._driver.app.tables)) or 'none'})")
        if not table.queryable:
            raise KeyError(f"{self.name!r} is the internal state of a DSL operator, not a queryable table "
                           "(use to_table for one)")
        return table

    def __getitem__(self, key: Any) -> Any:
        """The value, or for a windowed table the list of ``{"start", "end", "value"}``;
        KeyError when the key is not there."""
        return self._table().query(key)

    def get(self, key: Any, default: Any = None) -> Any:
        """``self[key]``, or ``default`` when the key is not there."""
        try:
            return self[key]
        except KeyError:
            return default

    def __contains__(self, key: Any) -> bool:
        try:
            self[key]
        except KeyError:
            return False
        return True

    def snapshot(self, limit: int = 1000) -> dict[str, Any]:
        """As ``GET /tables/NAME``: up to ``limit`` keys and their values."""
        return self._table().snapshot(limit)


class AppTestDriver:
    """Run ``app`` in-process with the in-memory transport (see the module doc)::

        with AppTestDriver(app, config={"processing.guarantee": "exactly_once"}) as driver:
            driver.input("page_views").send({"user": "u1", "page": "/"}, key="u1", timestamp=0)
            assert driver.table("views_per_page")["/"] == [{"start": ..., "end": ..., "value": 1}]

    ``config`` overrides the app's settings for this driver only (Kafka's names). ``store``
    picks the tables' state store: ``"memory"`` (the default) or ``"rocksdb"``, kept in a
    temporary ``state.dir`` unless ``config`` names one. ``start_time_ms`` sets the
    virtual clock's start (the real time by default)."""

    def __init__(self, app: App, config: Mapping[str, Any] | None = None, *, store: str = "memory",
                 start_time_ms: int | None = None) -> None:
        if store not in ("memory", "rocksdb"):
            raise ValueError(f"store must be 'memory' or 'rocksdb', not {store!r}")
        if app.runtime is not None:
            raise RuntimeError(f"app {app.id!r} is already running; stop it before driving it in a test")
        self.app = app
        self.store = store
        self.now_ms = time.time_ns() // 1_000_000 if start_time_ms is None else int(start_time_ms)
        self._late: dict[str, list[Event]] = {}
        self._outputs: dict[tuple[str, bool], OutputTopic] = {}
        self._saved = save_declarations(app)
        self._tmp: str | None = None
        overrides = dict(config or {})
        if "state.dir" not in overrides:
            self._tmp = tempfile.mkdtemp(prefix=f"streamkit-driver-{app.id}-")
            overrides["state.dir"] = self._tmp
        self._loop = asyncio.new_event_loop()
        self.runtime: DriverRuntime | None = None
        try:
            app.configure(overrides)
            for table in app.tables.values():
                table.store_kind = store
            self.log = MemoryLog(self.clock, app.settings.num_partitions)
            self._next_timer = [self.now_ms + interval for interval, _fn, _name in app.timers]
            self._last_commit = self.now_ms
            self._start()
        except BaseException:
            self.close()
            raise

    # -- lifecycle -----------------------------------------------------------------------

    def _run(self, coro: Any) -> Any:
        with worker_gc(self.app.settings.max_poll_records):
            return self._loop.run_until_complete(coro)

    def _start(self) -> None:
        self.runtime = DriverRuntime(self.app, self.log, self.clock, self._late)
        try:
            self._run(self.runtime.start_in_memory())
            self._run(self.runtime.pump())
        except BaseException:
            self._run(self.runtime.crash())
            raise

    def close(self) -> None:
        """Stop without committing, close the stores, and give the app back as declared."""
        runtime, self.runtime = self.runtime, None
        if runtime is not None and not self._loop.is_closed():
            self._run(runtime.crash())
        if not self._loop.is_closed():
            self._loop.run_until_complete(self._loop.shutdown_asyncgens())
            self._loop.close()
        self.app.runtime = None
        restore_declarations(self.app, self._saved)
        if self._tmp is not None:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None

    def __enter__(self) -> AppTestDriver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def _rt(self) -> DriverRuntime:
        if self.runtime is None:
            raise RuntimeError("the driver is closed")
        return self.runtime

    # -- the API -------------------------------------------------------------------------

    def clock(self) -> int:
        """The virtual wall clock, epoch milliseconds."""
        return self.now_ms

    def input(self, topic: str) -> InputTopic:
        """The topic ``topic`` of the app, to send records into (KeyError naming the app's
        topics if it declares no such topic)."""
        self._topic(topic)
        return InputTopic(self, topic)

    def output(self, topic: str, *, read_committed: bool = False) -> OutputTopic:
        """The records produced to ``topic``; each is returned once by this driver's readers
        of it (one per isolation level), whichever ``output()`` call made them."""
        if self.log.partitions(topic) is None:
            self._topic(topic)
        reader = self._outputs.get((topic, read_committed))
        if reader is None:
            reader = self._outputs[(topic, read_committed)] = OutputTopic(self, topic, read_committed=read_committed)
        return reader

    def table(self, name: str) -> TableView:
        """The table ``name``, read as the worker's ``GET /tables/NAME/KEY`` answers."""
        return TableView(self, name)

    def late(self, operator: str) -> list[Event]:
        """The records the named operator (a DSL aggregation's name, or a windowed table's)
        dropped as late, in the order they came."""
        return list(self._late.get(operator, ()))

    def commit(self) -> None:
        """Commit now, as the worker does every ``commit.interval.ms``: changelogs, input
        offsets, and under exactly-once the transactions. Records produced by the commit
        (table aggregations' updates) are processed before it returns."""
        rt = self._rt
        rt.raise_failure()
        self._run(self._commit(rt))

    async def _commit(self, rt: DriverRuntime) -> None:
        async with rt._lock:
            await rt._mark_idle_inputs()
        await rt.commit()
        self._last_commit = self.now_ms
        await rt.pump()

    def restart(self) -> None:
        """Crash after the last commit and start again: uncommitted state and (exactly-once)
        transactions are lost, tables are restored from their changelogs, and the records
        after the committed offsets are processed again."""
        runtime, self.runtime = self.runtime, None
        if runtime is not None:
            self._run(runtime.crash())
        self._start()

    def advance_time(self, seconds: float) -> None:
        """Move the virtual wall clock: timers fire at their times (the first after one
        interval, as in a worker), windows close by idleness (``window.idle.close.ms``),
        tables expire windows, and the worker commits every ``commit.interval.ms``."""
        if seconds < 0:
            raise ValueError("time only moves forward")
        rt = self._rt
        rt.raise_failure()
        self._run(self._advance(rt, self.now_ms + round(seconds * 1000)))

    async def _advance(self, rt: DriverRuntime, target: int) -> None:
        timers = self.app.timers
        while True:
            due = [(at, i) for i, at in enumerate(self._next_timer) if at <= target]
            commit_at = self._last_commit + rt.settings.commit_interval_ms
            batch_at = rt.next_batch_deadline()
            steps = [at for at, _i in due] + [at for at in (commit_at, batch_at) if at is not None and at <= target]
            next_at = min(steps, default=None)
            if next_at is None:
                break
            self.now_ms = max(self.now_ms, next_at)
            rt.time_moved()  # take() batches whose within has passed are handed over
            for at, i in sorted(due):
                if at != next_at:
                    continue
                interval, fn, name = timers[i]
                self._next_timer[i] = at + interval
                await self._fire(rt, fn, name)
            await self._tick(rt)
            if commit_at == next_at:
                await self._commit(rt)
        self.now_ms = max(self.now_ms, target)
        rt.time_moved()
        await self._tick(rt)

    async def _tick(self, rt: DriverRuntime) -> None:
        if rt.settings.window_idle_close_ms:
            await rt._tick_pipelines()
        await rt.pump()

    async def _fire(self, rt: DriverRuntime, fn: Any, name: str) -> None:
        """Run a timer behind the processing gate, as ``Runtime._timer`` does."""
        await rt.gate.enter()
        try:
            await fn()
        except Exception as exc:
            rt.failure = exc
            rt.failed_at = (f"timer {name!r} failed at virtual time {self.now_ms}: {type(exc).__name__}: {exc}"
                            f"{raised_in(exc)}")
        finally:
            rt.gate.leave()
        rt.raise_failure()
        await rt.pump()

    # -- sending -------------------------------------------------------------------------

    def _topic(self, name: str) -> Any:
        topic = self.app.topics.get(name)
        if topic is None:
            raise KeyError(f"app {self.app.id!r} declares no topic {name!r} "
                           f"(topics: {', '.join(sorted(self.app.topics)) or 'none'})")
        return topic

    def _send(self, name: str, records: list[dict[str, Any]], *, raw: bool = False) -> list[tuple[int, int]]:
        rt = self._rt
        rt.raise_failure()
        topic = self._topic(name)
        placed = []
        with worker_gc(self.app.settings.max_poll_records):
            for args in records:
                unknown = set(args) - {"value", "key", "timestamp", "headers", "partition"}
                if unknown:
                    raise TypeError(f"send_many: unknown argument(s) {', '.join(sorted(unknown))} for topic {name!r}")
                key, value = (args.get("key"), args.get("value")) if raw else topic.encode(args.get("key"), args.get("value"))
                headers = [(h, v.encode() if isinstance(v, str) else bytes(v))
                           for h, v in (args.get("headers") or {}).items()]
                partition = self.log.partition_for(name, key, args.get("partition"))
                timestamp = args.get("timestamp")
                record = self.log.append(name, partition, key, value, self.now_ms if timestamp is None else int(timestamp),
                                         headers)
                placed.append((partition, record.offset))
        self._run(rt.pump())
        return placed

    # -- inspection ----------------------------------------------------------------------

    def committed(self) -> dict[tuple[str, int], int]:
        """The app's committed offsets per (topic, partition)."""
        return {tp: o for (group, tp), o in self.log.group_offsets.items() if group == self.app.id}

    def aborted(self, topic: str) -> int:
        """How many records of ``topic`` aborted transactions wrote."""
        return sum(r.state == ABORTED for part in self.log.topics.get(topic, []) for r in part)
