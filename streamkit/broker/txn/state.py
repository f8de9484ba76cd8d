"""Transaction states of one transactional.id: one table of (state, event) -> next state.

The coordinator (``coordinator.py``) never assigns a state itself: it names the event and
the table says where the transaction goes. A pair missing from the table is a request the
state does not allow; the coordinator answers it with the error Kafka gives before ever
asking the table (CONCURRENT_TRANSACTIONS, INVALID_TXN_STATE...), so reaching
``IllegalTransition`` is a bug.

States (Kafka's TransactionState, with its byte codes in ``__transaction_state``):

- Empty (0): a producer id and epoch, no transaction yet (after InitProducerId).
- Ongoing (1): partitions were added; records may be produced to them.
- PrepareCommit (2) / PrepareAbort (3): EndTxn was accepted and persisted; the markers are
  being written. A broker that stops here finishes the markers when it starts again.
- CompleteCommit (4) / CompleteAbort (5): every marker is written.
- Dead (6): the transactional.id expired (transactional.id.expiration.ms) and is forgotten.

Events:

- INIT: InitProducerId (a new epoch): from Empty or a complete state, back to Empty. An
  Ongoing transaction is first aborted (fenced), so INIT never leaves Ongoing directly.
- ADD: AddPartitionsToTxn or AddOffsetsToTxn: Ongoing, from Empty, Ongoing or a complete
  state (a finished transaction's producer starting the next one).
- COMMIT / ABORT: EndTxn (ABORT also for a timed-out or fenced transaction): from Ongoing to
  the matching Prepare state.
- MARKERS_WRITTEN: from a Prepare state to its Complete state.
- EXPIRE: from Empty or a complete state to Dead.
"""

from __future__ import annotations

from enum import Enum
from types import MappingProxyType

__all__ = ["TRANSITIONS", "IllegalTransition", "TxnEvent", "TxnState", "next_state"]


class TxnState(Enum):
    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6

    @property
    def kafka_name(self) -> str:
        """The name DescribeTransactions and ListTransactions report."""
        return "".join(part.capitalize() for part in self.name.split("_"))

    @property
    def is_complete(self) -> bool:
        return self in (TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)

    @property
    def is_preparing(self) -> bool:
        return self in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)


class TxnEvent(Enum):
    INIT = "init"
    ADD = "add"
    COMMIT = "commit"
    ABORT = "abort"
    MARKERS_WRITTEN = "markers-written"
    EXPIRE = "expire"


class IllegalTransition(Exception):
    def __init__(self, state: TxnState, event: TxnEvent) -> None:
        super().__init__(f"transaction event {event.value} is not allowed in state {state.kafka_name}")
        self.state = state
        self.event = event


_S = TxnState
_E = TxnEvent

TRANSITIONS: MappingProxyType[tuple[TxnState, TxnEvent], TxnState] = MappingProxyType({
    (_S.EMPTY, _E.INIT): _S.EMPTY,
    (_S.COMPLETE_COMMIT, _E.INIT): _S.EMPTY,
    (_S.COMPLETE_ABORT, _E.INIT): _S.EMPTY,
    (_S.EMPTY, _E.ADD): _S.ONGOING,
    (_S.ONGOING, _E.ADD): _S.ONGOING,
    (_S.COMPLETE_COMMIT, _E.ADD): _S.ONGOING,
    (_S.COMPLETE_ABORT, _E.ADD): _S.ONGOING,
    (_S.ONGOING, _E.COMMIT): _S.PREPARE_COMMIT,
    (_S.ONGOING, _E.ABORT): _S.PREPARE_ABORT,
    (_S.PREPARE_COMMIT, _E.MARKERS_WRITTEN): _S.COMPLETE_COMMIT,
    (_S.PREPARE_ABORT, _E.MARKERS_WRITTEN): _S.COMPLETE_ABORT,
    (_S.EMPTY, _E.EXPIRE): _S.DEAD,
    (_S.COMPLETE_COMMIT, _E.EXPIRE): _S.DEAD,
    (_S.COMPLETE_ABORT, _E.EXPIRE): _S.DEAD,
})


def next_state(state: TxnState, event: TxnEvent) -> TxnState:
    try:
        return TRANSITIONS[state, event]
    except KeyError:
        raise IllegalTransition(state, event) from None
