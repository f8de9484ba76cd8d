"""The compiled DSL: the processors a worker runs for an app's stream graph.

``compile_pipelines`` turns the graph of ``streamkit.streams.dsl`` nodes into one chain of
processors per consumed topic (``CompiledSource``), building each node with the builder of
its kind (``_BUILDERS``): plain functions applied to each record of a fetched batch, with
output records collected in an outbox that is produced after the batch. The stateful ones
(windowed and unwindowed aggregations, stream-stream joins) keep their state in tables and
their stream time as watermarks (``streamkit.streams.watermarks``); ``group_by`` stamps
what it writes to repartition topics with them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson

from streamkit.state.windowed import WindowedTransaction
from streamkit.streams.aggregate import WindowAggregate, close_offset_ms
from streamkit.streams.dsl import App, StreamNode, TableNode, _partitions_of, _topic_of
from streamkit.streams.event import Event
from streamkit.streams.joins import (
    Joined,
    JoinHow,
    JoinWindows,
    expire_stream_join,
    stream_join,
    table_join_update,
)
from streamkit.streams.processing import (
    Context,
    CoPartitionError,
    Emit,
    KeyCodec,
    OperatorTime,
    Out,
    PipelineRuntime,
    Stamper,
    jsonable,
    send_late,
)
from streamkit.streams.topic import Topic, partition_for_key
from streamkit.streams.watermarks import (
    DATA,
    IDLE,
    MARK,
    WM_HEADER,
    InputClock,
    encode_stamp,
    unpack_stamp,
)
from streamkit.streams.windows import MIN_TIMESTAMP

if TYPE_CHECKING:
    from aiokafka.structs import ConsumerRecord

    from streamkit.state.transaction import Transaction
    from streamkit.streams.table import Table

__all__ = ["CompiledSource", "compile_pipelines"]


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
            send_late(ctx, self.key_codec, ev, self.name, own)
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
    # Decodes its records itself (the columnar executor): the runtime hands it none decoded.
    decodes: bool = False

    async def process(self, partition: int, records: list[ConsumerRecord], events: list[Event | None]) -> None:
        """A fetched batch of ``partition``: its ``records`` and their ``events``, decoded by
        the worker for every reader of the topic (None: a bad record, handled there, or a
        watermark-only one)."""
        ctx = self.ctx
        runtime = ctx.runtime
        clock = self.begin(partition)
        wall = ctx.wall
        entry = self.entry
        observe = clock.observe
        if self.stamped:
            for record, event in zip(records, events, strict=True):
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
                if event is not None:
                    ctx.own = own
                    entry(event)
        else:
            for event in events:
                if event is not None:
                    ctx.own = observe(0, event.timestamp, wall)
                    entry(event)
        now = runtime.clock()
        for tick in self.tickers:
            tick(now)
        await self.flush()

    def begin(self, partition: int) -> InputClock:
        """Set the context for a batch of ``partition`` (operators load their stored stream
        time); the partition's clock."""
        ctx = self.ctx
        ctx.partition = partition
        ctx.topic = self.topic.name
        for load in ctx.loaders:
            load(partition)
        clock = ctx.current = ctx.clock(ctx.topic, partition)
        ctx.wall = ctx.runtime.clock()
        return clock

    def mark_idle(self, partition: int) -> None:
        """Tell every downstream partition that this (empty, caught-up) partition has
        nothing: left out of their minimum until it has data."""
        ctx = self.ctx
        for stamper in ctx.stampers.get(self.topic.name, ()):
            stamper.stamp(partition, True)

    async def wake(self, partition: int, tasks: Iterable[int]) -> None:
        """This partition, announced idle, has data now: every downstream partition puts it
        back into its minimum before it sees any record of ``tasks``'s transactions that
        follow (``_Regroup.wake``)."""
        ctx = self.ctx
        ctx.wall = ctx.runtime.clock()
        tasks = tuple(tasks)
        for stamper in ctx.stampers.get(self.topic.name, ()):
            stamper.wake(partition, tasks)
        await self._send()

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
            stamper.stamp(ctx.partition, False)
        await self._send()

    async def _send(self) -> None:
        ctx = self.ctx
        if not ctx.outbox:
            return
        out, ctx.outbox = ctx.outbox, []
        await ctx.runtime.enqueue_many(out)


class _Regroup:
    """``group_by``: re-key, stamp with the watermark (``streamkit.streams.watermarks``) and
    send to the repartition topic's partition of the new key; after each batch, a
    watermark-only record to every partition that has not heard of the latest watermark.

    The records may come from several topics (``merge``, a join's two sides): each feeding
    topic's partitions get their own upstream numbers (``bases[topic] + partition``), so
    downstream stream time is the minimum over every partition of every one of them."""

    def __init__(self, node: StreamNode, ctx: Context, holdback: int, bases: dict[str, int],
                 external: set[str]) -> None:
        self.topic: Topic = node.params["topic"]
        self.key_fn = node.params["fn"]
        self.ctx = ctx
        self.holdback = holdback
        self.bases = bases
        self._single = len(bases) == 1
        # Fed straight from an external topic: the partition's watermark is the largest
        # timestamp so far, which is the record's own watermark (no clock to ask).
        self._own_topics = frozenset(external) if holdback == 0 else frozenset()
        self._own_is_watermark = self._own_topics == frozenset(bases)
        self.partitions = self.topic.partitions or ctx.runtime.settings.num_partitions
        self._sent: dict[tuple[int, int], int] = {}  # (upstream number, to partition) -> watermark

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
        u = p if self._single else p + self.bases[ctx.topic]
        own = ctx.own
        wm = own if self._own_is_watermark or ctx.topic in self._own_topics else self.watermark()
        self._sent[(u, q)] = wm
        ctx.outbox.append(Out(topic, kbytes, vbytes, ev.timestamp, [(WM_HEADER, encode_stamp(DATA, u, wm, own))], q, p))

    def stamper(self, feeding: str) -> Stamper:
        """What stamps watermarks for the partitions of ``feeding``, one of its inputs."""
        return _FeedingStamper(self, feeding)

    def stamp(self, feeding: str, partition: int, idle: bool) -> None:
        ctx = self.ctx
        if idle:
            kind, wm = IDLE, MIN_TIMESTAMP
        else:
            clock = ctx.clocks.get((feeding, partition))
            if clock is None:
                return
            ctx.current, ctx.wall = clock, ctx.runtime.clock()
            kind, wm = MARK, self.watermark()
            if wm == MIN_TIMESTAMP:
                return
        sent, topic = self._sent, self.topic
        u = partition + self.bases[feeding]
        header = [(WM_HEADER, encode_stamp(kind, u, wm))]
        for q in range(self.partitions):
            if sent.get((u, q)) != wm or idle:
                sent[(u, q)] = wm
                # No key, an empty value: a record needs one of the two on the wire.
                ctx.outbox.append(Out(topic, None, b"", ctx.wall, header, q, partition))

    def wake(self, feeding: str, partition: int, tasks: Iterable[int]) -> None:
        """``partition`` of ``feeding`` was announced idle and has data now (records fetched,
        or an open transaction's): a watermark-only record that brings it back into every
        downstream partition's minimum (an input that never had a watermark holds the
        minimum at its lowest), through the transaction of each task in ``tasks``.

        Under exactly-once each task's transaction becomes visible on its own, in any
        order: had only the woken partition's own task said so, a downstream partition could
        read another task's records of the same batch first and close windows by them
        while the woken partition still counted as idle, turning the woken partition's
        records late. Each task's marks precede its records of the batch in the log, so
        whichever transaction commits first carries them."""
        ctx, topic = self.ctx, self.topic
        u = partition + self.bases[feeding]
        header = [(WM_HEADER, encode_stamp(MARK, u, MIN_TIMESTAMP))]
        for task in tasks:
            for q in range(self.partitions):
                self._sent.pop((u, q), None)
                ctx.outbox.append(Out(topic, None, b"", ctx.wall, header, q, task))


@dataclass(frozen=True, slots=True)
class _FeedingStamper:
    """A ``group_by``'s stamps for the partitions of one of its feeding topics."""

    regroup: _Regroup
    feeding: str

    def stamp(self, partition: int, idle: bool) -> None:
        self.regroup.stamp(self.feeding, partition, idle)

    def wake(self, partition: int, tasks: Iterable[int]) -> None:
        self.regroup.wake(self.feeding, partition, tasks)


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
    results at ``end - 1`` once ``end + grace`` passed; join results). Over several inputs
    (``merge``, joins), the longest path."""
    own = 0
    if node.kind in ("source", "group_by"):
        return 0
    if node.kind == "window_aggregate":
        spec = node.params["agg"].spec
        own = close_offset_ms(spec) + getattr(spec, "size_ms", 0) + 1
    elif node.kind == "join_stream":
        windows: JoinWindows = node.params["windows"]
        own = 2 * windows.within_ms + windows.grace_ms
    parents = [p.update_stream if isinstance(p, TableNode) else p for p in node.parents]
    return own + max(_holdback_ms(p) for p in parents)


def _feeding_topics(node: StreamNode) -> list[str]:
    """The topics whose partitions ``node``'s records come from, over every input (a
    ``merge``, a join's two sides), in a fixed order, each once."""
    if node.kind in ("source", "group_by"):
        return [node.params["topic"].name]
    found: list[str] = []
    for parent in node.parents:
        upstream = parent.update_stream if isinstance(parent, TableNode) else parent
        found.extend(t for t in _feeding_topics(upstream) if t not in found)
    return found


Processor = Callable[[Event], None]


class _Graph:
    """What compiling needs: the nodes reachable from the app's sinks, each node's children,
    and what was built so far (a node is built once, however many parents reach it)."""

    def __init__(self, app: App, runtime: PipelineRuntime) -> None:
        self.ctx = Context(runtime)
        self.runtime = runtime
        self.app = app
        self.downstream: dict[int, list[StreamNode]] = {}
        self.nodes: dict[int, StreamNode] = {}
        for sink in app.streams:
            self._visit(sink)
        self.built: dict[int, Processor] = {}
        self.joins: dict[int, _StreamJoin] = {}
        self.tickers: list[Callable[[int], None]] = []
        self.repartitions = {n.params["topic"].name: n for n in self.nodes.values() if n.kind == "group_by"}
        self.topics: dict[str, Topic] = {n.params["topic"].name: n.params["topic"] for n in self.nodes.values()
                                         if n.kind in ("source", "group_by")}

    def partition_count(self, topic: str) -> int | None:
        declared = self.topics[topic].partitions if topic in self.topics else None
        count = declared or self.runtime.topic_partitions(topic)
        if count is None and topic in self.repartitions:
            return self.runtime.settings.num_partitions  # what the runtime creates it with
        return count

    def upstream_bases(self, node: StreamNode) -> dict[str, int]:
        """Each topic feeding ``node`` -> the first upstream number of its partitions (a
        repartition topic fed by several topics numbers their partitions one after the other)."""
        bases: dict[str, int] = {}
        total = 0
        feeding = _feeding_topics(node)
        for topic in feeding:
            bases[topic] = total
            if len(feeding) > 1:
                count = self.partition_count(topic)
                if count is None:
                    raise ValueError(f"cannot tell how many partitions {topic!r} has: declare "
                                     f"app.topic({topic!r}, partitions=N) to merge it before a group_by")
                total += count
        return bases

    def _visit(self, node: StreamNode) -> None:
        if node.id in self.nodes:
            return
        self.nodes[node.id] = node
        for parent in node.parents:
            assert isinstance(parent, StreamNode)
            self.downstream.setdefault(parent.id, []).append(node)
            self._visit(parent)

    def emitter(self, node: StreamNode) -> Processor:
        """A function sending ``node``'s output to all of its children."""
        children = [self.input_of(child, node) for child in self.downstream.get(node.id, [])]
        return children[0] if len(children) == 1 else _fan_out(children)

    def input_of(self, node: StreamNode, parent: StreamNode) -> Processor:
        """Where ``parent``'s records enter ``node`` (a stream-stream join has one entry per side)."""
        if node.kind == "join_stream":
            join = self.joins.get(node.id)
            if join is None:
                _check_copartitioned("stream-stream join", *(_partitions_of(p) for p in node.parents))
                join = self.joins[node.id] = _StreamJoin(node, self.emitter(node), self.ctx)
                self.tickers.append(join.tick)
                self.ctx.operators.append(join)
            return join.side(node.parents.index(parent))
        return self.processor(node)

    def processor(self, node: StreamNode) -> Processor:
        built = self.built.get(node.id)
        if built is None:
            builder = _BUILDERS.get(node.kind)
            if builder is None:
                raise ValueError(f"unknown DSL node kind {node.kind!r}")
            built = self.built[node.id] = builder(self, node)
        return built

    def sources(self) -> list[CompiledSource]:
        ctx = self.ctx
        # A repartition topic's partitions are fed by every partition of the topic before it:
        # its stream time is the minimum over that many watermarks.
        for name, node in self.repartitions.items():
            parent = node.parents[0]
            assert isinstance(parent, StreamNode)
            feeding = _feeding_topics(parent)
            if len(feeding) == 1:
                ctx.upstream[name] = self.partition_count(feeding[0])
            else:
                last = feeding[-1]
                count = self.partition_count(last)
                ctx.upstream[name] = None if count is None else self.upstream_bases(parent)[last] + count
        # One chain per topic, however many ``app.stream(topic)`` nodes read it: a record
        # moves the partition's clock once, before any processor sees it.
        readers: dict[str, list[StreamNode]] = {}
        for node in self.nodes.values():
            if node.kind == "source":
                readers.setdefault(node.params["topic"].name, []).append(node)
        out: list[CompiledSource] = []
        for name, same_topic in readers.items():
            entries = [self.processor(node) for node in same_topic]
            entry = entries[0] if len(entries) == 1 else _fan_out(entries)
            columnar = self.columnar(name, entry)
            out.append(columnar or CompiledSource(same_topic[0].params["topic"], entry, ctx, self.tickers))
        # One source per repartition topic (several group_by nodes may share a name).
        for node in self.repartitions.values():
            out.append(CompiledSource(node.params["topic"], self.emitter(node), ctx, self.tickers, stamped=True))
        return out


    def columnar(self, topic: str, entry: Processor) -> CompiledSource | None:
        """``topic``'s chain on the columnar executor, if every step allows it
        (``streamkit.streams.columnar.plan``); the row chain ``entry`` stays for batches
        it refuses."""
        if topic in self.repartitions or not self.runtime.settings.dsl_columnar:
            return None
        from streamkit.streams.columnar.executor import ColumnarSource
        from streamkit.streams.columnar.plan import columnar_chain

        chain = columnar_chain(self.app, topic, external=True)
        if chain is None:
            return None
        aggregate = getattr(self.processor(chain.aggregate), "__self__", None)
        return ColumnarSource(chain.source.params["topic"], entry, self.ctx, self.tickers, chain=chain,
                              aggregate=aggregate)


def compile_pipelines(app: App, runtime: PipelineRuntime) -> list[CompiledSource]:
    """Build the processors of every node reachable from the app's sinks: one builder per
    operator kind (``_BUILDERS``), each returning the function a record goes through."""
    return _Graph(app, runtime).sources()


# -- one builder per operator ------------------------------------------------------------


def _build_to(g: _Graph, node: StreamNode) -> Processor:
    topic: Topic = node.params["topic"]
    ctx = g.ctx

    def to(ev: Event) -> None:
        k, v = topic.encode(ev.key, ev.value)
        ctx.outbox.append(Out(topic, k, v, ev.timestamp, task=ctx.partition))  # the context's current outbox

    # What a windowed aggregation emitting straight into this sink may write itself, a
    # window at a time, without an Event per result (``WindowAggregate._finals``).
    setattr(to, "sink_topic", topic)  # noqa: B010
    return to


def _build_foreach(g: _Graph, node: StreamNode) -> Processor:
    call = node.params["fn"]
    return lambda ev: call(ev.key, ev.value)


def _build_pass(g: _Graph, node: StreamNode) -> Processor:
    """Sources, merges and a branch's outputs pass records on unchanged."""
    return g.emitter(node)


def _build_filter(g: _Graph, node: StreamNode) -> Processor:
    pred, emit = node.params["fn"], g.emitter(node)
    return lambda ev: emit(ev) if pred(ev.value) else None


def _build_map(g: _Graph, node: StreamNode) -> Processor:
    fn, emit = node.params["fn"], g.emitter(node)

    def mapped(ev: Event) -> None:
        emit(Event(ev.key, fn(ev.value), ev.timestamp, ev.headers, ev.topic, ev.partition, ev.offset))

    return mapped


def _build_map_key(g: _Graph, node: StreamNode) -> Processor:
    fn, emit = node.params["fn"], g.emitter(node)
    return lambda ev: emit(Event(fn(ev.key, ev.value), ev.value, ev.timestamp, ev.headers, ev.topic, ev.partition,
                                 ev.offset))


def _build_flat_map(g: _Graph, node: StreamNode) -> Processor:
    fn, emit = node.params["fn"], g.emitter(node)

    def flat(ev: Event) -> None:
        for value in fn(ev.value):
            emit(Event(ev.key, value, ev.timestamp, ev.headers, ev.topic, ev.partition, ev.offset))

    return flat


def _build_peek(g: _Graph, node: StreamNode) -> Processor:
    fn, emit = node.params["fn"], g.emitter(node)

    def peeked(ev: Event) -> None:
        fn(ev.value)
        emit(ev)

    return peeked


def _build_branch(g: _Graph, node: StreamNode) -> Processor:
    predicates = node.params["predicates"]
    children = g.downstream.get(node.id, [])
    outs = [[g.input_of(child, node) for child in children if child.params["index"] == i]
            for i in range(len(predicates))]

    def branch(ev: Event) -> None:
        for i, pred in enumerate(predicates):
            if pred(ev.value):
                for out in outs[i]:
                    out(ev)
                return

    return branch


def _build_group_by(g: _Graph, node: StreamNode) -> Processor:
    upstream = node.parents[0]
    assert isinstance(upstream, StreamNode)
    bases = g.upstream_bases(upstream)
    regroup = _Regroup(node, g.ctx, _holdback_ms(upstream), bases, {t for t in bases if t not in g.repartitions})
    for feeding in bases:
        g.ctx.stampers.setdefault(feeding, []).append(regroup.stamper(feeding))
    return regroup


def _build_window_aggregate(g: _Graph, node: StreamNode) -> Processor:
    p = node.params
    _check_state_partitions("windowed aggregation", node, p["table"])
    agg = WindowAggregate(p["agg"], p["table"], p["emit"], g.emitter(node), g.ctx)
    g.tickers.append(agg.tick)
    g.ctx.operators.append(agg)
    return agg.process


def _build_table_aggregate(g: _Graph, node: StreamNode) -> Processor:
    aggregation = _TableAggregate(node, g.emitter(node), g.ctx)
    _check_state_partitions(f"aggregation {aggregation.table.name!r}", node, aggregation.table)
    g.ctx.commit_hooks.append(aggregation.emit_updates)
    return aggregation.process


def _build_to_table(g: _Graph, node: StreamNode) -> Processor:
    table: Table = node.params["table"]
    _check_state_partitions(f"to_table({table.name!r})", node, table)
    parent = node.parents[0]
    feeding = parent.update_stream if isinstance(parent, TableNode) else parent
    table.fed_by(_topic_of(feeding).name)  # its keys are located by that topic's partitioner
    ctx, emit = g.ctx, g.emitter(node)

    def materialize(ev: Event) -> None:
        txn = ctx.txn(table)
        kb = table.key_codec.dumps(ev.key)
        if ev.value is None:
            txn.delete(kb)
        else:
            txn.set(kb, table.value_codec.dumps(ev.value))
        emit(ev)

    return materialize


def _build_join_table(g: _Graph, node: StreamNode) -> Processor:
    table: Table = node.params["table"]
    how, joiner = node.params["how"], node.params["joiner"]
    ctx, emit = g.ctx, g.emitter(node)
    read: Callable[[Any], Any]
    if table.is_global:
        # Every worker holds all of a global table: any partitioning joins with it.
        read = table.get
    else:
        _check_copartitioned(f"join with table {table.name!r}", _partitions_of(node.parents[0]),
                             (table.name, table.partitions))

        def read_partition(key: Any) -> Any:
            raw = ctx.txn(table).get(table.key_codec.dumps(key))
            return None if raw is None else table.value_codec.loads(raw)

        read = read_partition

    def lookup(ev: Event) -> None:
        right = read(ev.key)
        if right is None and how == "inner":
            return
        emit(Event(ev.key, joiner(ev.value, right), ev.timestamp, ev.headers, ev.topic, ev.partition, ev.offset))

    return lookup


def _build_join_tables(g: _Graph, node: StreamNode) -> Processor:
    left, right = node.params["tables"]
    how, joiner = node.params["how"], node.params["joiner"]
    _check_copartitioned("table-table join", (left.name, left.partitions), (right.name, right.partitions))
    ctx, emit = g.ctx, g.emitter(node)

    def value(table: Table, key: Any) -> Any:
        raw = ctx.txn(table).get(table.key_codec.dumps(key))
        return None if raw is None else table.value_codec.loads(raw)

    def on_update(ev: Event) -> None:
        update = table_join_update(how, value(left, ev.key), value(right, ev.key), deleted=ev.value is None)
        if update is not None:
            joined = None if update.pair is None else joiner(*update.pair)
            emit(Event(ev.key, joined, ev.timestamp, ev.headers, ev.topic, ev.partition, ev.offset))

    return on_update


_BUILDERS: dict[str, Callable[[_Graph, StreamNode], Processor]] = {
    "to": _build_to,
    "foreach": _build_foreach,
    "source": _build_pass,
    "merge": _build_pass,
    "branch_out": _build_pass,
    "filter": _build_filter,
    "map": _build_map,
    "map_key": _build_map_key,
    "flat_map": _build_flat_map,
    "peek": _build_peek,
    "branch": _build_branch,
    "group_by": _build_group_by,
    "window_aggregate": _build_window_aggregate,
    "table_aggregate": _build_table_aggregate,
    "to_table": _build_to_table,
    "join_table": _build_join_table,
    "join_tables": _build_join_tables,
}


def _fan_out(entries: list[Callable[[Event], None]]) -> Callable[[Event], None]:
    def fan_out(ev: Event) -> None:
        for entry in entries:
            entry(ev)

    return fan_out
