"""Crash consistency: data and the changelog offset always move together.

The store is never closed before it is reopened: in-process by dropping the Python object,
and for real by SIGKILLing a writer process in the middle of its commits.
"""

from __future__ import annotations

import gc
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from streamkit.state import RocksDBBackend, StorePartition
from tests.state.conftest import CHANGELOG

KEYS = 20


def expected_state(offset: int) -> dict[bytes, bytes]:
    """Commit ``n`` (at changelog offset ``n``) sets every key to ``n``, except key ``n % KEYS``,
    which it deletes: any mix of two commits is detectable."""
    state: dict[bytes, bytes] = {}
    for n in range(offset + 1):
        for k in range(KEYS):
            key = b"k%02d" % k
            if k == n % KEYS:
                state.pop(key, None)
            else:
                state[key] = b"%d" % n
    return state


def commit_number(partition: StorePartition, n: int) -> None:
    tx = partition.begin()
    for k in range(KEYS):
        if k == n % KEYS:
            tx.delete(b"k%02d" % k)
        else:
            tx.set(b"k%02d" % k, b"%d" % n)
    tx.commit(n)


def check_consistent(partition: StorePartition) -> int:
    offset = partition.changelog_offset
    assert offset is not None
    assert dict(partition.iter_range()) == expected_state(offset)
    return offset


def test_abandoned_store_reopens_consistent(tmp_path: Path) -> None:
    path = tmp_path / "db"
    partition = StorePartition(RocksDBBackend(path), CHANGELOG)
    for n in range(30):
        commit_number(partition, n)
    tx = partition.begin()
    tx.set(b"k00", b"uncommitted")
    del partition, tx  # no close: the database is dropped with whatever it holds
    gc.collect()
    partition = StorePartition(RocksDBBackend(path), CHANGELOG)
    assert check_consistent(partition) == 29
    partition.close()


WRITER = """
import sys
from pathlib import Path
from streamkit.state import RocksDBBackend, StorePartition
from tests.state.conftest import CHANGELOG
from tests.state.test_crash import commit_number

partition = StorePartition(RocksDBBackend(Path(sys.argv[1])), CHANGELOG)
n = 0 if partition.changelog_offset is None else partition.changelog_offset + 1
print("ready", flush=True)
while True:
    commit_number(partition, n)
    n += 1
"""


def test_killed_writer_leaves_data_and_offset_in_step(tmp_path: Path) -> None:
    path = tmp_path / "db"
    root = Path(__file__).resolve().parents[2]
    offsets = []
    for _ in range(2):  # the second run resumes from the first's offset, then dies too
        proc = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(path)],
            cwd=root,
            stdout=subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": str(root)},
        )
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == b"ready"
        time.sleep(0.3)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
        partition = StorePartition(RocksDBBackend(path), CHANGELOG)
        offsets.append(check_consistent(partition))
        partition.close()
    assert 0 <= offsets[0] < offsets[1]
