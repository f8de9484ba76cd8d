"""What the DSL's processors share: the batch context, the state key codec, result values,
late-record handling and the per-partition stream time of a stateful operator."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import orjson
from pydantic import BaseModel

from streamkit.streams.event import Event
from streamkit.streams.watermarks import WM_HEADER, InputClock
from streamkit.streams.windows import MIN_TIMESTAMP

if TYPE_CHECKING:
    from streamkit.state.transaction import Transaction
    from streamkit.streams.metrics import Metrics
    from streamkit.streams.settings import AppSettings
    from streamkit.streams.topic import Topic


class PipelineRuntime(Protocol):
    """What the DSL's processors need of the worker running them (the runtime, or a test's
    driver): settings, clock, metrics and producing. It hands them records decoded."""

    @property
    def settings(self) -> AppSettings: ...

    @property
    def metrics(self) -> Metrics: ...

    @property
    def late_log(self) -> LateLog: ...

    def clock(self) -> int: ...

    async def enqueue(self, topic: str, key: bytes | None, value: bytes | None, *, headers: Any = None,
                      timestamp: int | None = None, partition: int | None = None, track: bool = True,
                      task: int | None = None) -> Any: ...

    async def enqueue_many(self, records: Sequence[Out]) -> None:
        """Queue ``records`` in order, as ``enqueue`` one by one (tracked)."""

    def topic_partitions(self, topic: str) -> int | None: ...

    def send_soon_raw(self, topic: str, key: bytes | None, value: bytes | None, *, headers: Any = None,
                      timestamp: int | None = None) -> None: ...


class Stamper(Protocol):
    """What stamps watermarks on the repartition records of one feeding topic's chain
    (``group_by``; ``streamkit.streams.watermarks``)."""

    def stamp(self, partition: int, idle: bool) -> None:
        """After a batch of ``partition``: its watermark to every repartition partition
        that has not heard of it (``idle``: the partition is empty and caught up)."""

    def wake(self, partition: int, tasks: Iterable[int]) -> None:
        """``partition``, announced idle, has data now: say so to every repartition
        partition, in the transaction of each of ``tasks``."""


class StateTable(Protocol):
    """What the processors need of a table holding operator state: its open transactions."""

    @property
    def name(self) -> str: ...

    @property
    def _txns(self) -> dict[int, Transaction]: ...

__all__ = [
    "STREAM_TIME_KEY",
    "CoPartitionError",
    "Context",
    "Emit",
    "KeyCodec",
    "LateLog",
    "OperatorTime",
    "Out",
    "OutputCodec",
    "PipelineRuntime",
    "Stamper",
    "StateTable",
    "WindowResult",
    "jsonable",
    "record_late",
    "send_late",
    "wall_clock_ms",
]

log = logging.getLogger("streamkit.streams")

STREAM_TIME_KEY = b"\xff\xffstream-time"  # sorts after every data and window key

Emit = Callable[[Event], None]


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class CoPartitionError(ValueError):
    """Inputs of a join or a table lookup are not partitioned alike."""


@dataclass(frozen=True, slots=True)
class WindowResult:
    """One windowed aggregate: what ``.final()``/``.current()`` streams carry as values."""

    key: Any
    start: int
    end: int
    value: Any

    def to_json(self) -> dict[str, Any]:
        value = self.value.model_dump(mode="json") if isinstance(self.value, BaseModel) else self.value
        return {"key": self.key, "start": self.start, "end": self.end, "value": value}


def jsonable(value: Any) -> Any:
    if isinstance(value, WindowResult):
        return value.to_json()
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, tuple):
        return [jsonable(v) for v in value]
    return value


class OutputCodec:
    """Values leaving the DSL for a topic without a declared value type: JSON, with
    window results and pydantic models (also inside join tuples) rendered as JSON."""

    def dumps(self, obj: Any) -> bytes:
        return orjson.dumps(jsonable(obj), option=orjson.OPT_NON_STR_KEYS)

    def loads(self, data: bytes) -> Any:
        return orjson.loads(data)


class KeyCodec:
    """Keys inside DSL state: JSON, so any JSON-able key round-trips."""

    def dumps(self, key: Any) -> bytes:
        return orjson.dumps(key)

    def loads(self, data: bytes) -> Any:
        return orjson.loads(data)


@dataclass(slots=True)
class Out:
    topic: Topic
    key: bytes | None
    value: bytes | None
    timestamp: int
    headers: list[tuple[str, bytes]] | None = None
    partition: int | None = None
    task: int | None = None  # the task that produced it (exactly-once: whose transaction)


class Context:
    """What processors share while one batch of one partition runs."""

    def __init__(self, runtime: PipelineRuntime) -> None:
        self.runtime = runtime
        self.partition = -1
        self.outbox: list[Out] = []
        # The current record's own-partition watermark (``streamkit.streams.watermarks``):
        # what its lateness is judged by.
        self.own = MIN_TIMESTAMP
        # Per consumed (topic, partition): its stream time; ``upstream`` says how many
        # upstream partitions feed a repartition topic (None: an external topic).
        self.clocks: dict[tuple[str, int], InputClock] = {}
        self.upstream: dict[str, int | None] = {}
        self.idle_ms = runtime.settings.window_idle_close_ms
        # Called with a partition before a batch of it runs: operators load their stored
        # stream time first, so the batch's records are judged against it.
        self.loaders: list[Callable[[int], None]] = []
        # While a batch runs: the topic read, its partition's clock and the wall time.
        self.topic = ""
        self.current: InputClock = InputClock(None, 0)
        self.wall = 0
        # Per source topic: what stamps watermarks on its chain's repartition records.
        self.stampers: dict[str, list[Stamper]] = {}
        # Called before each commit (tables aggregated without a window emit their updates).
        self.commit_hooks: list[Callable[[], None]] = []
        # The stateful operators (for /metrics: stream time per operator and partition).
        self.operators: list[Any] = []

    def clock(self, topic: str, partition: int) -> InputClock:
        clock = self.clocks.get((topic, partition))
        if clock is None:
            clock = self.clocks[(topic, partition)] = InputClock(self.upstream.get(topic), self.runtime.clock())
        return clock

    def txn(self, table: StateTable) -> Transaction:
        txn = table._txns.get(self.partition)
        if txn is None:
            raise CoPartitionError(
                f"state of {table.name!r} has no partition {self.partition} on this worker: "
                "the input is not partitioned like the state (group_by the key first)")
        return txn


def send_late(ctx: Context, key_codec: KeyCodec, ev: Event, operator: str, watermark: int) -> None:
    """A DSL record dropped as late (``record_late``); ``watermark`` closed its windows: its
    own partition's, or the operator's stream time when that closed them first."""
    record_late(ctx.runtime, operator, None if ev.key is None else key_codec.dumps(ev.key), ev, watermark)


def record_late(runtime: PipelineRuntime, operator: str, key: bytes | None, ev: Event, watermark: int) -> None:
    """The one path of every late record (DSL operators and agents' windowed tables):
    counted per operator, logged (at most once per ``LATE_LOG_INTERVAL_MS`` per operator,
    with the count since), and sent to ``late.records.topic.name`` if set, with its
    timestamp and headers (the internal watermark stamp left out)."""
    metrics = runtime.metrics
    metrics.late_records += 1
    metrics.late_by_operator[operator] = metrics.late_by_operator.get(operator, 0) + 1
    runtime.late_log.note(operator, ev, watermark)
    topic = runtime.settings.late_records_topic
    if topic:
        headers = [h for h in ev.headers if h[0] != WM_HEADER]
        runtime.send_soon_raw(topic, key, orjson.dumps(jsonable(ev.value)), headers=headers or None,
                              timestamp=ev.timestamp)


LATE_LOG_INTERVAL_MS = 10_000


class LateLog:
    """Rate-limited log lines for late records, per operator: the first at once; the ones
    after it, until ``interval_ms`` has passed, in one line that says how many, written by
    the next late record or by ``flush`` (the worker calls it as it runs, and at stop), so
    the lines add up to the metric."""

    def __init__(self, clock: Callable[[], int], interval_ms: int = LATE_LOG_INTERVAL_MS) -> None:
        self.clock = clock
        self.interval_ms = interval_ms
        self._last: dict[str, int] = {}
        # operator -> (records dropped since its last line, the last one: key, timestamp,
        # the watermark that closed its windows)
        self._pending: dict[str, tuple[int, Any, int, int]] = {}

    def note(self, operator: str, ev: Event, watermark: int) -> None:
        count = self._pending[operator][0] if operator in self._pending else 0
        self._pending[operator] = (count + 1, ev.key, ev.timestamp, watermark)
        last = self._last.get(operator)
        if last is None or self.clock() - last >= self.interval_ms:
            self._write(operator)

    def flush(self, *, force: bool = False) -> None:
        """Write the lines whose interval has passed (``force``: every pending one)."""
        if not self._pending:
            return
        now = self.clock()
        for operator in list(self._pending):
            if force or now - self._last.get(operator, now) >= self.interval_ms:
                self._write(operator)

    def _write(self, operator: str) -> None:
        self._last[operator] = self.clock()
        count, key, timestamp, watermark = self._pending.pop(operator)
        log.warning("%s: dropped %d late record(s) (last: key %r, timestamp %d, %d ms behind the watermark %d "
                    "that closed its windows; raise grace to keep such records)", operator, count, key,
                    timestamp, watermark - timestamp, watermark)


class OperatorTime:
    """Stream time of one stateful operator, per partition: the minimum of the clocks
    (``watermarks.InputClock``) of the topics feeding it at that partition, stored with the
    operator's state (``STREAM_TIME_KEY``: the clocks' watermarks and how far windows were
    closed), so a restart or a move to another worker continues exactly where it stopped.

    The clocks belong to the context (one per consumed topic partition, shared by every
    operator fed by it); each operator persists their snapshot in its own store and merges
    it back on load (watermarks only grow)."""

    def __init__(self, ctx: Context, topics: tuple[str, ...]) -> None:
        self.ctx = ctx
        self.topics = topics
        self.closed: dict[int, int] = {}
        # The store partition each partition's time was loaded from (kept referenced, so
        # identity is meaningful): a partition revoked and assigned again gets a new one.
        self._stores: dict[int, object] = {}

    def load(self, partition: int, txn: Transaction) -> None:
        if self._stores.get(partition) is txn.partition:
            return
        self._stores[partition] = txn.partition
        raw = txn.get(STREAM_TIME_KEY)
        wall = self.ctx.runtime.clock()
        saved: dict[str, Any] = {}
        if raw:
            parsed = orjson.loads(raw)
            # A bare number: the per-partition maximum stored before watermarks.
            saved = parsed if isinstance(parsed, dict) else {"closed": parsed,
                                                               "clocks": {t: {"last": parsed} for t in self.topics}}
        for topic in self.topics:
            self.ctx.clock(topic, partition).restore(saved.get("clocks", {}).get(topic, {}), wall)
        self.closed[partition] = int(saved.get("closed", MIN_TIMESTAMP))

    def now(self, partition: int, txn: Transaction) -> int:
        """The operator's stream time at ``partition``."""
        self.load(partition, txn)
        ctx = self.ctx
        wall, idle = ctx.runtime.clock(), ctx.idle_ms
        return min(ctx.clock(t, partition).value(wall, idle) for t in self.topics)

    def report(self, partition: int, txn: Transaction) -> tuple[int, int]:
        """(stream time, how far it is behind the furthest input), for /metrics."""
        now = self.now(partition, txn)
        ctx = self.ctx
        wall = ctx.runtime.clock()
        lag = max(ctx.clock(t, partition).lag(wall, ctx.idle_ms) for t in self.topics)
        return now, lag

    def persist(self, partition: int, txn: Transaction) -> None:
        ctx = self.ctx
        payload = {"clocks": {t: ctx.clock(t, partition).snapshot() for t in self.topics},
                   "closed": self.closed.get(partition, MIN_TIMESTAMP)}
        txn.set(STREAM_TIME_KEY, orjson.dumps(payload))
