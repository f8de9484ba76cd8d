"""TransactionCoordinator: every transactional.id of this broker, kept in the compacted
internal topic ``__transaction_state`` so that it survives a restart.

Pure and synchronous, like the group coordinator: state goes to the topic through an
injected ``TxnStore``, markers into partitions through an injected ``MarkerWriter``, time
comes from an injected clock. A single broker's appends are synchronous, so an EndTxn runs
its whole two-phase course in one call: persist PrepareCommit/PrepareAbort, write the
markers, persist CompleteCommit/CompleteAbort. A cluster member hands the markers to
``send_markers`` instead: they go to the partitions' leaders once the Prepare record is
replicated, EndTxn is answered then (Kafka's behaviour), and ``markers_written`` completes
the transaction later; meanwhile the transactional.id answers CONCURRENT_TRANSACTIONS. A
coordinator that takes over a partition between the two phases (``load_partition``: a
restart, or a failover) finishes the markers, which is what the Prepare record is for.

Each coordinator answers for the partitions of ``__transaction_state`` it owns (``owned``):
one broker owns them all, a cluster member those it leads.

Fencing follows Kafka: every InitProducerId bumps the epoch of the transactional.id's
producer id, so requests of an older instance get PRODUCER_FENCED (INVALID_PRODUCER_EPOCH in
Produce, and in the older versions of each API, which the handlers map). An open transaction
of the old instance is aborted first, with its markers written at a bumped epoch, so its late
batches are refused by the partitions too. A transaction open longer than its
transaction.timeout.ms is aborted the same way by ``abort_timed_out``, which the broker calls
every transaction.abort.timed.out.transaction.cleanup.interval.ms; the start time is
persisted, so the timeout also runs across a restart.

A retried EndTxn (the answer to the first was lost) finds the transaction complete with the
same outcome and succeeds without doing anything; the opposite outcome is INVALID_TXN_STATE.
A client starts its next transaction only after EndTxn succeeded, and an older instance's
EndTxn carries an older epoch, so a delayed EndTxn never completes a newer transaction.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Protocol

from kio.schema.errors import ErrorCode

from streamkit.broker.group.records import partition_for_group
from streamkit.broker.ownership import OwnedPartitions
from streamkit.broker.txn.records import (
    TxnLogValue,
    decode_txn_key,
    decode_txn_value,
    encode_txn_key,
    encode_txn_value,
)
from streamkit.broker.txn.state import TxnEvent, TxnState, next_state
from streamkit.log.records import Record, build_batch

__all__ = ["TRANSACTION_STATE_TOPIC", "InitResult", "MarkerJob", "MarkerWriter", "TransactionCoordinator", "TxnMetadata",
           "TxnSettings", "TxnStore"]

log = logging.getLogger(__name__)

TRANSACTION_STATE_TOPIC = "__transaction_state"
TopicPartition = tuple[str, int]
_MAX_EPOCH = 32767


class TxnStore(Protocol):
    """Partitions of ``__transaction_state``."""

    def append(self, partition: int, batch: bytes) -> int | None: ...

    def records(self, partition: int) -> Iterable[Record]: ...


class MarkerWriter(Protocol):
    """Writes one COMMIT or ABORT marker into one partition of the transaction."""

    def write_marker(self, topic: str, partition: int, producer_id: int, producer_epoch: int,
                     commit: bool) -> None: ...


@dataclass(frozen=True, slots=True)
class MarkerJob:
    """The markers of one transaction, for a writer that sends them to partition leaders;
    ``txn_partition``: the partition of ``__transaction_state`` holding the transaction."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    commit: bool
    partitions: tuple[TopicPartition, ...]
    txn_partition: int


@dataclass(frozen=True, slots=True)
class TxnSettings:
    max_timeout_ms: int = 900_000  # transaction.max.timeout.ms
    id_expiration_ms: int = 604_800_000  # transactional.id.expiration.ms
    offsets_partitions: int = 50  # offsets.topic.num.partitions (AddOffsetsToTxn's partition)
    offsets_topic: str = "__consumer_offsets"


@dataclass(slots=True)
class TxnMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: set[TopicPartition] = field(default_factory=set)
    start_ms: int = -1
    last_update_ms: int = -1
    last_epoch: int = -1  # the epoch before the last InitProducerId bump (its retry is no fence)

    def to_value(self) -> TxnLogValue:
        return TxnLogValue(self.producer_id, self.producer_epoch, self.timeout_ms, self.state,
                           frozenset(self.partitions), self.last_update_ms, self.start_ms)


@dataclass(frozen=True, slots=True)
class InitResult:
    error: ErrorCode
    producer_id: int = -1
    producer_epoch: int = -1


class TransactionCoordinator:
    def __init__(self, settings: TxnSettings, num_partitions: int, store: TxnStore,
                 markers: MarkerWriter, next_producer_id: Callable[[], int],
                 clock: Callable[[], int]) -> None:
        self.settings = settings
        self.num_partitions = num_partitions
        self.store = store
        self.markers = markers
        self.next_producer_id = next_producer_id
        self.clock = clock
        self.txns: dict[str, TxnMetadata] = {}
        # The partitions of __transaction_state this coordinator answers for (``load_partition``).
        self.owned = OwnedPartitions()
        # Set by a cluster member: hands each transaction's markers to the partitions'
        # leaders (``_write_markers``).
        self.send_markers: Callable[[MarkerJob], None] | None = None

    # -- persistence -----------------------------------------------------------------------

    def partition_for(self, transactional_id: str) -> int:
        return partition_for_group(transactional_id, self.num_partitions)

    def _persist(self, md: TxnMetadata) -> None:
        md.last_update_ms = self.clock()
        record = Record(key=encode_txn_key(md.transactional_id), value=encode_txn_value(md.to_value()),
                        timestamp=md.last_update_ms)
        self.store.append(self.partition_for(md.transactional_id), build_batch([record]))

    def _transition(self, md: TxnMetadata, event: TxnEvent) -> None:
        md.state = next_state(md.state, event)
        self._persist(md)

    def load(self) -> None:
        """Replay every partition of ``__transaction_state``: what a single broker, which
        coordinates them all, does at start."""
        for partition in range(self.num_partitions):
            for _ in self.load_partition(partition):
                pass
        ongoing = sum(1 for md in self.txns.values() if md.state == TxnState.ONGOING)
        log.info("loaded %d transactional ids (%d with an open transaction)", len(self.txns), ongoing)

    def load_partition(self, partition: int) -> Iterator[None]:
        """Start coordinating ``partition``: loading (COORDINATOR_LOAD_IN_PROGRESS) until
        the returned iterator is exhausted, which replays its records (yielding after each)
        and makes it active, then finishes the transactions left between
        PrepareCommit/PrepareAbort and their markers (a stop, or a coordinator that failed
        mid-commit)."""
        self.owned.start_loading(partition)
        return self._replay_partition(partition)

    def _replay_partition(self, partition: int) -> Iterator[None]:
        loaded: dict[str, TxnMetadata] = {}
        for record in self.store.records(partition):
            txn_id = None if record.key is None else decode_txn_key(record.key)
            if txn_id is not None and record.value is None:
                loaded.pop(txn_id, None)
            elif txn_id is not None and record.value is not None:
                v = decode_txn_value(record.value)
                loaded[txn_id] = TxnMetadata(txn_id, v.producer_id, v.producer_epoch, v.timeout_ms,
                                             v.state, set(v.partitions), v.start_ms, v.last_update_ms)
            yield
        self._forget(partition)
        self.txns.update(loaded)
        self.owned.activate(partition)
        for md in loaded.values():
            if md.state.is_preparing:
                log.info("completing transaction %r (%s) left by its last coordinator", md.transactional_id,
                         md.state.kafka_name)
                self._write_markers(md)

    def unload_partition(self, partition: int) -> None:
        """Stop coordinating ``partition`` (another broker leads it now): its transactional
        ids are dropped, and requests for them get NOT_COORDINATOR. Markers on their way
        stop at their next step (``markers_written`` refuses them)."""
        self.owned.drop(partition)
        self._forget(partition)

    def _forget(self, partition: int) -> None:
        for txn_id in [t for t in self.txns if self.partition_for(t) == partition]:
            del self.txns[txn_id]

    # -- the two phases ----------------------------------------------------------------------

    def _end(self, md: TxnMetadata, commit: bool) -> None:
        self._transition(md, TxnEvent.COMMIT if commit else TxnEvent.ABORT)
        self._write_markers(md)

    def _write_markers(self, md: TxnMetadata) -> None:
        """Write the markers of ``md``'s transaction (PrepareCommit/PrepareAbort) and complete
        it: at once through ``markers`` (one broker: every partition is local), or through
        ``send_markers`` when set (a cluster member: the partitions have leaders of their
        own), which calls ``markers_written`` once every leader has its marker."""
        commit = md.state == TxnState.PREPARE_COMMIT
        if self.send_markers is not None:
            self.send_markers(MarkerJob(md.transactional_id, md.producer_id, md.producer_epoch, commit,
                                        tuple(sorted(md.partitions)), self.partition_for(md.transactional_id)))
            return
        for topic, partition in sorted(md.partitions):
            self.markers.write_marker(topic, partition, md.producer_id, md.producer_epoch, commit)
        self._transition(md, TxnEvent.MARKERS_WRITTEN)

    def markers_written(self, job: MarkerJob) -> bool:
        """Every marker of ``job`` is written: complete its transaction. False when the
        transaction is no longer the one ``job`` was for (this broker stopped coordinating
        it, or it completed already)."""
        md = self.txns.get(job.transactional_id)
        if (md is None or (md.producer_id, md.producer_epoch) != (job.producer_id, job.producer_epoch)
                or md.state != (TxnState.PREPARE_COMMIT if job.commit else TxnState.PREPARE_ABORT)):
            return False
        self._transition(md, TxnEvent.MARKERS_WRITTEN)
        return True

    def _bump_epoch(self, md: TxnMetadata) -> None:
        md.last_epoch = md.producer_epoch
        if md.producer_epoch >= _MAX_EPOCH - 1:
            md.producer_id, md.producer_epoch, md.last_epoch = self.next_producer_id(), 0, -1
        else:
            md.producer_epoch += 1

    def _fence_and_abort(self, md: TxnMetadata) -> None:
        """Abort ``md``'s open transaction at a bumped epoch: the markers and the new epoch
        fence every request of the instance that opened it."""
        if md.producer_epoch < _MAX_EPOCH - 1:
            md.producer_epoch += 1
        self._end(md, commit=False)

    # -- requests ------------------------------------------------------------------------------

    def init_producer_id(self, transactional_id: str, timeout_ms: int, producer_id: int = -1,
                         producer_epoch: int = -1) -> InitResult:
        if not transactional_id:
            return InitResult(ErrorCode.invalid_request)
        if timeout_ms <= 0 or timeout_ms > self.settings.max_timeout_ms:
            return InitResult(ErrorCode.invalid_transaction_timeout)
        md = self.txns.get(transactional_id)
        if md is None:
            md = TxnMetadata(transactional_id, self.next_producer_id(), 0, timeout_ms, TxnState.EMPTY)
            self.txns[transactional_id] = md
            self._persist(md)
            return InitResult(ErrorCode.none, md.producer_id, md.producer_epoch)
        if producer_id >= 0:  # KIP-360: a producer that knows its id asks for a bump
            if producer_id != md.producer_id:
                return InitResult(ErrorCode.producer_fenced)
            if producer_epoch == md.last_epoch and md.state == TxnState.EMPTY:
                return InitResult(ErrorCode.none, md.producer_id, md.producer_epoch)  # a retry
            if producer_epoch != md.producer_epoch:
                return InitResult(ErrorCode.producer_fenced)
        if md.state.is_preparing:
            return InitResult(ErrorCode.concurrent_transactions)
        if md.state == TxnState.ONGOING:
            log.info("InitProducerId of %r fences epoch %d and aborts its open transaction",
                     transactional_id, md.producer_epoch)
            self._fence_and_abort(md)
            if md.state.is_preparing:
                return InitResult(ErrorCode.concurrent_transactions)  # retried once the markers are written
        self._bump_epoch(md)
        if producer_id >= 0 and md.producer_id == producer_id:
            md.last_epoch = producer_epoch  # the same request retried gets this answer again
        md.timeout_ms = timeout_ms
        md.partitions = set()
        md.start_ms = -1
        self._transition(md, TxnEvent.INIT)
        return InitResult(ErrorCode.none, md.producer_id, md.producer_epoch)

    def _check_producer(self, transactional_id: str, producer_id: int, producer_epoch: int) -> tuple[ErrorCode, TxnMetadata | None]:
        md = self.txns.get(transactional_id)
        if md is None or md.producer_id != producer_id:
            return ErrorCode.invalid_producer_id_mapping, None
        if producer_epoch != md.producer_epoch:
            return ErrorCode.producer_fenced, None
        if md.state.is_preparing:
            return ErrorCode.concurrent_transactions, None
        return ErrorCode.none, md

    def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                       partitions: Iterable[TopicPartition]) -> ErrorCode:
        error, md = self._check_producer(transactional_id, producer_id, producer_epoch)
        if md is None:
            return error
        new = set(partitions)
        if md.state == TxnState.ONGOING and new <= md.partitions:
            return ErrorCode.none
        if md.state != TxnState.ONGOING:
            md.partitions = set()
            md.start_ms = self.clock()
        md.partitions |= new
        self._transition(md, TxnEvent.ADD)
        return ErrorCode.none

    def offsets_partition(self, group_id: str) -> TopicPartition:
        return self.settings.offsets_topic, partition_for_group(group_id, self.settings.offsets_partitions)

    def add_offsets(self, transactional_id: str, producer_id: int, producer_epoch: int, group_id: str) -> ErrorCode:
        if not group_id:
            return ErrorCode.invalid_group_id
        return self.add_partitions(transactional_id, producer_id, producer_epoch, [self.offsets_partition(group_id)])

    def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int, commit: bool) -> ErrorCode:
        error, md = self._check_producer(transactional_id, producer_id, producer_epoch)
        if md is None:
            return error
        if md.state == TxnState.ONGOING:
            self._end(md, commit)
            return ErrorCode.none
        if md.state == (TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT):
            return ErrorCode.none  # a retry of the EndTxn that completed it
        return ErrorCode.invalid_txn_state

    def check_ongoing(self, transactional_id: str, producer_id: int, producer_epoch: int,
                      partition: TopicPartition | None = None) -> ErrorCode:
        """May this producer write to ``partition`` (or commit offsets) in its transaction?"""
        md = self.txns.get(transactional_id)
        if md is None or md.producer_id != producer_id:
            return ErrorCode.invalid_producer_id_mapping
        if producer_epoch < md.producer_epoch:
            return ErrorCode.invalid_producer_epoch
        if producer_epoch > md.producer_epoch or md.state != TxnState.ONGOING:
            return ErrorCode.invalid_txn_state
        if partition is not None and partition not in md.partitions:
            return ErrorCode.invalid_txn_state
        return ErrorCode.none

    # -- timers ----------------------------------------------------------------------------------

    def abort_timed_out(self) -> list[str]:
        """Abort (and fence) every transaction open longer than its transaction.timeout.ms."""
        now = self.clock()
        aborted = []
        for md in list(self.txns.values()):
            if md.state == TxnState.ONGOING and now - md.start_ms > md.timeout_ms:
                log.info("aborting transaction of %r (producer %d epoch %d): open for %d ms, "
                         "transaction.timeout.ms is %d", md.transactional_id, md.producer_id,
                         md.producer_epoch, now - md.start_ms, md.timeout_ms)
                self._fence_and_abort(md)
                aborted.append(md.transactional_id)
        return aborted

    def expire_ids(self) -> list[str]:
        """Forget transactional.ids idle for transactional.id.expiration.ms (a tombstone)."""
        now = self.clock()
        expired = []
        for txn_id, md in list(self.txns.items()):
            if now - md.last_update_ms < self.settings.id_expiration_ms:
                continue
            if md.state not in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT):
                continue
            md.state = next_state(md.state, TxnEvent.EXPIRE)
            self.store.append(self.partition_for(txn_id),
                              build_batch([Record(key=encode_txn_key(txn_id), value=None, timestamp=now)]))
            del self.txns[txn_id]
            expired.append(txn_id)
        return expired

    # -- admin -------------------------------------------------------------------------------------

    def describe(self, transactional_id: str) -> TxnMetadata | None:
        return self.txns.get(transactional_id)

    def list(self, states: set[str] | None = None, producer_ids: set[int] | None = None) -> list[TxnMetadata]:
        return [md for md in self.txns.values()
                if (not states or md.state.kafka_name in states)
                and (not producer_ids or md.producer_id in producer_ids)]
