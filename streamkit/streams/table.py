"""Tables: dict-like state partitioned like the stream that updates them.

A key's partition is Kafka's default partitioner over the key's bytes (``key_type``, str by
default), so a stream grouped by the same key (``group_by``) finds its table partition on
the worker that owns it. Each partition is a local store (RocksDB or memory) whose every
change goes to the compacted changelog topic ``{app}-{table}-changelog``; a partition that
moves to another worker is rebuilt there by replaying that changelog.

Windowed tables (``.tumbling(...)``, ``.hopping(...)``) keep one value per (key, window):
``table[key] += 1`` updates the window(s) of the current event's timestamp, and
``table[key].now()``, ``.current()``, ``.delta(seconds)`` read them, as in Faust. Windows
are expired from the store by event time (stream time per partition), never by wall clock.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import logging
import operator
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Protocol

import orjson

from streamkit.state.errors import StoreIdentityError
from streamkit.state.store import Store
from streamkit.state.transaction import Transaction, TransactionStatus
from streamkit.state.windowed import WindowedTransaction
from streamkit.streams.agent import current_event, read_current_event
from streamkit.streams.changelog import ChangelogReader
from streamkit.streams.clients import start_client, stop_client
from streamkit.streams.codecs import StrCodec, codec_for
from streamkit.streams.follower import ChangelogFollower
from streamkit.streams.metrics import RestoreProgress
from streamkit.streams.partitioners import Partitioner, murmur2_partition
from streamkit.streams.processing import record_late
from streamkit.streams.progress import Task as ProgressTask
from streamkit.streams.records import CurrentRecord
from streamkit.streams.topic import Topic, partition_for_key
from streamkit.streams.watermarks import InputClock
from streamkit.streams.window_cache import CachedWindows
from streamkit.streams.windows import (
    MIN_TIMESTAMP,
    HoppingWindows,
    TumblingWindows,
    Window,
    seconds_ms,
    windows_for,
)

if TYPE_CHECKING:
    from pathlib import Path

    from streamkit.streams.partitioners import PartitionerDetector
    from streamkit.streams.processing import PipelineRuntime
    from streamkit.streams.progress import ProgressReporter
    from streamkit.streams.settings import AppSettings

    class Runtime(PipelineRuntime, Protocol):
        """What a table needs of the worker: the broker, metrics, progress, partitioners
        and producing (its changelog records), besides what late records need."""

        @property
        def bootstrap(self) -> str | None: ...

        @property
        def client_security(self) -> dict[str, Any]: ...

        @property
        def progress(self) -> ProgressReporter: ...

        def partitioning(self, topic: str) -> PartitionerDetector: ...

        def produce_raw(self, topic: str, key: bytes | None, value: bytes | None,
                        partition: int | None = None) -> None: ...

        def changelog_reader(self, topic: str, partition: int, *, client_id: str, chunk_records: int,
                             read_committed: bool) -> ChangelogReader: ...


class App(Protocol):
    """What a table needs of its app: names, where its state lives, its changelog topic."""

    @property
    def id(self) -> str: ...

    @property
    def settings(self) -> AppSettings: ...

    @property
    def state_dir(self) -> Path: ...

    def internal_topic(self, *args: Any, **kwargs: Any) -> Topic: ...

__all__ = ["GlobalTable", "NotCoPartitionedError", "PartitionCountError", "Table", "TableNotOwned", "WindowSet", "WindowedTable"]

log = logging.getLogger(__name__)

_RESTORE_BATCH = 20000

# Where a windowed table keeps each partition's stream time, next to its windows (the same
# key the DSL uses: it sorts after the window namespaces, so window scans never see it).
_STREAM_TIME_KEY = b"\xff\xffstream-time"


class TableNotOwned(KeyError):
    """A key whose partition this worker does not own (the stream is not co-partitioned)."""

    def __str__(self) -> str:
        return str(self.args[0])


class NotCoPartitionedError(RuntimeError):
    """An agent used a table key of another partition than its current event's.

    Not a KeyError on purpose: code catching KeyError for missing keys must not swallow it.
    On one worker such a key may even be owned, and the app seems to work until a second
    worker takes the key's partition; so it is refused at once, on any number of workers."""


class StateDefinitionError(RuntimeError):
    """State (local store or changelog) written by another definition of the operator:
    same name, another window type or size. Reusing it would mix the two."""


FINGERPRINT_HEADER = "streamkit.fingerprint"
_FINGERPRINT_FILE = "fingerprint.json"


def _spec_text(spec: Any) -> str:
    """A window spec without its grace period (a grace change keeps the stored windows valid)."""
    fields = {k: v for k, v in dataclasses.asdict(spec).items() if k != "grace_ms"}
    return f"{type(spec).__name__}({', '.join(f'{k}={v}' for k, v in fields.items())})"


class PartitionCountError(NotCoPartitionedError):
    """A table updated by a topic of another partition count: task p owns input partition p
    and table partition p, so the counts must be equal."""


def partition_count_message(table: Table, topic: str, count: int, agent: str | None = None) -> str:
    who = f"agent {agent!r} reads" if agent else "records of"
    return (f"{who} topic {topic!r} ({count} partitions) and updates table {table.name!r} ({table.partitions} "
            f"partitions): a table needs as many partitions as the topic that updates it. Declare "
            f"app.Table({table.name!r}, partitions={count}), or re-key the stream with stream.group_by(...) "
            f"(its repartition topic has num.partitions partitions)")


class Table:
    """A table: a dict per key, partitioned like the topic that updates it, kept in a state
    store (RocksDB, or memory) and backed by a compacted changelog topic.

    Declared with ``app.Table(name, default=int)`` and used from agents as a dict
    (``table[key] += 1``); ``.tumbling(...)``/``.hopping(...)`` make it a windowed table.
    Queryable at ``GET /tables/NAME/KEY`` on the worker's web API."""

    is_global = False

    def __init__(self, app: App, name: str, *, default: Callable[[], Any] | None, key_type: Any,
                 value_type: Any, partitions: int, store: str) -> None:
        self.app = app
        self.name = name
        self.default = default
        self.partitions = partitions
        # None: sized at start after the topic its agents read (``resize``).
        self.declared_partitions: int | None = partitions
        self.key_codec = codec_for(key_type, StrCodec())
        self.value_codec = codec_for(value_type)
        self.store_kind = store
        self.changelog = app.internal_topic(f"{name}-changelog", config={"cleanup.policy": "compact"})
        self.changelog.partitions = partitions
        self.window: TumblingWindows | HoppingWindows | None = None
        self.expires_ms: int | None = None
        self._store: Store | None = None
        self._txns: dict[int, Transaction] = {}
        self._stream_time: dict[int, InputClock] = {}
        # A windowed table's (or the DSL's windowed aggregation's) windows, decoded per
        # partition (``window_cache``): flushed into the transactions before anything reads them.
        self.windows_cache: CachedWindows | None = None
        # The stream time each partition's store holds: a windowed update only moves the
        # in-memory one, and prepare_commit writes it once per commit, not once per event.
        self._stream_time_saved: dict[int, int] = {}
        self._runtime: Runtime | None = None
        self._expired_up_to: dict[int, int] = {}
        self._standby: set[int] = set()
        # The topics whose records update this table (seen in agents), and the first of them,
        # whose partitioner locates keys for queries.
        self._sources: set[str] = set()
        self._source: str | None = None
        # False for the DSL's internal state (aggregations, join buffers): their keys and
        # values are laid out by the DSL, so the web endpoints, which read tables as
        # key -> value, must not serve them (a snapshot of one failed with a 503).
        self.queryable = True

    def __repr__(self) -> str:
        return f"Table({self.name!r})"

    # -- windowing -----------------------------------------------------------------------

    def resize(self, partitions: int) -> None:
        """Set the partition count before the worker starts (tables declared without one)."""
        self.partitions = partitions
        self.changelog.partitions = partitions

    def tumbling(self, size: float | timedelta, *, expires: float | timedelta | None = None) -> WindowedTable:
        """Windowed by tumbling windows of ``size`` seconds (or a timedelta)."""
        spec = TumblingWindows(seconds_ms(size, "window size"))
        return self._windowed(spec, expires)

    def hopping(self, size: float | timedelta, step: float | timedelta, *,
                expires: float | timedelta | None = None) -> WindowedTable:
        """Windowed by hopping windows of ``size`` every ``step`` seconds (or timedeltas);
        ``expires`` (default ten windows) is how long windows are kept, by stream time."""
        spec = HoppingWindows(seconds_ms(size, "window size"), seconds_ms(step, "window step"))
        return self._windowed(spec, expires)

    def _windowed(self, spec: TumblingWindows | HoppingWindows, expires: float | timedelta | None) -> WindowedTable:
        if self.window is not None:
            raise ValueError(f"table {self.name!r} is already windowed")
        self.window = spec
        self.expires_ms = seconds_ms(expires, "expires") if expires is not None else spec.size_ms * 10
        return WindowedTable(self)

    # -- fingerprint -------------------------------------------------------------------

    def definition(self) -> str:
        """What the stored state depends on: the operator's kind and window arithmetic."""
        spec = self.window if self.window is not None else getattr(self, "spec", None)
        return type(self).__name__ + (f" {_spec_text(spec)}" if spec is not None else "")

    def fingerprint(self) -> str:
        """A short hash of the table's definition, stamped on its changelog records."""
        return hashlib.sha1(self.definition().encode()).hexdigest()[:12]

    def changelog_headers(self) -> list[tuple[str, bytes]]:
        """Headers of the changelog record batches this table writes (on each batch's first
        record): its fingerprint, which a restore compares with its own."""
        return [(FINGERPRINT_HEADER, self.fingerprint().encode())]

    def _reset_hint(self) -> str:
        assert self._store is not None
        return (f"start it over: stop every worker, delete the topic {self.changelog.name} and the local state "
                f"{self._store.path} on every worker (or reset the app); or give the changed definition another "
                f"name")

    def _check_local_fingerprint(self) -> None:
        """The fingerprint file next to the local store, written by the last worker here."""
        assert self._store is not None
        path = self._store.path / _FINGERPRINT_FILE
        try:
            stored = orjson.loads(path.read_bytes())
        except (FileNotFoundError, orjson.JSONDecodeError):
            return
        if stored.get("fingerprint") != self.fingerprint():
            raise StateDefinitionError(
                f"table {self.name!r}: the local state was written by another definition "
                f"({stored.get('definition')!r}, now {self.definition()!r}); reusing it would mix both; "
                f"{self._reset_hint()}")

    def _check_changelog_fingerprint(self, partition: int) -> Callable[[Any], None]:
        mine = self.fingerprint().encode()

        def check(headers: Any) -> None:
            for name, value in headers or ():
                if name == FINGERPRINT_HEADER and value != mine:
                    raise StateDefinitionError(
                        f"table {self.name!r}: its changelog {self.changelog.name} (partition {partition}) was "
                        f"written by another definition (fingerprint {value.decode(errors='replace')}, now "
                        f"{mine.decode()}: {self.definition()!r}); reusing it would mix both; {self._reset_hint()}")

        return check

    def _save_fingerprint(self) -> None:
        assert self._store is not None
        if self.store_kind == "memory":
            return
        path = self._store.path / _FINGERPRINT_FILE
        data = orjson.dumps({"fingerprint": self.fingerprint(), "definition": self.definition()})
        with contextlib.suppress(OSError):
            if not path.exists() or path.read_bytes() != data:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(data)

    # -- runtime hooks -------------------------------------------------------------------

    def attach(self, runtime: Runtime) -> None:
        """Open the table's store for ``runtime`` (at the worker's start)."""
        self._runtime = runtime
        self._store = Store(self.app.state_dir, self.app.id, self.name, backend=self.store_kind,  # type: ignore[arg-type]
                            changelog=self.changelog.name)

    async def start_global(self) -> None:
        """Only global tables follow their changelog continuously."""

    async def wait_caught_up(self, timeout_ms: int | None = None) -> None:
        """Partitioned tables are restored per task, when the task is assigned."""

    # -- standby replicas ----------------------------------------------------------------

    def set_standby(self, wanted: set[int], active: set[int], follower: ChangelogFollower) -> None:
        """Keep exactly the partitions ``wanted`` warm, following their changelog with
        ``follower``. A standby partition that became active (``active``) stays open for
        its restore, which then replays only the tail after what the follower applied."""
        assert self._store is not None
        wanted = {p for p in wanted if p < self.partitions} - active
        for p in sorted(self._standby - wanted):
            follower.unfollow(self.changelog.name, p)
            self._standby.discard(p)
            if p not in active and p not in self._txns:
                self._store.revoke(p)
        for p in sorted(wanted - self._standby):
            try:
                part = self._store.partition(p)
            except StoreIdentityError:
                log.warning("store %s-%d belongs to another changelog; rebuilding it as a standby", self.name, p)
                self._store.destroy(p)
                part = self._store.partition(p)
            follower.follow(self.changelog.name, p, part)
            self._standby.add(p)

    def local_partitions(self) -> set[int]:
        """Partitions with a store on this machine (for a sticky assignment)."""
        if self._store is None or self.store_kind == "memory":
            return set(self._txns) | self._standby
        path = self._store.path
        if not path.is_dir():
            return set()
        return {int(d.name) for d in path.iterdir() if d.name.isdigit() and int(d.name) < self.partitions}

    def cache_bytes(self) -> int:
        """Bytes held in the write caches of this table's open transactions."""
        return sum(txn.cache_bytes for txn in self._txns.values())

    async def restore(self, partition: int) -> None:
        """Replay the changelog partition from the store's last applied offset to its end."""
        runtime = self._runtime
        assert runtime is not None and runtime.bootstrap is not None and self._store is not None
        self._check_local_fingerprint()
        if self.windows_cache is not None:
            self.windows_cache.drop(partition)  # the store is about to change under them
        part = self._store.partition(partition)
        progress = RestoreProgress()
        runtime.metrics.restore[(self.name, partition)] = progress
        reader = runtime.changelog_reader(self.changelog.name, partition, client_id=f"{self.app.id}-restore",
                                          chunk_records=_RESTORE_BATCH, read_committed=runtime.settings.exactly_once)
        reader.on_headers = self._check_changelog_fingerprint(partition)
        started = time.monotonic()
        first: float | None = None  # when the first records came: the read and apply alone
        shown: ProgressTask | None = None
        records = 0
        try:
            # Inside the try: a restore cancelled while its reader connects (the worker
            # stopping, or losing the partition, right after the assignment) must still close
            # the reader's connections.
            await start_client(reader)
            begin, end = await reader.offsets()
            applied = part.changelog_offset
            if applied is not None and applied >= end:
                # The local store saw changelog offsets the topic does not have (the topic was
                # recreated): it belongs to another history, rebuild it.
                log.warning("store %s-%d is ahead of its changelog (%d >= %d); rebuilding",
                            self.name, partition, applied, end)
                self._store.destroy(partition)
                part = self._store.partition(partition)
                applied = None
            start = max(begin, (applied + 1) if applied is not None else 0)
            progress.total = max(end - start, 0)
            if progress.total:
                shown = runtime.progress.start(f"restoring {self.name}-{partition}", progress.total)
            async with contextlib.aclosing(reader.read(start, end)) as chunks:
                async for chunk in chunks:
                    if first is None:
                        first = time.monotonic()
                    records += part.apply_changelog(chunk, batch_size=_RESTORE_BATCH)
                    # Progress in offsets, as the total: transaction markers, aborted and
                    # compacted-away records take offsets but are not applied.
                    advanced = chunk[-1][2] + 1 - start - progress.restored
                    progress.restored += advanced
                    if shown is not None:
                        shown.advance(advanced)
            progress.restored = progress.total
        except StoreIdentityError:
            self._store.destroy(partition)
            raise
        finally:
            if shown is not None:
                shown.finish()
            await stop_client(reader)
        progress.done = True
        self._save_fingerprint()
        done = time.monotonic()
        elapsed = done - started
        if records:
            reading = done - (first or started)
            log.info("restored %s-%d: %d records in %.2fs (%.0f/s); %.2fs from the first record (%.0f/s)",
                     self.name, partition, records, elapsed, records / max(elapsed, 1e-9), reading,
                     records / max(reading, 1e-9))
        txn = part.begin()
        self._txns[partition] = txn
        # Stream time comes back with the state: starting again from nothing would accept
        # records for windows that were already expired (and deleted) before the restart.
        raw = txn.get(_STREAM_TIME_KEY) if self.window is not None else None
        clock = InputClock(None, 0)
        if raw:
            clock.restore({"marks": {"0": int(raw)}, "last": int(raw)}, 0)
        self._stream_time[partition] = clock
        self._stream_time_saved[partition] = clock.value(0)

    def revoke(self, partitions: set[int]) -> None:
        """Drop ``partitions`` (a rebalance gave them to another worker): their open
        transactions are rolled back and their stores released."""
        if self._store is None:
            return
        for p in partitions:
            txn = self._txns.pop(p, None)
            if txn is not None and txn.status in (TransactionStatus.OPEN, TransactionStatus.PREPARED):
                txn.rollback()
            self._store.revoke(p)
            self._stream_time.pop(p, None)
            if self.windows_cache is not None:
                self.windows_cache.drop(p)
            self._stream_time_saved.pop(p, None)
            self._expired_up_to.pop(p, None)
            if self._runtime is not None:
                # A restore cut short by the revoke would otherwise stay on /metrics as
                # "restored < total" for good, for a partition this worker no longer has.
                self._runtime.metrics.restore.pop((self.name, p), None)

    def prepare_commit(self) -> dict[int, list[tuple[bytes, bytes | None]]]:
        """Net changes per partition since the last commit (the changelog records)."""
        out = {}
        for p, txn in self._txns.items():
            self._write_dirty(p)
            st = self._stream_time.get(p)
            if st is not None and st.value(0) != self._stream_time_saved.get(p, MIN_TIMESTAMP):
                now = st.value(0)
                txn.set(_STREAM_TIME_KEY, str(now).encode())  # restored by restore()
                self._stream_time_saved[p] = now
            if txn.pending:
                out[p] = txn.changelog_records()
        return out

    def finish_commit(self, partition: int, changelog_offset: int) -> None:
        """Mark ``partition``'s prepared writes committed at ``changelog_offset``."""
        txn = self._txns[partition]
        txn.commit(changelog_offset)
        self._txns[partition] = txn.partition.begin()

    def _write_dirty(self, partition: int) -> None:
        """Write ``partition``'s changed cached windows into its transaction (before
        anything reads the windows there: ``window_cache``)."""
        cache, txn = self.windows_cache, self._txns.get(partition)
        if cache is not None and txn is not None:
            cache.flush(partition, txn)

    def _write_all_dirty(self) -> None:
        cache = self.windows_cache
        if cache is not None:
            for p, txn in self._txns.items():
                cache.flush(p, txn)

    def finish_commit_unchanged(self) -> None:
        """Transactions with nothing to commit stay open for the next interval."""

    def tick(self, now_ms: int) -> None:
        """Expire windows past ``expires`` (by each partition's stream time)."""
        if self.window is None or self.expires_ms is None:
            return
        for p, txn in self._txns.items():
            st = self._stream_time.get(p)
            if st is None or st.value(0) == MIN_TIMESTAMP or txn.status != TransactionStatus.OPEN:
                continue
            threshold = st.value(0) - self.expires_ms
            before = self._expired_up_to.get(p, MIN_TIMESTAMP)
            if threshold <= before:
                continue  # stream time has not moved: nothing new can have expired
            self._expired_up_to[p] = threshold
            # Window ends are start + size with starts multiples of the advance: when no end
            # lies in (before, threshold] there is nothing to expire (nor to write first).
            size, advance = self.window.size_ms, self.window.advance_ms
            if before != MIN_TIMESTAMP and (threshold - size) // advance == (before - size) // advance:
                continue
            cache = self.windows_cache
            if cache is None or cache.expire(p, txn, threshold, results=False) is None:
                WindowedTransaction(txn).expire_windows(threshold)

    async def close(self) -> None:
        """Release every partition (open transactions rolled back) and close the store."""
        for p in list(self._txns):
            self.revoke({p})
        self._standby.clear()
        if self._store is not None:
            self._store.close()

    def owned_partitions(self) -> list[int]:
        """The partitions this worker owns, in order."""
        return sorted(self._txns)

    # -- dict API ------------------------------------------------------------------------

    def fed_by(self, topic: str) -> None:
        """Note that records of ``topic`` update this table: its partitioner then locates
        the table's keys (interactive queries). The first such topic wins."""
        self._sources.add(topic)
        if self._source is None:
            self._source = topic

    def _partitioner(self) -> tuple[Partitioner, bool]:
        """The partitioner that places this table's keys, and whether it is known: the one
        of the topic that updates the table (declared or detected); murmur2 until then."""
        runtime, source = self._runtime, self._source
        if runtime is not None and source is not None:
            found = runtime.partitioning(source).lookup()
            if found is not None:
                return found, True
        return murmur2_partition, False

    def partition_of(self, key: Any) -> int:
        """The table partition that holds ``key``."""
        return self._partitioner()[0](self.key_codec.dumps(key), self.partitions)

    def partition_known(self) -> bool:
        """Whether ``partition_of`` is certain (the updating topic's partitioner is known)."""
        return self._partitioner()[1]

    def _new_source(self, topic: str) -> None:
        """The first record of ``topic`` that uses this table: its partitions must be the
        table's (task p owns input partition p and table partition p)."""
        runtime = self._runtime
        count = runtime.topic_partitions(topic) if runtime is not None else None
        if count is not None and count != self.partitions:
            raise PartitionCountError(partition_count_message(self, topic, count))
        self.fed_by(topic)

    def _task_partition(self, key_bytes: bytes, event: CurrentRecord | None) -> int:
        """The partition whose store holds ``key_bytes``. Inside an agent (``event``, the
        record being processed): that record's partition (its task's store, as in Kafka
        Streams), whatever partitioner placed the record; refused when the key cannot
        belong to that task."""
        if event is None:
            return self._partitioner()[0](key_bytes, self.partitions)
        if event.topic not in self._sources:
            self._new_source(event.topic)
        p = event.partition
        if key_bytes != event.raw_key and self._runtime is not None:
            self._check_copartitioned(key_bytes, event.topic, p)
        return p

    def _check_copartitioned(self, key_bytes: bytes, topic: str, p: int) -> None:
        """A key other than the record's own must be one the record's task owns under the
        topic's partitioner; one it cannot own means the table is keyed differently from
        the stream. It would seem to work on one worker, until another worker owns the key."""
        assert self._runtime is not None
        detector = self._runtime.partitioning(topic)
        if detector.possible(key_bytes, p, self.partitions):
            return
        found = detector.lookup()
        where = f"is in partition {found(key_bytes, self.partitions)}" if found is not None else "is not in that partition"
        by = f" (placed by the {detector.name} partitioner)" if detector.name else ""
        raise NotCoPartitionedError(
            f"table {self.name!r}: key {key_bytes!r} {where}, but the agent is processing partition {p} of "
            f"{topic!r}{by}: the table is keyed differently from the stream (it would work on one worker "
            f"only); re-key the stream by the table's key with stream.group_by(lambda value: <table key>) "
            f"so each key's records and state belong to one task"
        )

    def _txn_for(self, key_bytes: bytes) -> tuple[Transaction, int]:
        """The open transaction holding ``key_bytes`` and its partition."""
        return self._txn_at(key_bytes, read_current_event())

    def _txn_at(self, key_bytes: bytes, event: CurrentRecord | None) -> tuple[Transaction, int]:
        """``_txn_for`` with the current event at hand already (the per-record path)."""
        p = self._task_partition(key_bytes, event)
        txn = self._txns.get(p)
        if txn is None:
            if self._runtime is None:
                raise TableNotOwned(f"table {self.name!r} is used outside a running app")
            raise TableNotOwned(
                f"table {self.name!r}: key {key_bytes!r} is in partition {p}, which this worker does not "
                f"own; group the stream by the table's key (stream.group_by) so records and table keys "
                f"are co-partitioned"
            )
        return txn, p

    def _lookup_txns(self, key_bytes: bytes) -> tuple[list[Transaction], bool]:
        """Where a query (no current record) looks for a key, and whether a miss there
        means the key is nowhere: its partition when the partitioner is known (raising
        TableNotOwned when another worker owns it), else every partition this worker owns."""
        if self._partitioner()[1]:
            return [self._txn_for(key_bytes)[0]], True
        return [self._txns[p] for p in sorted(self._txns)], len(self._txns) >= self.partitions

    def __getitem__(self, key: Any) -> Any:
        kb = self.key_codec.dumps(key)
        txn, _p = self._txn_for(kb)
        raw = txn.get(kb)
        if raw is None:
            if self.default is None:
                raise KeyError(key)
            value = self.default()
            txn.set(kb, self.value_codec.dumps(value))
            return value
        return self.value_codec.loads(raw)

    def __setitem__(self, key: Any, value: Any) -> None:
        kb = self.key_codec.dumps(key)
        txn, _p = self._txn_for(kb)
        txn.set(kb, self.value_codec.dumps(value))

    def __delitem__(self, key: Any) -> None:
        kb = self.key_codec.dumps(key)
        txn, _p = self._txn_for(kb)
        if txn.get(kb) is None:
            raise KeyError(key)
        txn.delete(kb)

    def __contains__(self, key: Any) -> bool:
        kb = self.key_codec.dumps(key)
        txn = self._txns.get(self._task_partition(kb, read_current_event()))
        return txn is not None and txn.get(kb) is not None

    def get(self, key: Any, default: Any = None) -> Any:
        """The value of ``key`` in the current event's partition, or ``default``."""
        kb = self.key_codec.dumps(key)
        txn = self._txns.get(self._task_partition(kb, read_current_event()))
        raw = txn.get(kb) if txn is not None else None
        return default if raw is None else self.value_codec.loads(raw)

    def items(self) -> Iterator[tuple[Any, Any]]:
        """Items of the partitions this worker owns."""
        self._write_all_dirty()
        for p in sorted(self._txns):
            for kb, vb in self._txns[p].iter_range():
                yield self.key_codec.loads(kb), self.value_codec.loads(vb)

    def keys(self) -> Iterator[Any]:
        """The keys of the partitions this worker owns."""
        return (k for k, _v in self.items())

    def values(self) -> Iterator[Any]:
        """The values of the partitions this worker owns."""
        return (v for _k, v in self.items())

    def __len__(self) -> int:
        return sum(1 for _ in self.items())

    # -- interactive queries (JSON-ready) ------------------------------------------------------

    def parse_key(self, text: str) -> Any:
        """A key from its text in a URL (``/tables/{name}/{key}``): decoded with the codec
        of the keys ``query`` takes (``key_type=int``: ``"42"`` is 42). Raises CodecError."""
        return self.key_codec.loads(text.encode())

    def query(self, key: Any) -> Any:
        """The value (or, for a windowed table, the windows) of a key owned here."""
        kb = self.key_codec.dumps(key)
        txns, complete = self._lookup_txns(kb)
        self._write_all_dirty()
        if self.window is None:
            for txn in txns:
                raw = txn.get(kb)
                if raw is not None:
                    return self.value_codec.loads(raw)
        else:
            codec = self.value_codec
            for txn in txns:
                found = [{"start": w.start_ms, "end": w.end_ms, "value": codec.loads(w.value)}
                         for w in WindowedTransaction(txn).iter_windows(kb)]
                if found:
                    return found
        if not complete:
            # The partitioner is not known yet: the key may be on another worker.
            raise TableNotOwned(f"table {self.name!r}: key {kb!r} is not on this worker")
        raise KeyError(key)

    def snapshot(self, limit: int = 1000) -> dict[str, Any]:
        """Up to ``limit`` keys and values of the owned partitions, as ``GET /tables/NAME``
        answers (a windowed table: each key's list of ``{"start", "end", "value"}``)."""
        out: dict[str, Any] = {}
        self._write_all_dirty()
        if self.window is None:
            for k, v in self.items():
                if len(out) >= limit:
                    break
                out[str(k)] = v
            return out
        for p in sorted(self._txns):
            for w in WindowedTransaction(self._txns[p]).iter_all_windows():
                if len(out) >= limit:
                    return out
                key = str(self.key_codec.loads(w.key))
                out.setdefault(key, []).append({"start": w.start_ms, "end": w.end_ms,
                                                "value": self.value_codec.loads(w.value)})
        return out


_new_window_set = object.__new__


def _apply_update(old: Any, fn: Callable[[Any], Any]) -> Any:
    """A windowed table's aggregation: each update brings its own function."""
    return fn(old)


class WindowSet:
    """``table[key]`` of a windowed table: in-place operators update the windows of the
    current event's timestamp; the readers pick one window."""

    __slots__ = ("key", "table")

    def __init__(self, table: WindowedTable, key: Any) -> None:
        self.table = table
        self.key = key

    def _apply(self, op: Callable[[Any, Any], Any], other: Any) -> WindowSet:
        self.table.combine(self.key, op, other)
        return self

    def __iadd__(self, other: Any) -> WindowSet:
        self.table._update(self.key, operator.add, other, True)  # ``combine`` without its frame
        return self

    def __isub__(self, other: Any) -> WindowSet:
        self.table.combine(self.key, operator.sub, other)
        return self

    def __imul__(self, other: Any) -> WindowSet:
        self.table.combine(self.key, operator.mul, other)
        return self

    def __itruediv__(self, other: Any) -> WindowSet:
        self.table.combine(self.key, operator.truediv, other)
        return self

    def __ior__(self, other: Any) -> WindowSet:
        self.table.combine(self.key, operator.or_, other)
        return self

    def apply(self, fn: Callable[[Any], Any]) -> WindowSet:
        """Replace the value of each window holding the current event with ``fn(value)``."""
        self.table.update(self.key, fn)
        return self

    def current(self) -> Any:
        """The value in the (latest) window holding the current event's timestamp."""
        return self.table.value_at(self.key, self.table.event_time())

    def now(self) -> Any:
        """The value in the window holding the wall-clock time (the worker's clock: the
        virtual one in ``AppTestDriver``)."""
        runtime = self.table.table._runtime
        now = runtime.clock() if runtime is not None else time.time_ns() // 1_000_000
        return self.table.value_at(self.key, now)

    def delta(self, seconds: float | timedelta) -> Any:
        """The value in the window holding the current event's timestamp minus ``seconds``."""
        return self.table.value_at(self.key, self.table.event_time() - seconds_ms(seconds, "delta"))

    def value(self) -> Any:
        """The same as ``current()``."""
        return self.current()

    def __repr__(self) -> str:
        return f"WindowSet({self.table.table.name!r}, {self.key!r})"


class WindowedTable:
    """The windowed view returned by ``Table.tumbling``/``Table.hopping``."""

    def __init__(self, table: Table) -> None:
        self.table = table
        assert table.window is not None
        self.spec = table.window
        # ``add(old, fn)`` is ``fn(old)``: each update brings its own function. The table
        # flushes, expires and drops the cached windows (``Table.windows_cache``).
        self._windows = table.windows_cache = CachedWindows(
            self.spec.size_ms, self.spec.advance_ms, table.expires_ms or 0, self._initial, _apply_update,
            table.value_codec)
        # A str key is encoded as StrCodec does, without its frame.
        self._str_keys = type(table.key_codec) is StrCodec

    @property
    def name(self) -> str:
        """The table's name."""
        return self.table.name

    def __getitem__(self, key: Any) -> WindowSet:
        # ``WindowSet(self, key)`` without the ``__init__`` frame (one per ``table[key] += n``).
        window_set = _new_window_set(WindowSet)
        window_set.table = self
        window_set.key = key
        return window_set

    def __setitem__(self, key: Any, value: Any) -> None:
        if isinstance(value, WindowSet):
            return  # ``table[k] += 1`` already updated the windows in __iadd__
        self.update(key, lambda _old: value)

    def event_time(self) -> int:
        """The timestamp of the event the calling agent is processing."""
        event = read_current_event()
        if event is None:
            raise RuntimeError(f"windowed table {self.name!r} needs a current event (use it inside an agent)")
        return event.timestamp

    def _view(self, key: Any) -> tuple[WindowedTransaction, bytes, int]:
        kb = self.table.key_codec.dumps(key)
        txn, p = self.table._txn_for(kb)
        return WindowedTransaction(txn), kb, p

    def update(self, key: Any, fn: Callable[[Any], Any]) -> None:
        """Replace the value of each of ``key``'s windows holding the current event's
        timestamp with ``fn(value)``."""
        self._update(key, _apply_update, fn, False)

    def combine(self, key: Any, op: Callable[[Any, Any], Any], other: Any) -> None:
        """``table[key] <op>= other`` in each of ``key``'s windows holding the current event's
        timestamp, ``op`` one of the operator module's (which never mutate their arguments,
        so they are folded into the cached aggregates as they are: ``window_cache``)."""
        self._update(key, op, other, True)

    def _update(self, key: Any, add: Callable[[Any, Any], Any], value: Any, trusted: bool) -> None:
        event = read_current_event()
        if event is None:
            raise RuntimeError(f"windowed table {self.name!r} needs a current event (use it inside an agent)")
        ts = event.timestamp
        table = self.table
        kb = key.encode() if self._str_keys and type(key) is str else table.key_codec.dumps(key)
        # The record's own key, from a topic the table knows: its task's partition, as
        # ``_txn_at`` finds it (inlined on the per-record path); anything else goes there.
        p = event.partition
        txn = table._txns.get(p) if kb == event.raw_key and event.topic in table._sources else None
        if txn is None:
            txn, p = table._txn_at(kb, event)
        stream_time = table._stream_time.get(p)
        if stream_time is None:
            stream_time = table._stream_time[p] = InputClock(None, 0)
        # The partition's watermark, the one stream-time implementation (an agent's table is
        # fed by one input partition: its largest timestamp so far). ``observe`` is called
        # only when the timestamp moves it (a table's clock never has idle inputs).
        now = stream_time.marks.get(0, MIN_TIMESTAMP)
        if ts > now:
            now = stream_time.observe(0, ts, 0)
        windows = self._windows
        if windows.current_txn is not txn:
            windows.use(p, txn)
        if not windows.update(kb, ts, value, now, None, add, fresh=not trusted):
            self._late(kb, now)

    def _initial(self) -> Any:
        default = self.table.default
        return None if default is None else default()

    def _late(self, key_bytes: bytes, watermark: int) -> None:
        """The event's windows are all expired: handled as the DSL's late records are
        (``processing.record_late``; key: the table key)."""
        runtime = self.table._runtime
        event = current_event()
        if runtime is not None and event is not None:
            record_late(runtime, self.table.name, key_bytes, event, watermark)

    def value_at(self, key: Any, timestamp: int) -> Any:
        """The value of ``key`` in the (latest) window holding ``timestamp``."""
        view, kb, p = self._view(key)
        self.table._write_dirty(p)
        windows = windows_for(self.spec, timestamp)
        raw = view.get_window(kb, windows[-1].start, windows[-1].end)
        if raw is None:
            return self.table.default() if self.table.default is not None else None
        return self.table.value_codec.loads(raw)

    def windows(self, key: Any) -> list[tuple[Window, Any]]:
        """Every stored window of ``key`` with its value."""
        view, kb, p = self._view(key)
        self.table._write_dirty(p)
        codec = self.table.value_codec
        return [(Window(w.start_ms, w.end_ms), codec.loads(w.value)) for w in view.iter_windows(kb)]


class GlobalTable(Table):
    """Every worker holds all partitions: it follows the whole changelog continuously.
    Writes go to the changelog and become visible everywhere once read back."""

    is_global = True

    _follower: ChangelogFollower | None = None

    async def start_global(self) -> None:
        """Start following every changelog partition (from what the local store has)."""
        runtime = self._runtime
        assert runtime is not None and runtime.bootstrap is not None and self._store is not None
        follower = ChangelogFollower(runtime.bootstrap, client_id=f"{self.app.id}-global",
                                     read_committed=runtime.settings.exactly_once,
                                     security=runtime.client_security)
        self._follower = follower
        await follower.start()
        for p in range(self.partitions):
            follower.follow(self.changelog.name, p, self._store.partition(p))

    async def wait_caught_up(self, timeout_ms: int | None = None) -> None:
        """Wait until every partition has applied what its changelog held when this was
        called. The runtime awaits it before it starts processing, so lookups in agents,
        joins and timers see the whole table from the first record on."""
        follower = self._follower
        if follower is None:
            raise RuntimeError(f"global table {self.name!r} is not running")
        await follower.wait_caught_up(self.changelog.name, timeout_ms)

    def __getitem__(self, key: Any) -> Any:
        value = self.get(key)
        if value is None:
            if self.default is None:
                raise KeyError(key)
            return self.default()
        return value

    def get(self, key: Any, default: Any = None) -> Any:
        """The value of ``key`` (a global table holds every partition), or ``default``."""
        assert self._store is not None
        kb = self.key_codec.dumps(key)
        raw = self._store.partition(partition_for_key(kb, self.partitions)).get(kb)
        return default if raw is None else self.value_codec.loads(raw)

    def __contains__(self, key: Any) -> bool:
        return self.get(key) is not None

    def __setitem__(self, key: Any, value: Any) -> None:
        runtime = self._runtime
        assert runtime is not None
        kb = self.key_codec.dumps(key)
        runtime.produce_raw(self.changelog.name, kb, self.value_codec.dumps(value),
                            partition_for_key(kb, self.partitions))

    def __delitem__(self, key: Any) -> None:
        runtime = self._runtime
        assert runtime is not None
        kb = self.key_codec.dumps(key)
        runtime.produce_raw(self.changelog.name, kb, None, partition_for_key(kb, self.partitions))

    def items(self) -> Iterator[tuple[Any, Any]]:
        """Every key and value, over all partitions."""
        assert self._store is not None
        for p in range(self.partitions):
            for kb, vb in self._store.partition(p).iter_range():
                yield self.key_codec.loads(kb), self.value_codec.loads(vb)

    def prepare_commit(self) -> dict[int, list[tuple[bytes, bytes | None]]]:
        """Nothing to commit: a global table only reads its changelog."""
        return {}

    def revoke(self, partitions: set[int]) -> None:
        """A global table keeps every partition whatever the group assigns."""

    async def restore(self, partition: int) -> None:
        """Nothing to restore per partition: the follower reads the whole changelog."""
        return None

    def owned_partitions(self) -> list[int]:
        """Every partition: a global table holds them all."""
        return list(range(self.partitions))

    def query(self, key: Any) -> Any:
        """What ``GET /tables/NAME/KEY`` answers: the value, or KeyError when absent."""
        value = self.get(key)
        if value is None:
            raise KeyError(key)
        return value

    async def close(self) -> None:
        """Stop following the changelog and close the store."""
        if self._follower is not None:
            await self._follower.stop()
            self._follower = None
        await super().close()
