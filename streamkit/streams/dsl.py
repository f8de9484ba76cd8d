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

- ``streamkit.streams.pipeline.compile_pipelines`` builds each node with the builder of its
  kind (``_BUILDERS``).
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
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Protocol

from streamkit.streams.aggregate import (
    Aggregation,
    WindowState,
    retention_ms,
)
from streamkit.streams.codecs import Codec, JsonCodec, StrCodec, codec_for
from streamkit.streams.columnar.aggs import AggExpr, AggSpec
from streamkit.streams.columnar.aggs import count as count_agg
from streamkit.streams.columnar.aggs import sum as sum_agg
from streamkit.streams.columnar.expr import Expr, ExprTypeError, Schema
from streamkit.streams.event import TimestampExtractor
from streamkit.streams.joins import (
    JoinWindows,
)
from streamkit.streams.naming import generated_name
from streamkit.streams.processing import (
    CoPartitionError,
    OutputCodec,
    WindowResult,
)
from streamkit.streams.topic import Topic
from streamkit.streams.windows import (
    HoppingWindows,
    SessionWindows,
    SlidingWindows,
    TumblingWindows,
    WindowSpec,
    duration_ms,
)

if TYPE_CHECKING:
    from pathlib import Path

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

    def repartition_topic(self, name: str, *args: Any, **kwargs: Any) -> Topic: ...

    def Table(self, *args: Any, **kwargs: Any) -> Table: ...

__all__ = [
    "CoPartitionError",
    "StreamNode",
    "TableNode",
    "WindowResult",
    "WindowedAggregation",
    "WindowedStream",
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

    def filter(self, predicate: Callable[[Any], bool] | Expr) -> StreamNode:
        """Keep the records for which ``predicate(value)`` is true. A column expression
        (``col("page") != "/health"``) is checked against the value's model now, and can
        run on the columnar path (``explain()``)."""
        if isinstance(predicate, Expr):
            _check_expr(self, predicate, "filter", want_bool=True)
            return self._child("filter", fn=predicate.row(), expr=predicate)
        return self._child("filter", fn=predicate)

    def explain(self) -> str:
        """Every step of the app's DSL graph, the path it runs on (columnar or row) and why."""
        from streamkit.streams.columnar.plan import explain

        return explain(self.app)

    def map(self, fn: Callable[[Any], Any]) -> StreamNode:
        """Transform values (keys stay)."""
        return self._child("map", fn=fn)

    def map_key(self, fn: Callable[[Any, Any], Any]) -> StreamNode:
        """Compute a new key from (key, value) without repartitioning (use group_by to move data)."""
        return self._child("map_key", fn=fn)

    def flat_map(self, fn: Callable[[Any], Iterable[Any]]) -> StreamNode:
        """Replace each value with the values ``fn(value)`` returns (none, one or many)."""
        return self._child("flat_map", fn=fn)

    def peek(self, fn: Callable[[Any], None]) -> StreamNode:
        """Call ``fn(value)`` for each value (a side effect) and pass the value on unchanged."""
        return self._child("peek", fn=fn)

    def group_by(self, key: Callable[[Any], Any] | Expr, *, name: str | None = None,
                 key_type: Any = str) -> StreamNode:
        """Re-key by ``key(value)`` through the repartition topic ``{app}-{name}-repartition``.
        Name it: the name is part of the topic's name and must stay stable across deploys
        (unnamed, it is named after its place in the pipeline, with a warning)."""
        name = name or generated_name(self.app, f"{self.path}-group-by", f"group_by on {self.path}")
        codec = codec_for(key_type, StrCodec())
        topic = self.app.repartition_topic(name, key_codec=codec, value_codec=_value_codec_of(self))
        if isinstance(key, Expr):
            _check_expr(self, key, "group_by", want_bool=False)
            return self._child("group_by", path=name, fn=key.row(), topic=topic, expr=key)
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
        topic = self.app.repartition_topic(name, key_codec=feeding.key_codec, value_codec=_value_codec_of(self))
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
        """A table of the running sum per key of ``fn(value)`` (of the values themselves without ``fn``)."""
        get = fn or (lambda v: v)
        return self._table_aggregate("sum", int, lambda agg, v: agg + get(v), JsonCodec(), name)

    def reduce(self, fn: Callable[[Any, Any], Any], *, name: str | None = None) -> TableNode:
        """A table per key of the values folded with ``fn(aggregate, value)`` (the first value as it is)."""
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
        """One stream of the records of all of them. Through a ``group_by`` each input's
        partitions keep their own watermarks: stream time downstream is the minimum over
        every partition of every merged topic (each topic's partition count must be known:
        declared, or read from the broker at start)."""
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
        aggregation, instead of the record timestamp (or the topic's extractor). Its stream
        time comes from those timestamps: after a repartition, the minimum over the upstream
        partitions of the largest one each sent here. Watermark-only records cannot carry
        it, so an upstream partition that sends this partition no data holds its windows
        open (until ``window.idle.close.ms``); ``app.topic(..., timestamp=fn)`` has no such
        limit, its extracted time is the records' timestamp everywhere."""
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
        """Write each record to ``topic`` (a Topic, or a name: declared with ``key_type`` and
        ``value_type`` if the app has no such topic) and return this stream, to go on from it."""
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
    """A grouped stream cut into windows (``.window(...)``): ``count``, ``sum``, ``agg``,
    ``reduce`` or ``aggregate`` it per key and window."""

    def __init__(self, parent: StreamNode, spec: WindowSpec, retention: int,
                 timestamp: TimestampExtractor | None) -> None:
        self.parent = parent
        self.spec = spec
        self.retention = retention
        self.timestamp = timestamp

    def _aggregate(self, kind: str, init: Callable[[], Any], add: Callable[[Any, Any], Any], codec: Codec,
                   name: str | None, merge: Callable[[Any, Any], Any] | None,
                   columns: AggSpec | None = None) -> WindowedAggregation:
        parent = self.parent
        if name is None:
            path = f"{parent.path}-{_spec_kind(self.spec)}-{kind}"
            name = generated_name(parent.app, path, f"{kind}() over {parent.path}")
        table = _state_table(parent.app, name, WindowState)
        assert isinstance(table, WindowState)
        table.configure(self.spec, codec, _topic_of(parent))
        agg = Aggregation(self.spec, init, add, codec, merge, self.retention, self.timestamp)
        return WindowedAggregation(parent, agg, table, columns)

    def count(self, *, name: str | None = None) -> WindowedAggregation:
        """The number of records per key and window; ``name`` names the operator (its state,
        ``driver.late(name)``, the late-record metric)."""
        return self._aggregate("count", int, lambda agg, _v: agg + 1, JsonCodec(), name, operator.add,
                               AggSpec((count_agg(),), scalar=True))

    def agg(self, *aggregations: AggExpr, name: str | None = None) -> WindowedAggregation:
        """Aggregations over column expressions, per key and window:
        ``.agg(count(), sum("amount"))``. The aggregate is a dict, one entry per
        aggregation (``count``, ``sum_amount``, or the name given with ``.alias()``);
        checked against the value's model now, and can run on the columnar path."""
        spec = AggSpec(tuple(aggregations))
        schema, model_name = _value_schema(self.parent)
        spec.check(schema, model_name)
        return self._aggregate("agg", spec.init, spec.adder(), JsonCodec(), name, spec.merge, spec)

    def sum(self, fn: Callable[[Any], Any] | Expr | str | None = None, *,
            name: str | None = None) -> WindowedAggregation:
        """The sum per key and window of ``fn(value)``, of a column (``sum(col("amount"))``
        or ``sum("amount")``: can run on the columnar path), or of the values themselves."""
        if isinstance(fn, Expr | str):
            spec = AggSpec((sum_agg(fn),), scalar=True)
            spec.check(*_value_schema(self.parent))
            return self._aggregate("sum", spec.init, spec.adder(), JsonCodec(), name, spec.merge, spec)
        get = fn or (lambda v: v)
        return self._aggregate("sum", int, lambda agg, v: agg + get(v), JsonCodec(), name, operator.add)

    def reduce(self, fn: Callable[[Any, Any], Any], *, name: str | None = None) -> WindowedAggregation:
        """The values of each key and window folded with ``fn(aggregate, value)`` (the first
        value as it is); session windows that merge fold their results with ``fn`` too."""
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
    """A windowed aggregation: ``.final()`` emits one result per window once it closes,
    ``.current()`` every update; results are ``{"key", "start", "end", "value"}``."""

    def __init__(self, parent: StreamNode, agg: Aggregation, table: WindowState,
                 columns: AggSpec | None = None) -> None:
        self.parent = parent
        self.agg = agg
        self.table = table
        self.columns = columns
        self._emitted = False

    def _emit(self, mode: str) -> StreamNode:
        if self._emitted:
            # Two processors over one store would each add every record to it.
            raise ValueError(f"aggregation {self.table.name!r} already has its output (.final() or .current()); "
                             "declare a second aggregation, with its own name, for another")
        self._emitted = True
        return StreamNode(self.parent.app, "window_aggregate", (self.parent,), path=self.table.name, agg=self.agg,
                          table=self.table, emit=mode, columns=self.columns)

    def final(self) -> StreamNode:
        """One result per window, when it closes (end + grace <= stream time)."""
        return self._emit("final")

    def current(self) -> StreamNode:
        """The updated result of every window a record changes, at once."""
        return self._emit("current")


def _value_schema(node: StreamNode) -> tuple[Schema, str]:
    from streamkit.streams.columnar.plan import value_schema

    return value_schema(node)


def _check_expr(node: StreamNode, expr: Expr, what: str, *, want_bool: bool) -> None:
    """``expr`` over ``node``'s values: its fields exist and its types fit, or a clear error."""
    schema, model_name = _value_schema(node)
    t = expr.dtype(schema, model_name)
    if want_bool and t is not None and t is not bool:
        raise ExprTypeError(f"{what}({expr!r}): the condition is a {t.__name__}, not a bool "
                            "(compare it: col(...) == value)")


def source(app: App, topic: Topic) -> StreamNode:
    """The DSL stream of ``topic``'s records (what ``app.stream(topic)`` returns)."""
    return StreamNode(app, "source", (), path=topic.name, topic=topic)


def _topic_of(node: StreamNode) -> Topic:
    """The topic whose partitions ``node``'s records come from."""
    while True:
        if node.kind in ("source", "group_by"):
            topic: Topic = node.params["topic"]
            return topic
        parent = node.parents[0]
        node = parent.update_stream if isinstance(parent, TableNode) else parent


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


