"""Errors raised by the state-store layer.

The stream runtime decides what each means for the application: a closed store after a
revoke is expected during a rebalance, an identity mismatch means "destroy and restore".
"""

from __future__ import annotations

__all__ = [
    "InvalidChangelogOffsetError",
    "StateError",
    "StoreClosedError",
    "StoreIdentityError",
    "TransactionStateError",
]


class StateError(Exception):
    """Base class for state-store errors."""


class StoreClosedError(StateError):
    """The backend or partition was closed (revoked or destroyed) and cannot be used."""


class TransactionStateError(StateError):
    """An operation the transaction's current status does not allow (e.g. a write after
    ``changelog_records()``, any use after commit or rollback, a second open transaction)."""


class InvalidChangelogOffsetError(StateError):
    """A commit tried to move the stored changelog offset backwards."""


class StoreIdentityError(StateError):
    """The directory holds a store that mirrors another changelog, or uses another format.

    Its data and offset mean nothing for this changelog: destroy it and restore."""
