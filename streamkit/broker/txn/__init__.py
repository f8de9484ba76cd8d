"""The transaction coordinator: the state table (``state``), the records of
``__transaction_state`` (``records``) and the coordinator itself (``coordinator``)."""

from streamkit.broker.txn.coordinator import (
    TRANSACTION_STATE_TOPIC,
    MarkerWriter,
    TransactionCoordinator,
    TxnMetadata,
    TxnSettings,
    TxnStore,
)
from streamkit.broker.txn.state import TxnEvent, TxnState

__all__ = [
    "TRANSACTION_STATE_TOPIC",
    "MarkerWriter",
    "TransactionCoordinator",
    "TxnEvent",
    "TxnMetadata",
    "TxnSettings",
    "TxnState",
    "TxnStore",
]
