"""Which partitions of an internal topic a coordinator answers for, one small state table.

A coordinator (groups, transactions, share groups) keeps its state per partition of its
internal topic (``__consumer_offsets``, ``__transaction_state``, ``__share_group_state``),
and a key (a group id, a transactional.id) belongs to the partition its hash names. A broker
coordinates exactly the partitions it leads (Kafka's rule):

- not owned: a request for a key of the partition gets NOT_COORDINATOR (the client asks
  FindCoordinator again);
- loading: this broker leads the partition and is replaying it from its log; requests get
  COORDINATOR_LOAD_IN_PROGRESS (the client retries);
- active: the state is in memory; requests are served.

A single broker leads every partition: it loads them all at start and they stay active.
"""

from __future__ import annotations

import enum

from kio.schema.errors import ErrorCode

__all__ = ["OwnedPartitions", "Ownership"]


class Ownership(enum.Enum):
    LOADING = "loading"
    ACTIVE = "active"


_ERRORS = {None: ErrorCode.not_coordinator, Ownership.LOADING: ErrorCode.coordinator_load_in_progress,
           Ownership.ACTIVE: ErrorCode.none}


class OwnedPartitions:
    """The partitions one coordinator owns, with their state (see the module docstring)."""

    def __init__(self) -> None:
        self._states: dict[int, Ownership] = {}

    def error(self, partition: int) -> ErrorCode:
        """NONE for an active partition, else the code a request for it gets."""
        return _ERRORS[self._states.get(partition)]

    def is_active(self, partition: int) -> bool:
        return self._states.get(partition) is Ownership.ACTIVE

    @property
    def loading(self) -> bool:
        """Is any partition being loaded (list requests answer COORDINATOR_LOAD_IN_PROGRESS)?"""
        return Ownership.LOADING in self._states.values()

    def start_loading(self, partition: int) -> None:
        self._states[partition] = Ownership.LOADING

    def activate(self, partition: int) -> None:
        self._states[partition] = Ownership.ACTIVE

    def drop(self, partition: int) -> bool:
        """No longer owned; True if it was."""
        return self._states.pop(partition, None) is not None

    def active(self) -> set[int]:
        return {p for p, s in self._states.items() if s is Ownership.ACTIVE}
