"""What the DSL's processors share: the batch context, the state key codec, result values,
late-record handling and the per-partition stream time of a stateful operator."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson
from pydantic import BaseModel

from streamkit.streams.event import Event
from streamkit.streams.windows import MIN_TIMESTAMP, StreamTime

if TYPE_CHECKING:
    from streamkit.state.transaction import Transaction
    from streamkit.streams.runtime import Runtime
    from streamkit.streams.table import Table
    from streamkit.streams.topic import Topic

__all__ = [
    "STREAM_TIME_KEY",
    "CoPartitionError",
    "Context",
    "Emit",
    "KeyCodec",
    "Out",
    "OutputCodec",
    "StreamTimes",
    "WindowResult",
    "jsonable",
    "send_late",
    "wall_clock_ms",
]

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


class Context:
    """What processors share while one batch of one partition runs."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self.partition = -1
        self.outbox: list[Out] = []

    def txn(self, table: Table) -> Transaction:
        txn = table._txns.get(self.partition)
        if txn is None:
            raise CoPartitionError(
                f"state of {table.name!r} has no partition {self.partition} on this worker: "
                "the input is not partitioned like the state (group_by the key first)")
        return txn


def send_late(ctx: Context, key_codec: KeyCodec, ev: Event) -> None:
    """A record dropped as late: counted, and sent to ``late.records.topic.name`` if set."""
    runtime = ctx.runtime
    runtime.metrics.late_records += 1
    topic = runtime.settings.late_records_topic
    if topic:
        runtime.produce_raw(topic, None if ev.key is None else key_codec.dumps(ev.key),
                            orjson.dumps(jsonable(ev.value)))


class StreamTimes:
    """Per-partition stream time of one stateful operator, persisted in its store.

    Also per partition: ``last_wall``, the wall-clock anchor of ``window.idle.close.ms``
    ((wall ms, stream time) when stream time last moved, or was loaded), and ``closed``,
    the stream time up to which the operator has closed windows. ``clock`` is injected
    (the runtime's) so that idle closing is testable without waiting."""

    def __init__(self, clock: Callable[[], int] = wall_clock_ms) -> None:
        self.clock = clock
        self.times: dict[int, StreamTime] = {}
        self.last_wall: dict[int, tuple[int, int]] = {}
        self.closed: dict[int, int] = {}
        # The store partition each cached value was read from (kept referenced, so identity
        # is meaningful): a partition revoked and assigned again gets a new one.
        self._stores: dict[int, object] = {}
        self._dirty: set[int] = set()
        self._by_txn: dict[int, tuple[Transaction, StreamTime]] = {}

    def for_partition(self, partition: int, txn: Transaction) -> StreamTime:
        st = self.times.get(partition)
        if st is None or self._stores.get(partition) is not txn.partition:
            # (Re)loaded whenever the partition's store was (re)opened. A partition that moved
            # to another worker and back comes back with the stream time that worker reached
            # (persisted with the state); the value cached before the move is behind it, and
            # with it records that were late there were accepted and closed windows emitted
            # twice.
            raw = txn.get(STREAM_TIME_KEY)
            st = StreamTime(int(raw) if raw else MIN_TIMESTAMP)
            self.times[partition] = st
            self._stores[partition] = txn.partition
            self._dirty.discard(partition)
            # Every window up to the persisted stream time was closed before it was saved
            # (closing runs before each commit).
            self.closed[partition] = st.value
            # The idle clock starts now: the wall time of the record that last moved stream
            # time went away with the worker that saw it. Without an anchor here an idle
            # partition never closed its windows after a restart or a move.
            if st.value == MIN_TIMESTAMP:
                self.last_wall.pop(partition, None)
            else:
                self.last_wall[partition] = (self.clock(), st.value)
        return st

    def observe(self, partition: int, txn: Transaction, ts: int, *, persist: bool = True) -> int:
        """Account for a record's timestamp; the new stream time. Without ``persist`` the
        store write waits for ``persist()`` (once per batch instead of once per record),
        which must come before the batch's state is committed."""
        # Per record: the partition's StreamTime is looked up again only when the
        # transaction changed (a commit, or the store reopened), not verified every time.
        cached = self._by_txn.get(partition)
        if cached is not None and cached[0] is txn:
            st = cached[1]
        else:
            st = self.for_partition(partition, txn)
            self._by_txn[partition] = (txn, st)
        now = st.observe(ts)
        if now == ts:  # advanced (or unchanged at ts: saving it again is harmless)
            if persist:
                self._save(partition, txn, now)
            else:
                self._dirty.add(partition)
        return now

    def persist(self, partition: int, txn: Transaction) -> None:
        """Write the stream time ``observe(persist=False)`` left unsaved."""
        if partition in self._dirty:
            self._dirty.discard(partition)
            self._save(partition, txn, self.times[partition].value)

    def advance_idle(self, partition: int, txn: Transaction, now_wall: int, idle_ms: int) -> bool:
        """``window.idle.close.ms``: once ``idle_ms`` of wall time passed since stream time
        last moved (or was loaded), let it follow the wall clock from there. Whether it moved."""
        st = self.for_partition(partition, txn)
        anchor = self.last_wall.get(partition)
        if anchor is None or now_wall - anchor[0] < idle_ms:
            return False
        target = anchor[1] + (now_wall - anchor[0])
        if target <= st.value:
            return False
        st.advance_to(target)
        txn.set(STREAM_TIME_KEY, str(st.value).encode())
        return True

    def _save(self, partition: int, txn: Transaction, now: int) -> None:
        txn.set(STREAM_TIME_KEY, str(now).encode())
        self.last_wall[partition] = (self.clock(), now)
