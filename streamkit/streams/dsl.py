"""The declarative stream DSL: an immutable graph of nodes, compiled to processors.

    (app.stream(views)
        .filter(lambda v: v.page != "/health")
        .group_by(lambda v: v.page, name="by_page")
        .window(streamkit.tumbling(minutes=1), grace=timedelta(seconds=10))
        .count(name="page_counts")
        .final()
        .to("page_counts"))

Every call returns a new node; nothing runs until a worker starts. ``to`` (and
``to_table``, ``foreach``) mark the graph's sinks. At start the runtime compiles the graph
into one chain of processors per source topic: plain functions applied to each record of a
fetched batch, with output records collected in an outbox that is produced after the batch.

Boundaries and state:

- ``group_by`` ends a chain: records are re-keyed and produced to the repartition topic
  ``{app}-{name}-repartition``; the chain continues from that topic, so every record of a
  key reaches one partition (and one worker).
- Aggregations, ``to_table`` and joins keep their state in internal tables (local store +
  compacted changelog ``{app}-{name}-changelog``), restored like any table; stream time
  (the minimum watermark over the partitions feeding the operator, carried in-band through
  repartition topics: ``streamkit.streams.watermarks``) is kept in the same store, so
  windows close correctly after a restart.
- Aggregations without a window (``count``/``sum``/``reduce``/``aggregate`` on a stream)
  return a ``TableNode``: queryable, joinable, its updates emitted once per key and commit.
- Stateful operators should be named (``name=``): unnamed ones get a name from their place
  in the pipeline (``streamkit.streams.naming``), with a warning.
- Event time is the record timestamp, or what a timestamp extractor returns
  (``app.topic(..., timestamp=fn)`` for every use of a topic, ``.window(...,
  timestamp=fn)`` for one aggregation); ``fn(event) -> int`` milliseconds.
- Windows close by stream time: a window is final once ``end + grace <= stream time``
  (``end + gap + grace`` for sessions). A record is late when its windows closed by its own
  partition's watermark (or the operator already closed them): dropped, counted per operator
  in metrics, logged (rate-limited) and, with ``late.records.topic.name``, sent there. With
  ``window.idle.close.ms`` an input silent that long drops out of the minimum.
  Closed windows stay queryable until ``expires`` (``.window(..., expires=...)``).
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Protocol

import orjson

from streamkit.state.windowed import WindowedTransaction
from streamkit.streams.aggregate import (
    Aggregation,
    WindowAggregate,
    WindowState,
    close_offset_ms,
    retention_ms,
)
from streamkit.streams.codecs import Codec, JsonCodec, StrCodec, codec_for
from streamkit.streams.event import Event, TimestampExtractor
from streamkit.streams.joins import (
    Joined,
    JoinHow,
    JoinWindows,
    expire_stream_join,
    stream_join,
    table_join_update,
)
from streamkit.streams.naming import generated_name
from streamkit.streams.processing import (
    Context,
    CoPartitionError,
    Emit,
    KeyCodec,
    OperatorTime,
    Out,
    OutputCodec,
    PipelineRuntime,
    WindowResult,
    jsonable,
    send_late,
)
from streamkit.streams.topic import Topic, partition_for_key
from streamkit.streams.watermarks import DATA, IDLE, MARK, WM_HEADER, encode_stamp, unpack_stamp
from streamkit.streams.windows import (
    MIN_TIMESTAMP,
    HoppingWindows,
    SessionWindows,
    SlidingWindows,
    TumblingWindows,
    WindowSpec,
    duration_ms,
)

if TYPE_CHECKING:
    from pathlib import Path

    from aiokafka.structs import ConsumerRecord

    from streamkit.state.transaction import Transaction
    from streamkit.streams.settings import AppSettings
    from streamkit.streams.table import Table


class App(Protocol):
    """What the DSL needs of an app: its settings, topics, tables and the graph's sinks (and,
    for the state tables it creates, what a table needs of an app)."""

    @property
    def id(self) -> str: ...

    @property
    def state_dir(self) -> Path: ...

    @property
    def settings(self) -> AppSettings: ...

    @property
    def streams(self) -> list[StreamNode]: ...

    @property
    def tables(self) -> dict[str, Table]: ...

    @property
    def topics(self) -> dict[str, Topic]: ...

    def topic(self, *args: Any, **kwargs: Any) -> Topic: ...

    def internal_topic(self, *args: Any, **kwargs: Any) -> Topic: ...

    def Table(self, *args: Any, **kwargs: Any) -> Table: ...

__all__ = [
    "CoPartitionError",
    "CompiledSource",
    "StreamNode",
    "TableNode",
    "WindowResult",
    "WindowedAggregation",
    "WindowedStream",
    "compile_pipelines",
    "source",
]

_ids = itertools.count()  # node identity within this process; never part of a name

# How each operator appears in the generated names of the stateful operators after it.
_PATH_STEP = {"filter": "filter", "map": "map", "map_key": "map-key", "flat_map": "flat-map", "peek": "peek",
              "branch": "branch"}


def _state_table(app: App, name: str, cls: type[Table] | None = None) -> Table:
    """An internal table for operator state, in the DSL's own layout: not queryable as a
    dict of key -> value (a windowed aggregation's ``WindowState`` is, by window)."""
    from streamkit.streams.table import Table

    if name in app.tables:
        raise ValueError(f"a table named {name!r} already exists")
    table = (cls or Table)(app, name, default=None, key_type=bytes, value_type=None,
                           partitions=app.settings.num_partitions, store="rocksdb")
    table.queryable = False
    table.declared_partitions = None  # sized by num.partitions
    app.tables[name] = table
    return table


# -- nodes ---------------------------------------------------------------------------------


class StreamNode:
    """A stream of events in the DSL graph. Nodes never change after creation.

    ``path`` says where the node sits (source topic, then the operators from it): unnamed
    stateful operators are named after it, so names do not depend on declaration order."""

    __slots__ = ("app", "id", "kind", "params", "parents", "path")

    def __init__(self, app: App, kind: str, parents: tuple[StreamNode | TableNode, ...], *, path: str,
                 **params: Any) -> None:
        self.app = app
        self.kind = kind
        self.parents = parents
        self.params = params
        self.path = path
        self.id = next(_ids)

    def __repr__(self) -> str:
        return f"StreamNode({self.kind} {self.path})"

    def _child(self, kind: str, *, path: str | None = None, **params: Any) -> StreamNode:
        step = _PATH_STEP.get(kind)
        return StreamNode(self.app, kind, (self,), path=path or (f"{self.path}-{step}" if step else self.path),
                          **params)

    def filter(self, predicate: Callable[[Any], bool]) -> StreamNode:
        return self._child("filter", fn=predicate)

    def map(self, fn: Callable[[Any], Any]) -> StreamNode:
        """Transform values (keys stay)."""
        return self._child("map", fn=fn)

    def map_key(self, fn: Callable[[Any, Any], Any]) -> StreamNode:
        """Compute a new key from (key, value) without repartitioning (use group_by to move data)."""
        return self._child("map_key", fn=fn)

    def flat_map(self, fn: Callable[[Any], Iterable[Any]]) -> StreamNode:
        return self._child("flat_map", fn=fn)

    def peek(self, fn: Callable[[Any], None]) -> StreamNode:
        return self._child("peek", fn=fn)

    def group_by(self, key: Callable[[Any], Any], *, name: str | None = None, key_type: Any = str) -> StreamNode:
        """Re-key by ``key(value)`` through the repartition topic ``{app}-{name}-repartition``.
        Name it: the name is part of the topic's name and must stay stable across deploys
        (unnamed, it is named after its place in the pipeline, with a warning)."""
        name = name or generated_name(self.app, f"{self.path}-group-by", f"group_by on {self.path}")
        codec = codec_for(key_type, StrCodec())
        topic = self.app.internal_topic(f"{name}-repartition", key_codec=codec, value_codec=_value_codec_of(self))
        return self._child("group_by", path=name, fn=key, topic=topic)

    def group_by_key(self) -> StreamNode:
        """Group by the key the records already have (no repartition): for an aggregation
        whose input is partitioned by its key already (a keyed source topic, or after
        ``group_by``/``repartition``)."""
        return self

    def repartition(self, *, partitions: int | None = None, name: str | None = None) -> StreamNode:
        """Send the records, keys unchanged, through the repartition topic
        ``{app}-{name}-repartition`` with ``partitions`` partitions (``num.partitions`` by
        default): to spread a skewed input, or to co-partition it with something else."""
        name = name or generated_name(self.app, f"{self.path}-repartition", f"repartition of {self.path}")
        feeding = _topic_of(self)
        topic = self.app.internal_topic(f"{name}-repartition", key_codec=feeding.key_codec,
                                        value_codec=_value_codec_of(self))
        if partitions is not None:
            if partitions < 1:
                raise ValueError(f"repartition(partitions=...) must be positive, got {partitions}")
            topic.partitions = partitions
        return self._child("group_by", path=name, fn=None, topic=topic)

    # -- aggregations without a window: tables (Kafka Streams' KTable) -------------------

    def count(self, *, name: str | None = None) -> TableNode:
        """The number of records per key, as a table (see ``aggregate``)."""
        return self._table_aggregate("count", int, lambda agg, _v: agg + 1, JsonCodec(), name)

    def sum(self, fn: Callable[[Any], Any] | None = None, *, name: str | None = None) -> TableNode:
        get = fn or (lambda v: v)
        return self._table_aggregate("sum", int, lambda agg, v: agg + get(v), JsonCodec(), name)

    def reduce(self, fn: Callable[[Any, Any], Any], *, name: str | None = None) -> TableNode:
        first = object()
        return self._table_aggregate("reduce", lambda: first, lambda agg, v: v if agg is first else fn(agg, v),
                                     _value_codec_of(self), name)

    def aggregate(self, initializer: Callable[[], Any], adder: Callable[[Any, Any], Any], *,
                  value_type: Any = None, name: str | None = None) -> TableNode:
        """Aggregate every record of a key, without a window, into a table (a KTable): the
        latest aggregate per key, stored like any table (local store and changelog),
        queryable (``GET /tables/{name}/{key}``), joinable, and readable as a stream of
        updates with ``.to_stream()`` / ``.to(topic)``: one update per key and commit (the
        updates of a key between two commits are folded into the last, as Kafka Streams'
        record cache does). The records must be partitioned by their key: ``group_by`` (or
        ``group_by_key()`` for a keyed input) first."""
        return self._table_aggregate("aggregate", initializer, adder, codec_for(value_type), name)

    def _table_aggregate(self, kind: str, init: Callable[[], Any], add: Callable[[Any, Any], Any], codec: Codec,
                         name: str | None) -> TableNode:
        name = name or generated_name(self.app, f"{self.path}-{kind}", f"{kind}() over {self.path}")
        feeding = _topic_of(self)
        table = self.app.Table(name, key_type=str)
        table.key_codec = feeding.key_codec
        table.value_codec = codec
        table.fed_by(feeding.name)
        table.declared_partitions = None  # sized by num.partitions, like the repartition topics
        update = self._child("table_aggregate", path=name, table=table, init=init, add=add)
        node = TableNode(self.app, table, update)
        self.app.streams.append(update)
        return node

    def merge(self, *others: StreamNode) -> StreamNode:
        path = "-merge-".join(n.path for n in (self, *others))
        return StreamNode(self.app, "merge", (self, *others), path=path)

    def branch(self, *predicates: Callable[[Any], bool]) -> list[StreamNode]:
        """One stream per predicate: each record goes to the first that matches (records
        matching none are dropped)."""
        router = self._child("branch", predicates=predicates)
        return [StreamNode(self.app, "branch_out", (router,), path=f"{router.path}{i}", index=i)
                for i in range(len(predicates))]

    def window(self, spec: WindowSpec, *, grace: timedelta | int | None = None,
               expires: timedelta | int | None = None, timestamp: TimestampExtractor | None = None) -> WindowedStream:
        """Window the stream for an aggregation (``count``, ``sum``, ``reduce``, ``aggregate``).

        ``grace``: how long after its end a window still takes out-of-order records.
        ``expires``: how long after its end a window stays stored, and so queryable
        (``GET /tables/{name}/{key}``), also once closed; at least the grace period (plus
        the gap for sessions, ``size + 1`` for sliding windows), which is the default.
        ``timestamp``: ``fn(event) -> int`` ms, the event time of each record for this
        aggregation, instead of the record timestamp (or the topic's extractor)."""
        if grace is not None:
            spec = spec.with_grace(grace)
        if timestamp is not None and not callable(timestamp):
            raise TypeError("timestamp must be a function fn(event) -> int milliseconds")
        return WindowedStream(self, spec, retention_ms(spec, expires), timestamp)

    def join(self, other: StreamNode | TableNode | Table, *, within: timedelta | int | None = None,
             how: str = "inner", joiner: Callable[[Any, Any], Any] | None = None,
             name: str | None = None, grace: timedelta | int | None = None) -> StreamNode:
        """Stream-table join (``other`` a table, a ``to_table`` node or a GlobalTable) or
        windowed stream-stream join (``other`` a stream, ``within`` required). ``how``:
        inner or left (and outer for streams).

        A stream-stream join matches records of the same key whose timestamps differ by at
        most ``within``; ``grace`` admits out-of-order records that much later (see
        ``streamkit.streams.joins`` for the exact rules: late records are dropped, unmatched
        ones come out once nothing can match them any more)."""
        joiner = joiner or (lambda left, right: (left, right))
        from streamkit.streams.table import Table

        if isinstance(other, Table | TableNode):
            if how not in ("inner", "left"):
                raise ValueError("a stream-table join is inner or left")
            table = other if isinstance(other, Table) else other.table
            return self._child("join_table", path=f"{self.path}-join-{table.name}", table=table, how=how,
                               joiner=joiner)
        if within is None:
            raise ValueError("a stream-stream join needs within= (the join window)")
        if how not in ("inner", "left", "outer"):
            raise ValueError("a stream-stream join is inner, left or outer")
        windows = JoinWindows(duration_ms(within), 0 if grace is None else duration_ms(grace))
        base = name or generated_name(self.app, f"{self.path}-join-{other.path}",
                                      f"join of {self.path} with {other.path}")
        stores = (_state_table(self.app, f"{base}-left"), _state_table(self.app, f"{base}-right"))
        return StreamNode(self.app, "join_stream", (self, other), path=base, windows=windows, how=how,
                          joiner=joiner, stores=stores)

    def to(self, topic: Topic | str, *, key_type: Any = None, value_type: Any = None) -> StreamNode:
        if isinstance(topic, str):
            existing = self.app.topics.get(topic)
            topic = existing or self.app.topic(topic, key_type=key_type or str, value_type=value_type)
            if existing is None and value_type is None:
                topic.value_codec = OutputCodec()
        node = self._child("to", topic=topic)
        self.app.streams.append(node)
        return node

    def foreach(self, fn: Callable[[Any, Any], None]) -> StreamNode:
        """Call ``fn(key, value)`` for each record (a sink)."""
        node = self._child("foreach", fn=fn)
        self.app.streams.append(node)
        return node

    def to_table(self, name: str, *, value_type: Any = None) -> TableNode:
        """Materialize the latest value per key (a tombstone deletes) as a queryable table."""
        table = self.app.Table(name, value_type=value_type, key_type=str)
        node = TableNode(self.app, table, self._child("to_table", path=name, table=table))
        self.app.streams.append(node.update_stream)
        return node


def _value_codec_of(node: StreamNode | TableNode) -> Codec:
    """The value codec records have at ``node`` when they must travel through a topic."""
    if isinstance(node, StreamNode) and node.kind == "source":
        topic: Topic = node.params["topic"]
        return topic.value_codec
    if isinstance(node, StreamNode) and node.kind in ("filter", "peek", "group_by", "merge", "branch", "branch_out"):
        return _value_codec_of(node.parents[0])
    return OutputCodec()


class TableNode:
    """A table in the DSL graph (from ``to_table``): joinable and queryable."""

    def __init__(self, app: App, table: Table, update_stream: StreamNode) -> None:
        self.app = app
        self.table = table
        self.update_stream = update_stream
        self.id = update_stream.id
        self.path = update_stream.path

    def join(self, other: TableNode, *, how: str = "inner", joiner: Callable[[Any, Any], Any] | None = None) -> StreamNode:
        """Table-table join: on an update of either side, emit the joined value for that key
        (a tombstone when a delete removed it; see ``joins.table_join_update``)."""
        if how not in ("inner", "left", "outer"):
            raise ValueError("a table-table join is inner, left or outer")
        joiner = joiner or (lambda left, right: (left, right))
        return StreamNode(self.app, "join_tables", (self.update_stream, other.update_stream),
                          path=f"{self.path}-join-{other.path}", how=how, joiner=joiner,
                          tables=(self.table, other.table))

    def changes(self) -> StreamNode:
        """The table's update stream (key, new value)."""
        return self.update_stream

    def to_stream(self) -> StreamNode:
        """The table's updates as a stream (Kafka Streams' ``KTable.toStream()``)."""
        return self.update_stream

    def to(self, topic: Topic | str, *, key_type: Any = None, value_type: Any = None) -> StreamNode:
        """Write the table's updates to ``topic``."""
        return self.update_stream.to(topic, key_type=key_type, value_type=value_type)


def _spec_kind(spec: WindowSpec) -> str:
    if isinstance(spec, TumblingWindows):
        return "tumbling"
    if isinstance(spec, HoppingWindows):
        return "hopping"
    return "sliding" if isinstance(spec, SlidingWindows) else "session"


class WindowedStream:
    def __init__(self, parent: StreamNode, spec: WindowSpec, retention: int,
                 timestamp: TimestampExtractor | None) -> None:
        self.parent = parent
        self.spec = spec
        self.retention = retention
        self.timestamp = timestamp

    def _aggregate(self, kind: str, init: Callable[[], Any], add: Callable[[Any, Any], Any], codec: Codec,
                   name: str | None, merge: Callable[[Any, Any], Any] | None) -> WindowedAggregation:
        parent = self.parent
        if name is None:
            path = f"{parent.path}-{_spec_kind(self.spec)}-{kind}"
            name = generated_name(parent.app, path, f"{kind}() over {parent.path}")
        table = _state_table(parent.app, name, WindowState)
        assert isinstance(table, WindowState)
        table.configure(self.spec, codec, _topic_of(parent))
        agg = Aggregation(self.spec, init, add, codec, merge, self.retention, self.timestamp)
        return WindowedAggregation(parent, agg, table)

    def count(self, *, name: str | None = None) -> WindowedAggregation:
        return self._aggregate("count", int, lambda agg, _v: agg + 1, JsonCodec(), name, operator.add)

    def sum(self, fn: Callable[[Any], Any] | None = None, *, name: str | None = None) -> WindowedAggregation:
        get = fn or (lambda v: v)
        return self._aggregate("sum", int, lambda agg, v: agg + get(v), JsonCodec(), name, operator.add)

    def reduce(self, fn: Callable[[Any, Any], Any], *, name: str | None = None) -> WindowedAggregation:
        first = object()
        codec = _value_codec_of(self.parent)
        # Two sessions' reductions merge with the reducer itself (a stored session always has
        # a record, so neither side is ``first``).
        return self._aggregate("reduce", lambda: first, lambda agg, v: v if agg is first else fn(agg, v), codec,
                               name, fn)

    def aggregate(self, initializer: Callable[[], Any], adder: Callable[[Any, Any], Any], *,
                  value_type: Any = None, name: str | None = None,
                  merger: Callable[[Any, Any], Any] | None = None) -> WindowedAggregation:
        """``merger(a, b)`` combines the aggregates of two sessions that a record bridges
        (Kafka Streams' Merger); session windows need it, other windows ignore it."""
        if merger is None and isinstance(self.spec, SessionWindows):
            # Guessing was wrong either way: numbers were added (a max became a sum) and
            # anything else was passed to the adder as if it were a record.
            raise ValueError("aggregate() over session windows needs merger=fn(agg1, agg2), which "
                             "combines the aggregates of two sessions a record joins")
        return self._aggregate("aggregate", initializer, adder, codec_for(value_type), name, merger)


class WindowedAggregation:
    def __init__(self, parent: StreamNode, agg: Aggregation, table: WindowState) -> None:
        self.parent = parent
        self.agg = agg
        self.table = table
        self._emitted = False

    def _emit(self, mode: str) -> StreamNode:
        if self._emitted:
            # Two processors over one store would each add every record to it.
            raise ValueError(f"aggregation {self.table.name!r} already has its output (.final() or .current()); "
                             "declare a second aggregation, with its own name, for another")
        self._emitted = True
        return StreamNode(self.parent.app, "window_aggregate", (self.parent,), path=self.table.name, agg=self.agg,
                          table=self.table, emit=mode)

    def final(self) -> StreamNode:
        """One result per window, when it closes (end + grace <= stream time)."""
        return self._emit("final")

    def current(self) -> StreamNode:
        """The updated result of every window a record changes, at once."""
        return self._emit("current")


def source(app: App, topic: Topic) -> StreamNode:
    return StreamNode(app, "source", (), path=topic.name, topic=topic)


def _topic_of(node: StreamNode) -> Topic:
    """The topic whose partitions ``node``'s records come from."""
    while True:
        if node.kind in ("source", "group_by"):
            topic: Topic = node.params["topic"]
            return topic
        parent = node.parents[0]
        node = parent.update_stream if isinstance(parent, TableNode) else parent


# -- joins -----------------------------------------------------------------------------------


class _StoreJoinBuffers:
    """``joins.JoinBuffers`` over the two sides' windowed stores: one window
    ``[ts, ts + 1)`` per key and timestamp, whose value is the JSON list of that side's
    records there, ``[[value, matched], ...]``."""

    __slots__ = ("key_codec", "sides")

    def __init__(self, left: WindowedTransaction, right: WindowedTransaction, key_codec: KeyCodec) -> None:
        self.sides = (left, right)
        self.key_codec = key_codec

    def get(self, side: int, key: Any, timestamp: int) -> list[list[Any]]:
        raw = self.sides[side].get_window(self.key_codec.dumps(key), timestamp, timestamp + 1)
        return [] if raw is None else list(orjson.loads(raw))

    def scan(self, side: int, key: Any, lo: int, hi: int) -> list[tuple[int, list[list[Any]]]]:
        windows = self.sides[side].iter_windows(self.key_codec.dumps(key), lo, hi + 1)
        return [(w.start_ms, orjson.loads(w.value)) for w in windows]

    def put(self, side: int, key: Any, timestamp: int, entries: list[list[Any]]) -> None:
        payload = orjson.dumps([[jsonable(value), matched] for value, matched in entries])
        self.sides[side].update_window(self.key_codec.dumps(key), timestamp, timestamp + 1, payload)

    def pop_before(self, side: int, timestamp: int) -> list[tuple[Any, int, list[list[Any]]]]:
        # A window [ts, ts + 1) ends at or before ``timestamp`` exactly when ts < timestamp.
        return [(self.key_codec.loads(w.key), w.start_ms, orjson.loads(w.value))
                for w in self.sides[side].expire_windows(timestamp)]


class _StreamJoin:
    """Windowed stream-stream join: the rules of ``joins.stream_join`` over RocksDB buffers
    (one store per side), with the partition's stream time kept in the left one."""

    def __init__(self, node: StreamNode, emit: Emit, ctx: Context) -> None:
        p = node.params
        self.windows: JoinWindows = p["windows"]
        self.how: JoinHow = p["how"]
        self.joiner = p["joiner"]
        self.stores: tuple[Table, Table] = p["stores"]
        self.emit = emit
        self.ctx = ctx
        self.name = node.path
        self.times = OperatorTime(ctx, tuple(dict.fromkeys(_topic_of(parent).name for parent in node.parents
                                                            if isinstance(parent, StreamNode))))
        ctx.loaders.append(self._load)
        self.key_codec = KeyCodec()
        self._final_before: dict[int, int] = {}

    def _load(self, partition: int) -> None:
        txn = self.stores[0]._txns.get(partition)
        if txn is not None:
            self.times.load(partition, txn)

    def side(self, index: int) -> Callable[[Event], None]:
        return lambda ev: self.process(index, ev)

    def process(self, side: int, ev: Event) -> None:
        ctx = self.ctx
        left = ctx.txn(self.stores[0])
        # Late by the record's own partition's watermark; expiry by the join's stream time,
        # the minimum over both sides' inputs (tick()).
        own = ev.timestamp if ev.timestamp > ctx.own else ctx.own
        # What the join already expired is final, also for an input that was idle then.
        expired = self.times.closed.get(ctx.partition, MIN_TIMESTAMP)
        if expired > own:
            own = expired
        buffers = self._buffers(left)
        step = stream_join(buffers, self.windows, self.how, side, ev.key, ev.value, ev.timestamp, own)
        if step.late:
            send_late(ctx, self.key_codec, ev, self.name)
            return
        for result in step.results:
            self._out(result)

    def _buffers(self, left: Transaction) -> _StoreJoinBuffers:
        return _StoreJoinBuffers(WindowedTransaction(left), WindowedTransaction(self.ctx.txn(self.stores[1])),
                                 self.key_codec)

    def tick(self, now_wall: int) -> None:
        """After each batch: expire what the join's stream time makes final (a range scan
        per side: only when stream time moved the bound), and store the stream time."""
        ctx = self.ctx
        p = ctx.partition
        left = self.stores[0]._txns.get(p)
        if left is None or self.stores[1]._txns.get(p) is None:
            return
        now = self.times.now(p, left)
        final_before = self.windows.final_before(now)
        if now != MIN_TIMESTAMP and self._final_before.get(p) != final_before:
            self._final_before[p] = final_before
            self.times.closed[p] = now  # stored with the join's state: final after a restart too
            for result in expire_stream_join(self._buffers(left), self.windows, self.how, now):
                self._out(result)
        self.times.persist(p, left)

    def stream_time(self, partition: int) -> tuple[int, int] | None:
        txn = self.stores[0]._txns.get(partition)
        return None if txn is None else self.times.report(partition, txn)

    def _out(self, result: Joined[Any]) -> None:
        ctx = self.ctx
        own, ctx.own = ctx.own, result.timestamp
        try:
            self.emit(Event(result.key, self.joiner(result.left, result.right), result.timestamp, [], "",
                            ctx.partition, -1))
        finally:
            ctx.own = own



def _check_copartitioned(what: str, *partition_counts: tuple[str, int | None]) -> None:
    counts = {n for _name, n in partition_counts if n is not None}
    if len(counts) > 1:
        detail = ", ".join(f"{name}: {n}" for name, n in partition_counts)
        raise CoPartitionError(f"{what}: inputs are not co-partitioned ({detail}); "
                               "repartition one side with group_by so both have the same partitions")


def _check_state_partitions(what: str, node: StreamNode, table: Table) -> None:
    """A stateful operator keeps input partition p in state partition p: an input with more
    partitions than its state has records with no state partition at all. Refused when the
    worker starts; before, the worker started and then failed at the first such record."""
    name, count = _partitions_of(node.parents[0])
    if count is not None and count > table.partitions:
        raise CoPartitionError(
            f"{what}: its input has more partitions than its state ({name}: {count}, {table.name}: "
            f"{table.partitions}); group_by the key first (repartition topics have num.partitions "
            "partitions) or set num.partitions to the input's partition count")


@dataclass(eq=False)  # identity hash: it is an acknowledging reader in the AckTracker
class CompiledSource:
    """The processor chain of one source topic.

    Records of a repartition topic (``stamped``) carry their writer's watermark
    (``streamkit.streams.watermarks``): it moves the clock of the partition read, and a
    watermark-only record does nothing else. Records of an external topic move it by their
    own timestamps."""

    topic: Topic
    entry: Callable[[Event], None]
    ctx: Context
    tickers: list[Callable[[int], None]]
    stamped: bool = False

    async def process(self, partition: int, records: list[ConsumerRecord]) -> None:
        ctx = self.ctx
        runtime = ctx.runtime
        ctx.partition = partition
        ctx.topic = name = self.topic.name
        for load in ctx.loaders:
            load(partition)
        clock = ctx.current = ctx.clock(name, partition)
        wall = ctx.wall = runtime.clock()
        decode = runtime.decode
        entry = self.entry
        observe = clock.observe
        if self.stamped:
            for record in records:
                headers = record.headers
                if headers and headers[-1][0] == WM_HEADER:
                    kind, upstream, watermark, own = unpack_stamp(headers[-1][1])
                    observe(upstream, watermark, wall)
                    if kind in (MARK, IDLE):
                        if kind == IDLE:
                            clock.mark_idle(upstream)
                        continue
                else:
                    # Written by something else than a DSL task (an agent's group_by): the
                    # partition's own timestamps are all there is.
                    clock.upstream = None
                    own = observe(0, record.timestamp, wall)
                event = decode(self.topic, record)
                if event is not None:
                    ctx.own = own
                    entry(event)
        else:
            for record in records:
                event = decode(self.topic, record)
                if event is not None:
                    ctx.own = observe(0, event.timestamp, wall)
                    entry(event)
        now = runtime.clock()
        for tick in self.tickers:
            tick(now)
        await self.flush()

    def mark_idle(self, partition: int) -> None:
        """Tell every downstream partition that this (empty, caught-up) partition has
        nothing: left out of their minimum until it has data."""
        ctx = self.ctx
        for stamper in ctx.stampers.get(self.topic.name, ()):
            stamper(partition, True)

    async def tick(self) -> None:
        """Run the tickers without a batch and produce what they emit. Batches alone are not
        enough for ``window.idle.close.ms``: once no record arrives at all, idle partitions'
        windows must still close by wall clock."""
        now = self.ctx.runtime.clock()
        for tick in self.tickers:
            tick(now)
        await self.flush()

    async def before_commit(self) -> None:
        """Emit what waits for a commit (the updates of tables aggregated without a window)
        and produce it, so the commit covers it."""
        ctx = self.ctx
        for hook in ctx.commit_hooks:
            hook()
        await self._send()

    async def flush(self) -> None:
        ctx = self.ctx
        for stamper in ctx.stampers.get(self.topic.name, ()):
            stamper(ctx.partition, False)
        await self._send()

    async def _send(self) -> None:
        ctx = self.ctx
        if not ctx.outbox:
            return
        out, ctx.outbox = ctx.outbox, []
        enqueue = ctx.runtime.enqueue
        for o in out:
            await enqueue(o.topic.name, o.key, o.value, timestamp=o.timestamp, headers=o.headers,
                          partition=o.partition)


class _Regroup:
    """``group_by``: re-key, stamp with the watermark (``streamkit.streams.watermarks``) and
    send to the repartition topic's partition of the new key; after each batch, a
    watermark-only record to every partition that has not heard of the latest watermark."""

    def __init__(self, node: StreamNode, ctx: Context, holdback: int, external: bool) -> None:
        self.topic: Topic = node.params["topic"]
        self.key_fn = node.params["fn"]
        self.ctx = ctx
        self.holdback = holdback
        # Fed straight from an external topic: the partition's watermark is the largest
        # timestamp so far, which is the record's own watermark (no clock to ask).
        self._own_is_watermark = external and holdback == 0
        self.partitions = self.topic.partitions or ctx.runtime.settings.num_partitions
        self._sent: dict[tuple[int, int], int] = {}  # (from partition, to partition) -> watermark

    def watermark(self) -> int:
        ctx = self.ctx
        wm = ctx.current.value(ctx.wall, ctx.idle_ms)
        return wm - self.holdback if wm != MIN_TIMESTAMP else wm

    def __call__(self, ev: Event) -> None:
        topic, ctx = self.topic, self.ctx
        new_key = ev.key if self.key_fn is None else self.key_fn(ev.value)
        kbytes = None if new_key is None else topic.key_codec.dumps(new_key)
        vbytes = None if ev.value is None else topic.value_codec.dumps(ev.value)
        p = ctx.partition
        q = p % self.partitions if kbytes is None else partition_for_key(kbytes, self.partitions)
        own = ctx.own
        wm = own if self._own_is_watermark else self.watermark()
        self._sent[(p, q)] = wm
        ctx.outbox.append(Out(topic, kbytes, vbytes, ev.timestamp, [(WM_HEADER, encode_stamp(DATA, p, wm, own))], q))

    def stamp(self, partition: int, idle: bool) -> None:
        ctx = self.ctx
        if idle:
            kind, wm = IDLE, MIN_TIMESTAMP
        else:
            clock = ctx.clocks.get((ctx.topic, partition))
            if clock is None:
                return
            ctx.current, ctx.wall = clock, ctx.runtime.clock()
            kind, wm = MARK, self.watermark()
            if wm == MIN_TIMESTAMP:
                return
        sent, topic = self._sent, self.topic
        header = [(WM_HEADER, encode_stamp(kind, partition, wm))]
        for q in range(self.partitions):
            if sent.get((partition, q)) != wm or idle:
                sent[(partition, q)] = wm
                # No key, an empty value: a record needs one of the two on the wire.
                ctx.outbox.append(Out(topic, None, b"", ctx.wall, header, q))


class _TableAggregate:
    """An aggregation without a window: the latest aggregate per key in a table; updates
    emitted once per key and commit (``emit_updates``, called before each commit)."""

    def __init__(self, node: StreamNode, emit: Emit, ctx: Context) -> None:
        self.table: Table = node.params["table"]
        self.init = node.params["init"]
        self.add = node.params["add"]
        self.emit = emit
        self.ctx = ctx
        self._updates: dict[tuple[int, bytes], Event] = {}

    def process(self, ev: Event) -> None:
        table, ctx = self.table, self.ctx
        txn = ctx.txn(table)
        kb = table.key_codec.dumps(ev.key)
        raw = txn.get(kb)
        agg = self.add(self.init() if raw is None else table.value_codec.loads(raw), ev.value)
        txn.set(kb, table.value_codec.dumps(agg))
        key = (ctx.partition, kb)
        self._updates.pop(key, None)  # re-inserted: updates go out in the order of their last change
        self._updates[key] = Event(ev.key, agg, ev.timestamp, [], "", ctx.partition, -1)

    def emit_updates(self) -> None:
        updates, self._updates = self._updates, {}
        ctx = self.ctx
        owned = self.table._txns
        for (partition, _kb), ev in updates.items():
            if partition not in owned:
                continue  # revoked since: the next owner has the state, and emits its own updates
            ctx.partition = partition
            ctx.own = ev.timestamp
            self.emit(ev)


def _holdback_ms(node: StreamNode) -> int:
    """How far behind its input's stream time the output of ``node``'s chain can be: the
    stateful operators before it emit records with timestamps that far back (window
    results at ``end - 1`` once ``end + grace`` passed; join results)."""
    total = 0
    while node.kind not in ("source", "group_by"):
        if node.kind == "window_aggregate":
            spec = node.params["agg"].spec
            total += close_offset_ms(spec) + getattr(spec, "size_ms", 0) + 1
        elif node.kind == "join_stream":
            windows: JoinWindows = node.params["windows"]
            total += 2 * windows.within_ms + windows.grace_ms
        parent = node.parents[0]
        if isinstance(parent, TableNode):
            parent = parent.update_stream
        node = parent
    return total


def compile_pipelines(app: App, runtime: PipelineRuntime) -> list[CompiledSource]:
    """Build the processors of every node reachable from the app's sinks."""
    ctx = Context(runtime)
    downstream: dict[int, list[StreamNode]] = {}
    nodes: dict[int, StreamNode] = {}

    def visit(node: StreamNode) -> None:
        if node.id in nodes:
            return
        nodes[node.id] = node
        for parent in node.parents:
            assert isinstance(parent, StreamNode)
            downstream.setdefault(parent.id, []).append(node)
            visit(parent)

    for sink in app.streams:
        visit(sink)

    built: dict[int, Callable[[Event], None]] = {}
    repartition_names = {n.params["topic"].name for n in nodes.values() if n.kind == "group_by"}
    joins: dict[int, _StreamJoin] = {}
    tickers: list[Callable[[int], None]] = []

    def emitter(node: StreamNode) -> Callable[[Event], None]:
        """A function sending ``node``'s output to all of its children."""
        children = [input_of(child, node) for child in downstream.get(node.id, [])]
        if len(children) == 1:
            return children[0]

        def fan_out(ev: Event) -> None:
            for child in children:
                child(ev)

        return fan_out

    def input_of(node: StreamNode, parent: StreamNode) -> Callable[[Event], None]:
        if node.kind == "join_stream":
            join = joins.get(node.id)
            if join is None:
                join = _StreamJoin(node, emitter(node), ctx)
                joins[node.id] = join
                tickers.append(join.tick)
                ctx.operators.append(join)
                _check_copartitioned("stream-stream join", *(_partitions_of(p) for p in node.parents))
            return join.side(node.parents.index(parent))
        return processor(node)

    def processor(node: StreamNode) -> Callable[[Event], None]:
        if node.id in built:
            return built[node.id]
        fn = _make(node)
        built[node.id] = fn
        return fn

    def _make(node: StreamNode) -> Callable[[Event], None]:
        kind, p = node.kind, node.params
        if kind in ("to", "foreach"):
            if kind == "foreach":
                call = p["fn"]
                return lambda ev: call(ev.key, ev.value)
            topic: Topic = p["topic"]

            def to(ev: Event) -> None:
                k, v = topic.encode(ev.key, ev.value)
                ctx.outbox.append(Out(topic, k, v, ev.timestamp))

            return to
        emit = emitter(node)
        if kind == "filter":
            pred = p["fn"]
            return lambda ev: emit(ev) if pred(ev.value) else None
        if kind == "map":
            fn = p["fn"]

            def mapped(ev: Event) -> None:
                emit(Event(ev.key, fn(ev.value), ev.timestamp, ev.headers, ev.topic, ev.partition, ev.offset))

            return mapped
        if kind == "map_key":
            kfn = p["fn"]
            return lambda ev: emit(Event(kfn(ev.key, ev.value), ev.value, ev.timestamp, ev.headers, ev.topic,
                                         ev.partition, ev.offset))
        if kind == "flat_map":
            ffn = p["fn"]

            def flat(ev: Event) -> None:
                for value in ffn(ev.value):
                    emit(Event(ev.key, value, ev.timestamp, ev.headers, ev.topic, ev.partition, ev.offset))

            return flat
        if kind == "peek":
            pfn = p["fn"]

            def peeked(ev: Event) -> None:
                pfn(ev.value)
                emit(ev)

            return peeked
        if kind in ("merge", "branch_out", "source"):
            return emit
        if kind == "branch":
            predicates = p["predicates"]
            outs = [[input_of(child, node) for child in downstream.get(node.id, []) if child.params["index"] == i]
                    for i in range(len(predicates))]

            def branch(ev: Event) -> None:
                for i, pred in enumerate(predicates):
                    if pred(ev.value):
                        for out in outs[i]:
                            out(ev)
                        return

            return branch
        if kind == "group_by":
            upstream = node.parents[0]
            assert isinstance(upstream, StreamNode)
            regroup = _Regroup(node, ctx, _holdback_ms(upstream),
                               external=_topic_of(upstream).name not in repartition_names)
            ctx.stampers.setdefault(_topic_of(upstream).name, []).append(regroup.stamp)
            return regroup
        if kind == "window_aggregate":
            _check_state_partitions("windowed aggregation", node, p["table"])
            agg = WindowAggregate(p["agg"], p["table"], p["emit"], emit, ctx)
            tickers.append(agg.tick)
            ctx.operators.append(agg)
            return agg.process
        if kind == "table_aggregate":
            aggregation = _TableAggregate(node, emit, ctx)
            _check_state_partitions(f"aggregation {aggregation.table.name!r}", node, aggregation.table)
            ctx.commit_hooks.append(aggregation.emit_updates)
            return aggregation.process
        if kind == "to_table":
            table: Table = p["table"]
            _check_state_partitions(f"to_table({table.name!r})", node, table)
            parent = node.parents[0]
            feeding = parent.update_stream if isinstance(parent, TableNode) else parent
            table.fed_by(_topic_of(feeding).name)  # its keys are located by that topic's partitioner

            def materialize(ev: Event) -> None:
                txn = ctx.txn(table)
                kb = table.key_codec.dumps(ev.key)
                if ev.value is None:
                    txn.delete(kb)
                else:
                    txn.set(kb, table.value_codec.dumps(ev.value))
                emit(ev)

            return materialize
        if kind == "join_table":
            jtable: Table = p["table"]
            how, joiner = p["how"], p["joiner"]
            read: Callable[[Any], Any]
            if jtable.is_global:
                # Every worker holds all of a global table: any partitioning joins with it.
                read = jtable.get
            else:
                _check_copartitioned(f"join with table {jtable.name!r}", _partitions_of(node.parents[0]),
                                     (jtable.name, jtable.partitions))

                def read_partition(key: Any) -> Any:
                    raw = ctx.txn(jtable).get(jtable.key_codec.dumps(key))
                    return None if raw is None else jtable.value_codec.loads(raw)

                read = read_partition

            def lookup(ev: Event) -> None:
                right = read(ev.key)
                if right is None and how == "inner":
                    return
                emit(Event(ev.key, joiner(ev.value, right), ev.timestamp, ev.headers, ev.topic, ev.partition, ev.offset))

            return lookup
        if kind == "join_tables":
            left_t, right_t = p["tables"]
            thow, tjoiner = p["how"], p["joiner"]
            _check_copartitioned("table-table join", (left_t.name, left_t.partitions), (right_t.name, right_t.partitions))

            def on_update(ev: Event) -> None:
                lraw = ctx.txn(left_t).get(left_t.key_codec.dumps(ev.key))
                rraw = ctx.txn(right_t).get(right_t.key_codec.dumps(ev.key))
                lv = None if lraw is None else left_t.value_codec.loads(lraw)
                rv = None if rraw is None else right_t.value_codec.loads(rraw)
                update = table_join_update(thow, lv, rv, deleted=ev.value is None)
                if update is not None:
                    value = None if update.pair is None else tjoiner(*update.pair)
                    emit(Event(ev.key, value, ev.timestamp, ev.headers, ev.topic, ev.partition, ev.offset))

            return on_update
        raise ValueError(f"unknown DSL node kind {kind!r}")

    # A repartition topic's partitions are fed by every partition of the topic before it:
    # its stream time is the minimum over that many watermarks.
    repartitions = {n.params["topic"].name: n for n in nodes.values() if n.kind == "group_by"}
    for name, node in repartitions.items():
        upstream, count = _partitions_of(node.parents[0])
        ctx.upstream[name] = count or runtime.topic_partitions(upstream)
    # One chain per topic, however many ``app.stream(topic)`` nodes read it: a record moves
    # the partition's clock once, before any processor sees it.
    readers: dict[str, list[StreamNode]] = {}
    for node in nodes.values():
        if node.kind == "source":
            readers.setdefault(node.params["topic"].name, []).append(node)
    sources: list[CompiledSource] = []
    for same_topic in readers.values():
        entries = [processor(node) for node in same_topic]
        sources.append(CompiledSource(same_topic[0].params["topic"], entries[0] if len(entries) == 1
                                      else _fan_out(entries), ctx, tickers))
    # One source per repartition topic (several group_by nodes may share a name).
    for node in repartitions.values():
        sources.append(CompiledSource(node.params["topic"], emitter(node), ctx, tickers, stamped=True))
    return sources


def _fan_out(entries: list[Callable[[Event], None]]) -> Callable[[Event], None]:
    def fan_out(ev: Event) -> None:
        for entry in entries:
            entry(ev)

    return fan_out


def _partitions_of(node: StreamNode | TableNode) -> tuple[str, int | None]:
    """(name, partition count) of the topic feeding ``node``'s records."""
    if isinstance(node, TableNode):
        return node.table.name, node.table.partitions
    while True:
        if node.kind == "source":
            topic: Topic = node.params["topic"]
            return topic.name, topic.partitions
        if node.kind == "group_by":
            gtopic: Topic = node.params["topic"]
            return gtopic.name, gtopic.partitions
        parent = node.parents[0]
        if isinstance(parent, TableNode):
            return parent.table.name, parent.table.partitions
        node = parent


