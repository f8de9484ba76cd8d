"""Transactions in the partition log: last stable offset, the per-segment transaction index
(.txnindex) and its rebuild by recovery, retention and compaction of aborted data."""

from __future__ import annotations

import shutil
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streamkit.log import ControlType, PartitionLog, build_control_batch
from streamkit.log.cleaner import clean
from streamkit.log.producer_state import AppendOrigin
from streamkit.log.records import Record, build_batch, decode_batch, decode_control_key
from streamkit.log.txn_index import AbortedTxn, TxnIndex, collect_aborted, txn_index_path
from tests.log.conftest import T0, FakeClock, OpenLog, read_batches

CLIENT = AppendOrigin.CLIENT


class Producer:
    """A transactional producer's batches, numbered as a client numbers them."""

    def __init__(self, pid: int, epoch: int = 0) -> None:
        self.pid, self.epoch, self.seq = pid, epoch, 0

    def batch(self, *values: bytes, key: bytes = b"k") -> bytes:
        records = [Record(key, v, T0) for v in values]
        batch = build_batch(records, producer_id=self.pid, producer_epoch=self.epoch,
                            base_sequence=self.seq, transactional=True)
        self.seq += len(values)
        return batch

    def marker(self, commit: bool) -> bytes:
        return build_control_batch(ControlType.COMMIT if commit else ControlType.ABORT,
                                   producer_id=self.pid, producer_epoch=self.epoch,
                                   coordinator_epoch=0, timestamp=T0)


def plain(*values: bytes, key: bytes = b"k") -> bytes:
    return build_batch([Record(key, v, T0) for v in values])


def test_txn_index_file_round_trip_and_torn_tail(tmp_path: Path) -> None:
    path = txn_index_path(tmp_path, 0)
    index = TxnIndex.load(path)
    assert index.entries == [] and not path.exists()  # no file until the first abort
    index.append(AbortedTxn(7, 10, 20, 21))
    index.append(AbortedTxn(8, 15, 30, 31), fsync=True)
    with open(path, "ab") as f:
        f.write(b"\x00\x00\x01")  # a torn third entry
    loaded = TxnIndex.load(path)
    assert loaded.entries == [AbortedTxn(7, 10, 20, 21), AbortedTxn(8, 15, 30, 31)]
    assert path.stat().st_size == 2 * 34
    loaded.truncate_from(30)
    assert TxnIndex.load(path).entries == [AbortedTxn(7, 10, 20, 21)]


def test_collect_aborted_overlap_and_stop() -> None:
    a = TxnIndex(Path("a"), [AbortedTxn(1, 0, 5, 3), AbortedTxn(2, 3, 9, 10)])
    b = TxnIndex(Path("b"), [AbortedTxn(3, 12, 14, 15), AbortedTxn(4, 20, 22, 23)])
    assert collect_aborted([a, b], 6, 13) == [AbortedTxn(2, 3, 9, 10), AbortedTxn(3, 12, 14, 15)]
    # the entry whose LSO reaches the upper bound ends the search
    assert collect_aborted([a, b], 0, 10) == [AbortedTxn(1, 0, 5, 3), AbortedTxn(2, 3, 9, 10)]


def test_last_stable_offset_follows_open_transactions(open_log: OpenLog) -> None:
    log = open_log()
    assert log.last_stable_offset == 0
    log.append(plain(b"x"))  # 0
    p1, p2 = Producer(1), Producer(2)
    log.append(p1.batch(b"a", b"b"), origin=CLIENT)  # 1-2
    log.append(plain(b"y"))  # 3
    log.append(p2.batch(b"c"), origin=CLIENT)  # 4
    assert log.high_watermark == 5 and log.last_stable_offset == 1
    log.append(p1.marker(commit=True))  # 5
    assert log.last_stable_offset == 4
    log.append(p2.marker(commit=False))  # 6
    assert log.last_stable_offset == log.high_watermark == 7
    assert log.aborted_transactions(0, 7) == [AbortedTxn(2, 4, 6, 7)]
    assert log.aborted_transactions(0, 4) == []  # p2's transaction starts at 4


def test_no_aborts_no_index_files(open_log: OpenLog, part_dir: Path) -> None:
    log = open_log()
    p = Producer(1)
    log.append(p.batch(b"a"), origin=CLIENT)
    log.append(p.marker(commit=True))
    assert log.aborted_transactions(0, log.high_watermark) == []
    assert not list(part_dir.glob("*.txnindex"))


def test_open_transaction_and_aborts_survive_a_clean_restart(open_log: OpenLog, part_dir: Path) -> None:
    log = open_log({"segment.bytes": 300})
    p1, p2 = Producer(1), Producer(2)
    log.append(p1.batch(b"a" * 50), origin=CLIENT)  # 0
    log.append(p1.marker(commit=False))  # 1
    log.append(p2.batch(b"b" * 50), origin=CLIENT)  # 2, stays open
    for i in range(5):
        log.append(plain(bytes([i]) * 50))
    assert len(log.segments) > 1
    log.close()
    log = open_log({"segment.bytes": 300})
    assert log.last_stable_offset == 2
    assert log.aborted_transactions(0, log.high_watermark) == [AbortedTxn(1, 0, 1, 2)]


def test_recovery_rebuilds_the_index_of_the_replayed_range(open_log: OpenLog, part_dir: Path) -> None:
    log = open_log()
    p = Producer(1)
    log.append(p.batch(b"a"), origin=CLIENT)
    log.flush()
    snapshot_end = log.log_end_offset
    log.append(p.marker(commit=False))
    log.abandon()  # a crash: no checkpoint, no snapshot past the marker
    txn_index_path(part_dir, 0).unlink()  # and the entry never reached the disk
    log = open_log()
    assert snapshot_end <= 1
    assert log.aborted_transactions(0, log.high_watermark) == [AbortedTxn(1, 0, 1, 2)]
    assert log.last_stable_offset == 2


def test_truncation_drops_entries_past_the_cut(open_log: OpenLog) -> None:
    log = open_log()
    p = Producer(1)
    log.append(p.batch(b"a"), origin=CLIENT)
    log.append(p.marker(commit=False))  # 1
    assert log.aborted_transactions(0, 2)
    log.truncate_to(1)
    assert log.aborted_transactions(0, 1) == []
    assert log.last_stable_offset == 0  # the transaction is open again


def test_retention_deletes_index_with_segment(open_log: OpenLog, part_dir: Path, clock: FakeClock) -> None:
    log = open_log({"segment.bytes": 200, "retention.bytes": 1})
    p = Producer(1)
    log.append(p.batch(b"a" * 80), origin=CLIENT)
    log.append(p.marker(commit=False))
    assert list(part_dir.glob("*.txnindex"))
    log.roll()
    log.append(plain(b"z"))
    log.roll()
    log.apply_retention()
    assert not list(part_dir.glob("*.txnindex"))
    assert log.aborted_transactions(log.log_start_offset, log.high_watermark) == []


def _values(log: PartitionLog) -> list[tuple[bytes | None, bytes | None]]:
    out = []
    for batch in read_batches(log):
        header, records = decode_batch(batch)
        if not header.is_control:
            out.extend((r.key, r.value) for r in records)
    return out


def test_compaction_drops_aborted_data_and_keeps_committed_values(open_log: OpenLog) -> None:
    log = open_log({"cleanup.policy": "compact", "segment.bytes": 100_000})
    p = Producer(1)
    log.append(plain(b"committed-1"))
    log.append(p.batch(b"aborted"), origin=CLIENT)
    log.append(p.marker(commit=False))
    log.append(p.batch(b"committed-2", key=b"other"), origin=CLIENT)
    log.append(p.marker(commit=True))
    log.roll()
    result = clean(log, force=True)
    assert result is not None
    # the aborted value is gone and did not supersede the committed one
    assert _values(log) == [(b"k", b"committed-1"), (b"other", b"committed-2")]
    controls = [decode_batch(b)[0].base_offset for b in read_batches(log) if decode_batch(b)[0].is_control]
    assert controls == [2, 4]


def test_compaction_stops_at_an_open_transaction(open_log: OpenLog) -> None:
    log = open_log({"cleanup.policy": "compact", "segment.bytes": 100_000})
    p = Producer(1)
    log.append(plain(b"old"))
    log.append(p.batch(b"undecided"), origin=CLIENT)
    log.roll()
    assert clean(log, force=True) is None  # the only inactive segment holds an open txn
    assert _values(log) == [(b"k", b"old"), (b"k", b"undecided")]


def test_compaction_drops_a_marker_after_its_data_and_the_delete_horizon(open_log: OpenLog,
                                                                          clock: FakeClock) -> None:
    log = open_log({"cleanup.policy": "compact", "segment.bytes": 100_000, "delete.retention.ms": 1_000})
    p = Producer(1)
    log.append(p.batch(b"aborted"), origin=CLIENT)  # 0
    log.append(p.marker(commit=False))  # 1: its transaction will have no record left
    log.append(p.batch(b"kept", key=b"other"), origin=CLIENT)  # 2
    log.append(p.marker(commit=True))  # 3: its transaction keeps a record
    log.roll()

    def markers() -> list[tuple[int, int | None]]:
        return [(h.base_offset, h.delete_horizon) for h in (decode_batch(b)[0] for b in read_batches(log))
                if h.is_control]

    assert clean(log, force=True) is not None
    assert markers() == [(1, clock.now + 1_000), (3, None)]  # stamped, not dropped yet
    clock.advance(999)
    clean(log, force=True)
    assert [o for o, _h in markers()] == [1, 3]
    clock.advance(1)
    assert clean(log) is not None  # the horizon is due: a pass runs without being forced
    assert markers() == [(3, None)]
    assert _values(log) == [(b"other", b"kept")]
    # a reopened log rebuilds no open transaction from what is left
    log.close()
    log = open_log({"cleanup.policy": "compact", "segment.bytes": 100_000, "delete.retention.ms": 1_000})
    assert log.last_stable_offset == log.high_watermark


# -- a read_committed consumer against a model ----------------------------------------------

Step = tuple[str, int, bool]  # ("plain" | "txn" | "end" | "roll" | "reopen", producer, commit)

_STEPS = st.one_of(
    st.tuples(st.just("plain"), st.just(0), st.just(False)),
    st.tuples(st.just("txn"), st.integers(1, 3), st.just(False)),
    st.tuples(st.just("end"), st.integers(1, 3), st.booleans()),
    st.tuples(st.just("roll"), st.just(0), st.just(False)),
    st.tuples(st.just("reopen"), st.booleans().map(int), st.just(False)),
)


def read_committed(log: PartitionLog, max_bytes: int) -> list[bytes]:
    """What Kafka's consumer does with fetches up to the LSO and their aborted lists."""
    out: list[bytes] = []
    offset = log.log_start_offset
    upper = log.last_stable_offset
    while offset < upper:
        data, next_offset = log.read_chunk(offset, max_bytes, max_offset=upper)
        pending = sorted(log.aborted_transactions(offset, min(next_offset, upper)),
                         key=lambda a: a.first_offset)
        aborted: set[int] = set()
        for batch in split(data):
            header, records = decode_batch(batch)
            while pending and pending[0].first_offset <= header.last_offset:
                aborted.add(pending.pop(0).producer_id)
            if header.is_control:
                if records and decode_control_key(records[0].key or b"") == ControlType.ABORT:
                    aborted.discard(header.producer_id)
                continue
            if header.is_transactional and header.producer_id in aborted:
                continue
            out.extend(r.value or b"" for r in records)
        offset = max(next_offset, offset + 1) if data else next_offset
    return out


def split(data: bytes) -> list[bytes]:
    from streamkit.log.batch import iter_batch_spans

    return [data[pos : pos + size] for pos, size, _b, _l in iter_batch_spans(data)]


@settings(deadline=None, max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(_STEPS, max_size=40), max_bytes=st.sampled_from([1, 200, 1 << 20]))
def test_read_committed_sees_exactly_the_committed_records(open_log: OpenLog, part_dir: Path,
                                                           steps: list[Step], max_bytes: int) -> None:
    shutil.rmtree(part_dir, ignore_errors=True)
    settings_ = {"segment.bytes": 400}
    log = open_log(settings_)
    producers = {pid: Producer(pid) for pid in (1, 2, 3)}
    open_txn: dict[int, list[bytes]] = {}
    visible: list[tuple[int, bytes]] = []  # (offset, value) of records a read_committed reader must see
    counter = 0

    def write(step: Step) -> None:
        nonlocal log, counter
        kind, pid, commit = step
        if kind == "plain":
            counter += 1
            value = b"p%d" % counter
            visible.append((log.append(plain(value)).base_offset, value))
        elif kind == "txn":
            counter += 1
            value = b"t%d-%d" % (pid, counter)
            offset = log.append(producers[pid].batch(value), origin=CLIENT).base_offset
            open_txn.setdefault(pid, []).append(offset.to_bytes(8, "big") + value)
        elif kind == "end" and pid in open_txn:
            log.append(producers[pid].marker(commit))
            written = open_txn.pop(pid)
            if commit:
                visible.extend((int.from_bytes(w[:8], "big"), w[8:]) for w in written)
        elif kind == "roll":
            log.roll()
        elif kind == "reopen":
            if pid:
                log.close()
            else:
                log.abandon()
            log = open_log(settings_)

    for step in steps:
        write(step)
        first_open = min((int.from_bytes(w[0][:8], "big") for w in open_txn.values()), default=None)
        assert log.last_stable_offset == (log.high_watermark if first_open is None else first_open)
        expected = [v for o, v in sorted(visible) if first_open is None or o < first_open]
        assert read_committed(log, max_bytes) == expected
    for pid in list(open_txn):
        write(("end", pid, pid % 2 == 0))
    assert log.last_stable_offset == log.high_watermark
    assert read_committed(log, max_bytes) == [v for _o, v in sorted(visible)]
