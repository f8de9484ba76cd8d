"""The columnar executor: a source topic's chain (``plan.ColumnarChain``), a fetch batch at a time.

For a batch of one partition:

1. its values are decoded into Arrow columns in one call (pyarrow's JSON reader; with a
   model, against the model's fields and types);
2. the filters run as Arrow compute kernels, giving one mask;
3. the partition's watermark before each record is the running maximum of the timestamps
   (what the row path's clock gives record by record), so lateness is still judged per
   record: a record is late when every window it falls in has ``end + grace`` at or before
   its own watermark (or the operator's closed time);
4. windows are assigned arithmetically over the timestamp column;
5. the on-time records are pre-aggregated per (key, window) with Arrow's hash
   aggregations, and each partial aggregate is merged into the operator's cached windows
   (``window_cache``): no store read for a window the partition has seen;
6. the operator's ``tick`` then closes windows and emits results, exactly as after a
   row-path batch; the changed windows reach the store and its changelog (one record per
   key per commit) at the commit.

A batch the decode refuses (a tombstone, a value that is not a JSON object, a field that
does not fit the model, a key the key codec refuses) runs on the row path instead, which
handles bad records by ``deserialization.exception.handler``: the results are the same.
"""

from __future__ import annotations

import builtins
import io
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, cast

import numpy as np
import orjson

from streamkit.streams.codecs import CodecError
from streamkit.streams.columnar.aggs import AggSpec
from streamkit.streams.columnar.expr import _SCALARS, _scalar
from streamkit.streams.pipeline import CompiledSource
from streamkit.streams.processing import send_late
from streamkit.streams.windows import MIN_TIMESTAMP, HoppingWindows, TumblingWindows

if TYPE_CHECKING:
    import pyarrow as pa
    from aiokafka.structs import ConsumerRecord
    from pydantic import BaseModel

    from streamkit.streams.aggregate import WindowAggregate
    from streamkit.streams.columnar.plan import ColumnarChain
    from streamkit.streams.event import Event

__all__ = ["ColumnarSource", "arrow_schema"]


@dataclass(slots=True)
class _Batch:
    """What a batch adds: its late records (indexes, with the watermark that closed their
    windows) and one partial aggregate per (key index, window start)."""

    late: np.ndarray
    now: np.ndarray
    keys: list[int]
    starts: list[int]
    results: dict[str, list[Any]]
    names: list[str]
    state_keys: list[bytes] = field(default_factory=list)


class _Decoding(Protocol):
    def decode(self, topic: Any, record: Any, partition: int) -> Event | None: ...


def arrow_schema(model: type[BaseModel]) -> tuple[pa.Schema, frozenset[str]] | None:
    """The Arrow schema of ``model``'s fields and the names of those that must not be null;
    None if a field is not a scalar (a list, a nested model: only pydantic decodes those)."""
    import pyarrow as pa

    types = {int: pa.int64(), float: pa.float64(), str: pa.string(), bool: pa.bool_()}
    fields = []
    required: set[str] = set()
    for name, info in model.model_fields.items():
        t = _scalar(info.annotation)
        if t not in _SCALARS:
            return None
        fields.append(pa.field(info.alias or name, types[t]))
        # A null in a field that cannot be None (missing, or JSON null): pydantic decides
        # (a default, or a validation error), so the batch goes to the row path.
        nullable = info.annotation is None or type(None) in getattr(info.annotation, "__args__", ())
        if not nullable:
            required.add(info.alias or name)
    return pa.schema(fields), frozenset(required)


_KEY_CACHE = 100_000  # raw keys whose state keys are remembered across batches
_COLUMN_TYPES = ("int64", "double", "string", "bool", "null")


@dataclass(eq=False)
class ColumnarSource(CompiledSource):
    """A ``CompiledSource`` whose chain runs on columns (the row chain stays, for batches
    the columnar decode refuses)."""

    chain: ColumnarChain | None = None
    aggregate: WindowAggregate | None = None
    decodes: bool = True  # the runtime hands it undecoded records
    columnar_batches: int = 0
    row_batches: int = 0
    _schema: Any = field(default=None, init=False)
    _required: frozenset[str] = field(default=frozenset(), init=False)
    _state_keys: dict[bytes, bytes] = field(default_factory=dict, init=False)  # raw key -> state key

    def __post_init__(self) -> None:
        assert self.chain is not None and self.aggregate is not None
        if self.chain.model is not None:
            found = arrow_schema(self.chain.model)
            if found is None:
                raise ValueError("a model with non-scalar fields has no columnar plan")
            self._schema, self._required = found

    async def process(self, partition: int, records: list[ConsumerRecord], events: list[Event | None]) -> None:
        table = self._decode(records)
        keys = None if table is None else self._keys(records)
        batch = None
        if table is not None and keys is not None:
            clock = self.begin(partition)
            ctx = self.ctx
            ts = np.fromiter((r.timestamp for r in records), dtype=np.int64, count=len(records))
            before = clock.observe(0, MIN_TIMESTAMP, ctx.wall)  # the watermark before this batch: unmoved
            own = np.maximum.accumulate(ts)
            if before != MIN_TIMESTAMP:
                own = np.maximum(own, before)
            batch = self._compute(partition, table, keys, ts, own)
        if batch is None:
            self.row_batches += 1
            if len(events) != len(records):  # the runtime left decoding to us
                decode = cast(_Decoding, self.ctx.runtime).decode
                events = [decode(self.topic, r, partition) for r in records]
            await super().process(partition, records, events)
            return
        self.columnar_batches += 1
        ctx = self.ctx
        ctx.own = clock.observe(0, int(ts.max()), ctx.wall)
        self._apply(partition, records, batch)
        now = ctx.runtime.clock()
        for tick in self.tickers:
            tick(now)
        await self.flush()

    def _decode(self, records: list[ConsumerRecord]) -> pa.Table | None:
        """The batch's values as columns, or None when the row path must take the batch."""
        import pyarrow as pa
        import pyarrow.json as pajson

        values = [r.value for r in records]
        if None in values:
            return None
        payload = b"\n".join(values)
        assert self.chain is not None
        needed = self.chain.spec.columns().union(*(f.columns() for f in self.chain.filters))
        if self._schema is not None:
            options = pajson.ParseOptions(explicit_schema=self._schema, unexpected_field_behavior="ignore")
        elif not needed:
            # Nothing to read: the JSON is checked (a bad value goes to the row path, which
            # dead-letters it), no column is built.
            options = pajson.ParseOptions(explicit_schema=pa.schema([]), unexpected_field_behavior="ignore")
        else:
            options = pajson.ParseOptions()
        try:
            table = pajson.read_json(io.BytesIO(payload), parse_options=options,
                                     read_options=pajson.ReadOptions(use_threads=False,
                                                                     block_size=max(1 << 20, len(payload) + 1)))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            return None
        if table.num_rows != len(records):
            return None  # a value held a newline (pretty-printed JSON): lines are not records
        for name in self._required:
            if table.column(name).null_count:
                return None
        for name in needed:
            if name not in table.column_names:
                table = table.append_column(name, pa.nulls(table.num_rows))
            elif str(table.schema.field(name).type) not in _COLUMN_TYPES:
                return None  # e.g. a string Arrow read as a timestamp: the row path sees a str
        return table

    def _keys(self, records: list[ConsumerRecord]) -> tuple[np.ndarray, list[bytes]] | None:
        """Per record the index of its key, and each distinct key's state key (the row
        path's ``KeyCodec.dumps(key_codec.loads(raw))``); None if a key does not decode.
        A dict numbers the distinct keys (several times faster than Arrow's dictionary
        encoding of a list of bytes built for it)."""
        seen: dict[bytes | None, int] = {}
        number = seen.setdefault
        indices = np.fromiter([number(r.key, len(seen)) for r in records], dtype=np.int64, count=len(records))
        loads, known = self.topic.key_codec.loads, self._state_keys
        if len(known) > _KEY_CACHE:
            known.clear()
        state_keys: list[bytes] = []
        try:
            for raw in seen:
                if raw is None:
                    # A record without a key: the row path aggregates it under the key None.
                    state_keys.append(b"null")
                    continue
                kb = known.get(raw)
                if kb is None:
                    kb = known[raw] = orjson.dumps(loads(raw))
                state_keys.append(kb)
        except (CodecError, TypeError, ValueError):
            return None
        return indices, state_keys

    def _compute(self, partition: int, table: pa.Table, keys: tuple[np.ndarray, list[bytes]], ts: np.ndarray,
                 own: np.ndarray) -> _Batch | None:
        """The batch's partial aggregates per (key, window) and its late records, with no
        side effect; None when a kernel refuses (an arithmetic overflow, types Arrow
        cannot compare): the row path takes the batch, and does what it does with it."""
        import pyarrow as pa

        try:
            return self._partials(partition, table, keys, ts, own)
        except (pa.ArrowException, OverflowError):
            return None

    def _partials(self, partition: int, table: pa.Table, keys: tuple[np.ndarray, list[bytes]], ts: np.ndarray,
                  own: np.ndarray) -> _Batch:
        import pyarrow as pa
        import pyarrow.compute as pc

        chain, agg = self.chain, self.aggregate
        assert chain is not None and agg is not None
        n = len(ts)
        mask = np.ones(n, dtype=bool)
        for expr in chain.filters:
            kept = pc.fill_null(expr.arrow(table), False)
            if isinstance(kept, pa.Scalar):
                mask &= bool(kept.as_py())
            else:
                mask &= kept.to_numpy(zero_copy_only=False)
        closed = agg.times.closed.get(partition, MIN_TIMESTAMP)
        now = np.maximum(own, closed) if closed != MIN_TIMESTAMP else own
        spec = agg.spec
        assert isinstance(spec, TumblingWindows | HoppingWindows)
        size, advance, grace = spec.size_ms, spec.advance_ms, spec.grace_ms
        base = (ts // advance) * advance
        on_time_any = np.zeros(n, dtype=bool)
        rows: list[np.ndarray] = []
        starts: list[np.ndarray] = []
        for k in range(-(-size // advance)):
            start = base - k * advance
            ok = mask & (start > ts - size) & (start + size + grace > now)
            on_time_any |= ok
            idx = np.nonzero(ok)[0]
            if len(idx):
                rows.append(idx)
                starts.append(start[idx])
        late = np.nonzero(mask & ~on_time_any)[0]
        batch = _Batch(late, now, [], [], {}, [])
        if not rows:
            return batch
        row = np.concatenate(rows)
        key_idx, state_keys = keys
        batch.state_keys = state_keys
        columns: dict[str, Any] = {"k": key_idx[row], "s": np.concatenate(starts)}
        aggs_spec: AggSpec = chain.spec
        wanted: list[tuple[Any, ...]] = []
        names: list[tuple[str, str]] = []  # (aggregation, result column)
        for i, a in enumerate(aggs_spec.aggs):
            if a.kind == "count":
                wanted.append(([], "count_all"))
                names.append((a.name, "count_all"))
                continue
            assert a.expr is not None
            values = a.expr.arrow(table)
            if isinstance(values, pa.Scalar):
                values = pa.array([values.as_py()] * n, type=values.type)
            column = f"v{i}"
            columns[column] = taken = values.take(pa.array(row))
            if a.kind == "sum" and pa.types.is_integer(taken.type) and len(taken):
                # Arrow's integer sums wrap at 2**63, Python's do not: a batch that could
                # overflow goes to the row path.
                low_high = pc.min_max(taken).as_py()
                if builtins.max(abs(low_high["min"] or 0), abs(low_high["max"] or 0)) * len(taken) >= 2**63:
                    raise OverflowError("an integer sum could overflow int64")
            options = pc.ScalarAggregateOptions(min_count=0) if a.kind == "sum" else None
            wanted.append((column, a.kind, options))
            names.append((a.name, f"{column}_{a.kind}"))
        grouped = pa.table(columns).group_by(["k", "s"], use_threads=False).aggregate(wanted)
        batch.keys = grouped.column("k").to_pylist()
        batch.starts = grouped.column("s").to_pylist()
        batch.results = {name: grouped.column(col).to_pylist() for name, col in names}
        batch.names = [name for name, _c in names]
        return batch

    def _apply(self, partition: int, records: list[ConsumerRecord], batch: _Batch) -> None:
        """Send the late records on, and merge the partial aggregates into the operator's
        cached windows."""
        chain, agg = self.chain, self.aggregate
        assert chain is not None and agg is not None
        ctx = self.ctx
        if not len(batch.late) and not batch.keys:
            return  # every record filtered out
        txn = ctx.txn(agg.table)  # refused as on the row path when the state has no such partition
        if len(batch.late):
            decode = cast(_Decoding, ctx.runtime).decode
            for i in batch.late.tolist():
                ev = decode(self.topic, records[i], partition)
                if ev is not None:
                    send_late(ctx, agg.key_codec, ev, agg.name, int(batch.now[i]))
        if not batch.keys:
            return
        aggs_spec = chain.spec
        results = batch.results
        fixed = agg.fixed
        assert fixed is not None
        fixed.use(partition, txn)
        if aggs_spec.scalar:
            partials: list[Any] = results[aggs_spec.aggs[0].name]
        else:
            names = batch.names
            partials = [dict(zip(names, values, strict=True))
                        for values in zip(*(results[name] for name in names), strict=True)]
        state_keys = batch.state_keys
        fixed.merge([state_keys[k] for k in batch.keys], batch.starts, partials, aggs_spec.merger())

