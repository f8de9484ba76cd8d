"""Windowed aggregations of the DSL: the processor over a windowed store, and that store as
a queryable table.

Closing and retention are separate, as in Kafka Streams: a window *closes* when stream time
reaches ``end + grace`` (``end + gap + grace`` for sessions); it then takes no more records
and, with ``.final()``, its result is emitted. It *expires* (leaves the store) once
``end + expires <= stream time``; until then interactive queries still see it. Without
``expires`` a window leaves the store as soon as it can (at its close; sliding windows
``size + 1`` later, since they seed newer windows until then: ``min_retention_ms``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import orjson
from pydantic import BaseModel

from streamkit.state.windowed import Window as StoredWindow
from streamkit.state.windowed import WindowedTransaction
from streamkit.streams.codecs import Codec
from streamkit.streams.event import Event, TimestampExtractor, extract_timestamp
from streamkit.streams.processing import (
    Context,
    Emit,
    KeyCodec,
    OperatorTime,
    Out,
    OutputCodec,
    WindowResult,
    jsonable,
    send_late,
)
from streamkit.streams.table import Table, TableNotOwned
from streamkit.streams.topic import Topic
from streamkit.streams.watermarks import WM_HEADER, unpack_stamp
from streamkit.streams.window_cache import CachedWindows
from streamkit.streams.windows import (
    MIN_TIMESTAMP,
    HoppingWindows,
    SessionWindows,
    SlidingWindows,
    TumblingWindows,
    Window,
    WindowSpec,
    apply_sliding_plan,
    duration_ms,
    is_late,
    merge_session,
    min_retention_ms,
    plan_sliding,
    sliding_scan_range,
)

if TYPE_CHECKING:
    from streamkit.state.transaction import Transaction

__all__ = ["WindowAggregate", "WindowState", "close_offset_ms", "retention_ms"]


def close_offset_ms(spec: WindowSpec) -> int:
    """How long after its end a window closes (stream time ``end + this``)."""
    return spec.grace_ms + (spec.gap_ms if isinstance(spec, SessionWindows) else 0)


def retention_ms(spec: WindowSpec, expires: int | timedelta | None) -> int:
    """How long after its end a window stays stored: ``expires``, at least what the window
    arithmetic needs (``min_retention_ms``: closing, and seeding for sliding windows)."""
    least = min_retention_ms(spec)
    if expires is None:
        return least
    ms = duration_ms(expires)
    if ms < least:
        raise ValueError(f"expires ({ms} ms) must be at least {least} ms for these windows (a window must "
                         "stay stored until it closes: grace, plus the gap for sessions and size + 1 for "
                         "sliding windows)")
    return ms


class WindowState(Table):
    """The store of a windowed aggregation, queryable like a windowed table:
    ``query(key)`` (and ``GET /tables/{name}/{key}``) lists the key's stored windows, open
    and closed-but-not-expired, as ``[{"start", "end", "value"}, ...]``.

    Keys are stored as JSON (any JSON-able key). State partition p holds the records of
    partition p of the topic feeding the aggregation (``route``), so a key's partition is
    its partition there: Kafka's default partitioner over the key in that topic's codec."""

    _keys = KeyCodec()

    def configure(self, spec: WindowSpec, codec: Codec, route: Topic) -> None:
        self.spec = spec
        self.codec = codec
        self.route = route
        self.queryable = True
        self.fed_by(route.name)

    def decode(self, raw: bytes) -> Any:
        """A stored aggregate (sliding windows keep ``[aggregate, max timestamp]``)."""
        if isinstance(self.spec, SlidingWindows):
            agg_raw, _max_ts = orjson.loads(raw)
            return self.codec.loads(agg_raw.encode("latin-1"))
        return self.codec.loads(raw)

    def partition_of(self, key: Any) -> int:
        return self._partitioner()[0](self.route.key_codec.dumps(key), self.route.partitions or self.partitions)

    def parse_key(self, text: str) -> Any:
        """Queried by the keys of the topic feeding the aggregation."""
        return self.route.key_codec.loads(text.encode())

    def _windows(self, key: Any) -> list[StoredWindow]:
        self._write_all_dirty()
        if self._partitioner()[1]:
            p = self.partition_of(key)
            txn = self._txns.get(p)
            if txn is None:
                raise TableNotOwned(f"table {self.name!r}: key {key!r} is in partition {p}, which this worker "
                                    "does not own")
            txns, complete = [txn], True
        else:
            # The feeding topic's partitioner is not known yet: look in every local partition.
            txns, complete = [self._txns[p] for p in sorted(self._txns)], len(self._txns) >= self.partitions
        for txn in txns:
            found = list(WindowedTransaction(txn).iter_windows(self._keys.dumps(key)))
            if found:
                return found
        if not complete:
            raise TableNotOwned(f"table {self.name!r}: key {key!r} is not on this worker")
        return []

    def query(self, key: Any) -> Any:
        windows = self._windows(key)
        if not windows:
            raise KeyError(key)
        return [self._window_json(w) for w in windows]

    def snapshot(self, limit: int = 1000) -> dict[str, Any]:
        self._write_all_dirty()
        out: dict[str, Any] = {}
        for p in sorted(self._txns):
            for w in WindowedTransaction(self._txns[p]).iter_all_windows():
                key = self._keys.loads(w.key)
                if str(key) not in out and len(out) >= limit:
                    return out
                out.setdefault(str(key), []).append(self._window_json(w))
        return out

    def _window_json(self, w: StoredWindow) -> dict[str, Any]:
        return {"start": w.start_ms, "end": w.end_ms, "value": jsonable(self.decode(w.value))}


@dataclass(frozen=True, slots=True)
class Aggregation:
    """What ``.window(...).count()`` (and the others) declared."""

    spec: WindowSpec
    init: Callable[[], Any]
    add: Callable[[Any, Any], Any]
    codec: Codec
    merge: Callable[[Any, Any], Any] | None
    retention_ms: int
    timestamp: TimestampExtractor | None


class WindowAggregate:
    """Windowed aggregation over a windowed store (one value per key and window)."""

    def __init__(self, agg: Aggregation, table: WindowState, mode: str, emit: Emit, ctx: Context) -> None:
        self.spec = agg.spec
        self.init = agg.init
        self.add = agg.add
        self.codec = agg.codec
        self.merge = agg.merge
        self.extract = agg.timestamp
        self.table = table
        self.name = table.name
        self.mode = mode
        self.emit = emit
        self.ctx = ctx
        # With its own timestamp extractor, the operator's time is its own (the input's
        # clock runs on other timestamps): per upstream partition of a repartitioned input
        # (its records' stamps say which), the largest extracted timestamp it sent here, and
        # the minimum over them. Nothing carries extracted time in watermark-only records,
        # so an upstream partition that sends this partition no data holds it until it does,
        # declares itself empty, or window.idle.close.ms lets it go.
        self._own_clock = f"{table.name}@timestamp" if self.extract is not None else None
        if self._own_clock is not None:
            ctx.upstream[self._own_clock] = ctx.upstream.get(table.route.name)
        self.times = OperatorTime(ctx, (self._own_clock or table.route.name,))
        ctx.loaders.append(self._load)
        self.key_codec = KeyCodec()
        spec = self.spec
        self.fixed = (CachedWindows(spec.size_ms, spec.advance_ms, spec.grace_ms, agg.init, agg.add, agg.codec)
                      if isinstance(spec, TumblingWindows | HoppingWindows) else None)
        table.windows_cache = self.fixed  # the table flushes it before commits and queries
        self.current = mode == "current"
        self._updated = self._current_result if self.current else None
        self._event: Event | None = None  # the record being folded (for ``.current()`` results)
        self.close_offset = close_offset_ms(spec)
        self.retention = agg.retention_ms
        # Final results going straight into a topic in the DSL's JSON: ``_finals`` encodes
        # them itself, as the sink would (no Event, WindowResult or sink call per window).
        sink: Topic | None = getattr(emit, "sink_topic", None)
        self._sink = sink if sink is not None and type(sink.value_codec) is OutputCodec else None

    def _load(self, partition: int) -> None:
        txn = self.table._txns.get(partition)
        if txn is not None:
            self.times.load(partition, txn)

    def process(self, ev: Event) -> None:
        if self.extract is not None:
            ev = Event(ev.key, ev.value, extract_timestamp(self.extract, ev), ev.headers, ev.topic, ev.partition,
                       ev.offset)
        txn = self.ctx.txn(self.table)
        # Lateness is judged by the record's own partition's watermark (Kafka observes the
        # record's timestamp first): independent of how partitions interleave. Windows
        # close by the operator's stream time, the minimum over its inputs, in tick().
        if self._own_clock is not None:
            now = self._observe_extracted(self._own_clock, ev)
        else:
            own = self.ctx.own
            now = ev.timestamp if ev.timestamp > own else own
        # A window the operator closed is final, also for an input that was idle then (left
        # out of the minimum) and comes back behind it.
        closed = self.times.closed.get(self.ctx.partition, MIN_TIMESTAMP)
        if closed > now:
            now = closed
        fixed = self.fixed
        if fixed is not None:
            # The per-record path of the most common aggregation: aggregates stay decoded
            # across batches (``window_cache``).
            self._event = ev
            if fixed.current_txn is not txn:
                fixed.use(self.ctx.partition, txn)
            if not fixed.update(orjson.dumps(ev.key), ev.timestamp, ev.value, now, self._updated):
                self._late(ev, now)
            return
        view = WindowedTransaction(txn)
        kb = self.key_codec.dumps(ev.key)
        spec = self.spec
        if isinstance(spec, SlidingWindows):
            self._sliding(spec, view, kb, ev, now)
        elif isinstance(spec, SessionWindows):
            self._session(spec, view, kb, ev, now)

    def _observe_extracted(self, name: str, ev: Event) -> int:
        """Move the extracted-time clock by ``ev``; the watermark of its upstream partition."""
        ctx = self.ctx
        clock = ctx.clock(name, ctx.partition)
        source = 0
        if clock.upstream:
            headers = ev.headers
            if headers and headers[-1][0] == WM_HEADER:
                source = unpack_stamp(headers[-1][1])[1]
            else:
                clock.upstream = None  # not written by a DSL task: its timestamps are all there is
        return clock.observe(source, ev.timestamp, ctx.wall)

    def _late(self, ev: Event, watermark: int) -> None:
        send_late(self.ctx, self.key_codec, ev, self.table.name, watermark)

    def _result(self, ev_key: Any, w: Window, agg: Any, ts: int) -> None:
        self._emit(Event(ev_key, WindowResult(ev_key, w.start, w.end, agg), ts, [], "", self.ctx.partition, -1))

    def _emit(self, ev: Event) -> None:
        # A result is on time downstream: its own watermark is its timestamp (the chain's
        # watermark downstream is held back by this operator's close offset, see dsl).
        ctx = self.ctx
        own, ctx.own = ctx.own, ev.timestamp
        try:
            self.emit(ev)
        finally:
            ctx.own = own

    def _current_result(self, start: int, end: int, agg: Any) -> None:
        ev = self._event
        assert ev is not None
        self._result(ev.key, Window(start, end), agg, ev.timestamp)

    def _sliding(self, spec: SlidingWindows, view: WindowedTransaction, kb: bytes, ev: Event, now: int) -> None:
        lo, hi = sliding_scan_range(spec, ev.timestamp)
        stored: dict[int, tuple[Any, int]] = {}
        for w in view.iter_windows(kb, lo, hi):
            agg_raw, max_ts = orjson.loads(w.value)
            stored[w.start_ms] = (self.codec.loads(agg_raw.encode("latin-1")), max_ts)
        plan = plan_sliding(spec, ev.timestamp, {s: m for s, (_a, m) in stored.items()}).without_closed(
            spec.grace_ms, now)
        if not plan.update and not plan.create:
            self._late(ev, now)
            return
        # apply_sliding_plan reads (aggregate, max timestamp) per start: a seeded window copies
        # both. (Passing aggregates alone crashed the worker at the first seeded window.)
        results = apply_sliding_plan(plan, ev.timestamp, ev.value, stored, self.init, self.add)
        size = spec.size_ms + 1
        for start, (agg, max_ts) in results.items():
            payload = orjson.dumps([self.codec.dumps(agg).decode("latin-1"), max_ts])
            view.update_window(kb, start, start + size, payload)
            if self.current:
                self._result(ev.key, Window(start, start + size), agg, ev.timestamp)

    def _session(self, spec: SessionWindows, view: WindowedTransaction, kb: bytes, ev: Event, now: int) -> None:
        ts = ev.timestamp
        # Closed sessions are final even while still stored (until they expire): merging one
        # would reopen it, and whether that happened depended on where the batch boundaries
        # fell. A record within gap of one starts or joins an open session instead, as if
        # the closed one were already gone.
        near = [w for w in view.iter_windows(kb, None, ts + spec.gap_ms + 1)
                if w.end_ms + spec.gap_ms > ts and not is_late(w.end_ms + spec.gap_ms, spec.grace_ms, now)]
        sessions = {Window(w.start_ms, w.end_ms): w.value for w in near}
        merged, replaced = merge_session(spec.gap_ms, sorted(sessions), ts)
        if is_late(merged.end + spec.gap_ms, spec.grace_ms, now):
            self._late(ev, now)
            return
        agg = self.init()
        first = True
        for w in replaced:
            part = self.codec.loads(sessions[w])
            agg = part if first else self._merge(agg, part)
            first = False
            view.delete_window(kb, w.start, w.end)
        agg = self.add(agg, ev.value)
        view.update_window(kb, merged.start, merged.end, self.codec.dumps(agg))
        if self.current:
            self._result(ev.key, merged, agg, ts)

    def _merge(self, a: Any, b: Any) -> Any:
        """Merging two session aggregates with the aggregation's merger (count and sum add,
        reduce reduces, aggregate needs ``merger=``)."""
        assert self.merge is not None, "session aggregations are declared with a merger"
        return self.merge(a, b)

    def close(self, partition: int, txn: Transaction, now: int) -> None:
        """Emit (final mode) the windows that closed since the last close, and drop the
        windows past retention."""
        if now == MIN_TIMESTAMP:
            return
        view = WindowedTransaction(txn)
        closed_before = self.times.closed.get(partition, MIN_TIMESTAMP)
        self.times.closed[partition] = now
        offset, fixed = self.close_offset, self.fixed
        if self.retention == offset:
            # Windows leave the store as they close: the cache has them by end, or one scan
            # of the store finds and deletes them.
            cached = None if fixed is None else fixed.expire(partition, txn, now - offset)
            if cached is not None:
                if self.mode == "final":
                    self._results(cached)
                return
            expired = view.expire_windows(now - offset)
            if self.mode == "final":
                self._finals(expired)
            return
        if fixed is not None:
            fixed.flush(partition, txn)  # the scans below read the store
        if self.mode == "final" and now > closed_before:
            after = None if closed_before == MIN_TIMESTAMP else closed_before - offset
            self._finals(view.windows_ending(after, now - offset))
        view.expire_windows(now - self.retention)
        if fixed is not None:
            fixed.forget(partition, txn, now - self.retention)

    def _finals(self, windows: list[StoredWindow]) -> None:
        """Emit the results of closed ``windows``, in order."""
        decode = self.table.decode
        self._results([(w.key, w.start_ms, w.end_ms, decode(w.value)) for w in windows])

    def _results(self, windows: list[tuple[bytes, int, int, Any]]) -> None:
        """Emit the results of closed windows ``(key, start, end, aggregate)``, in order."""
        sink = self._sink
        if sink is None:
            for kb, start, end, agg in windows:
                key = self.key_codec.loads(kb)
                self._emit(Event(key, WindowResult(key, start, end, agg), end - 1, [], "", self.ctx.partition, -1))
            return
        # What ``_emit`` of the WindowResult and the sink do (``Topic.encode`` of the WindowResult with the
        # OutputCodec), a window at a time.
        ctx = self.ctx
        outbox, task = ctx.outbox, ctx.partition
        key_loads, key_dumps = self.key_codec.loads, sink.key_codec.dumps
        dumps, option = orjson.dumps, orjson.OPT_NON_STR_KEYS
        for kb, start, end, agg in windows:
            key = key_loads(kb)
            if isinstance(agg, BaseModel):
                agg = agg.model_dump(mode="json")
            value = dumps({"key": key, "start": start, "end": end, "value": agg}, option=option)
            outbox.append(Out(sink, None if key is None else key_dumps(key), value, end - 1, task=task))

    def tick(self, now_wall: int) -> None:
        """After each batch: close the windows the batch's partition can close (once per
        batch, not per record: a close is a range scan); then, with window.idle.close.ms,
        close what idleness lets every other owned partition close."""
        ctx = self.ctx
        p = ctx.partition
        txn = self.table._txns.get(p)
        if txn is not None:
            self._close_to_now(p, txn)
        elif self.fixed is not None:
            self.fixed.drop(p)  # the partition was revoked under the batch: nothing to keep
        if not ctx.idle_ms:
            return
        # Every owned partition, not only those that saw a record since the worker started:
        # one restored with open windows must close them by wall clock too.
        for idle_p, idle_txn in list(self.table._txns.items()):
            if idle_p != p:
                ctx.partition = idle_p
                self._close_to_now(idle_p, idle_txn)
        ctx.partition = p

    def _close_to_now(self, partition: int, txn: Transaction) -> None:
        if self._own_clock is not None:
            # Upstream partitions that declared themselves empty hold extracted time back no more.
            ctx = self.ctx
            feeding = ctx.clocks.get((self.table.route.name, partition))
            if feeding is not None and feeding.idle:
                own = ctx.clock(self._own_clock, partition)
                for source in feeding.idle:
                    own.mark_idle(source)
        now = self.times.now(partition, txn)
        if now > self.times.closed.get(partition, MIN_TIMESTAMP):
            self.close(partition, txn, now)
        self.times.persist(partition, txn)

    def stream_time(self, partition: int) -> tuple[int, int] | None:
        """(stream time, lag behind the furthest input) at ``partition``, for /metrics."""
        txn = self.table._txns.get(partition)
        return None if txn is None else self.times.report(partition, txn)
