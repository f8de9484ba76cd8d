"""A Transaction over either backend behaves exactly like a dict model: random gets, sets,
deletes and range scans, commits and rollbacks, then more of the same."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from streamkit.state import StorePartition, Transaction
from tests.state.conftest import CHANGELOG, open_backend

# A tiny alphabet makes keys collide and scans hit their edges; b"" and 0xff included.
keys = st.binary(max_size=3).map(lambda b: bytes(x % 3 * 0x7F for x in b))
values = st.binary(max_size=3)


class TransactionModel(RuleBasedStateMachine):
    backend_kind = "memory"

    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="tx-model-"))
        self.partition = StorePartition(open_backend(self.backend_kind, self.dir / "db"), CHANGELOG)
        self.committed: dict[bytes, bytes] = {}
        self.pending: dict[bytes, bytes | None] = {}
        self.tx: Transaction = self.partition.begin()
        self.offset = -1
        self.reopened = False

    def view(self) -> dict[bytes, bytes]:
        merged = dict(self.committed)
        for key, value in self.pending.items():
            if value is None:
                merged.pop(key, None)
            else:
                merged[key] = value
        return merged

    @rule(key=keys, value=values)
    def set(self, key: bytes, value: bytes) -> None:
        self.tx.set(key, value)
        self.pending[key] = value

    @rule(key=keys)
    def delete(self, key: bytes) -> None:
        self.tx.delete(key)
        self.pending[key] = None

    @rule(key=keys)
    def get(self, key: bytes) -> None:
        assert self.tx.get(key) == self.view().get(key)

    @rule(lo=keys, hi=st.one_of(st.none(), keys), reverse=st.booleans())
    def iter_range(self, lo: bytes, hi: bytes | None, reverse: bool) -> None:
        expected = sorted(
            (k, v) for k, v in self.view().items() if lo <= k and (hi is None or k < hi)
        )
        if reverse:
            expected.reverse()
        assert list(self.tx.iter_range(lo, hi, reverse)) == expected

    @rule(with_offset=st.booleans())
    def commit(self, with_offset: bool) -> None:
        records = self.tx.changelog_records()
        assert dict(records) == self.pending and len(records) == len(self.pending)
        offset = None
        if with_offset:
            self.offset += len(records) + 1
            offset = self.offset
        self.tx.commit(offset)
        self.committed = self.view()
        self.pending = {}
        self.tx = self.partition.begin()

    @rule()
    def rollback(self) -> None:
        self.tx.rollback()
        self.pending = {}
        self.tx = self.partition.begin()

    # Reopening RocksDB costs tens of milliseconds: once per example is enough.
    @precondition(lambda self: self.backend_kind == "rocksdb" and not self.reopened)
    @rule()
    def reopen(self) -> None:
        # Committed state survives a close and reopen; the open transaction does not.
        self.reopened = True
        self.partition.close()
        self.partition = StorePartition(open_backend(self.backend_kind, self.dir / "db"), CHANGELOG)
        self.pending = {}
        self.tx = self.partition.begin()
        assert self.partition.changelog_offset == (None if self.offset < 0 else self.offset)

    @invariant()
    def committed_state_matches(self) -> None:
        assert self.partition.get(b"") == self.committed.get(b"")
        assert self.tx.pending == len(self.pending)

    def teardown(self) -> None:
        assert dict(self.partition.iter_range()) == self.committed
        self.partition.destroy()
        shutil.rmtree(self.dir, ignore_errors=True)


class RocksDBTransactionModel(TransactionModel):
    backend_kind = "rocksdb"


TestMemoryTransaction = TransactionModel.TestCase
TestMemoryTransaction.settings = settings(max_examples=60, stateful_step_count=40, deadline=None)
TestRocksDBTransaction = RocksDBTransactionModel.TestCase
TestRocksDBTransaction.settings = settings(max_examples=30, stateful_step_count=40, deadline=None)
