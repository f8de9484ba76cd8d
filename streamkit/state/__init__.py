"""State stores for stream processing: pure, synchronous, fed by the runtime.

Layers, bottom up:

* ``KVBackend`` (``MemoryBackend``, ``RocksDBBackend``): ordered bytes map, atomic batches;
* ``StorePartition``: one (table, partition), its changelog offset kept in the same batch
  as the data; ``apply_changelog`` restores it;
* ``Transaction``: one commit interval's writes, buffered; emits the changelog records;
* ``WindowedTransaction``: windows per key over a transaction, with range-scan expiry;
* ``Store``: a table's partitions under ``state_dir/{app_id}/{table}/{partition}``.

The runtime owns all I/O with the broker: it produces ``Transaction.changelog_records()``
and feeds consumed changelog records to ``StorePartition.apply_changelog``.
"""

from streamkit.state.backend import Change, KVBackend
from streamkit.state.errors import (
    InvalidChangelogOffsetError,
    StateError,
    StoreClosedError,
    StoreIdentityError,
    TransactionStateError,
)
from streamkit.state.memory import MemoryBackend
from streamkit.state.partition import (
    FORMAT_VERSION,
    ChangelogPartition,
    ChangelogRecord,
    StorePartition,
)
from streamkit.state.rocksdb import RocksDBBackend, RocksDBOptions
from streamkit.state.serialization import (
    INT64_MAX,
    INT64_MIN,
    decode_int64,
    encode_int64,
    next_prefix,
    parse_prefix_key,
    parse_window_expiry_key,
    parse_window_key,
    prefix_key,
    prefix_range,
    window_expiry_key,
    window_key,
    window_key_prefix,
)
from streamkit.state.store import (
    BackendFactory,
    BackendKind,
    Store,
    backend_factory,
    changelog_topic,
)
from streamkit.state.transaction import Transaction, TransactionStatus
from streamkit.state.windowed import Window, WindowedTransaction

__all__ = [
    "FORMAT_VERSION",
    "INT64_MAX",
    "INT64_MIN",
    "BackendFactory",
    "BackendKind",
    "Change",
    "ChangelogPartition",
    "ChangelogRecord",
    "InvalidChangelogOffsetError",
    "KVBackend",
    "MemoryBackend",
    "RocksDBBackend",
    "RocksDBOptions",
    "StateError",
    "Store",
    "StoreClosedError",
    "StoreIdentityError",
    "StorePartition",
    "Transaction",
    "TransactionStateError",
    "TransactionStatus",
    "Window",
    "WindowedTransaction",
    "backend_factory",
    "changelog_topic",
    "decode_int64",
    "encode_int64",
    "next_prefix",
    "parse_prefix_key",
    "parse_window_expiry_key",
    "parse_window_key",
    "prefix_key",
    "prefix_range",
    "window_expiry_key",
    "window_key",
    "window_key_prefix",
]
