"""Errors connectors raise and the runtime understands (one place, as Kafka Connect's
``ConnectException``/``RetriableException``/``DataException``)."""

from __future__ import annotations

__all__ = ["ConfigError", "ConnectError", "DataError", "RetriableError"]


class ConnectError(Exception):
    """A connector or task failed; its status becomes FAILED with this message."""


class RetriableError(ConnectError):
    """A transient failure (a database restarting): the runtime retries the same call
    with backoff (``errors.retry.timeout``, ``errors.retry.delay.max.ms``)."""


class DataError(ConnectError):
    """One record cannot be converted or written. With ``errors.tolerance=all`` it is
    skipped (and sent to the dead-letter topic when one is set); otherwise the task fails."""


class ConfigError(ConnectError, ValueError):
    """A config is invalid. ``problems`` maps each bad key to its messages, so the REST API
    can answer 400 with every problem listed."""

    def __init__(self, problems: dict[str, list[str]]) -> None:
        self.problems = problems
        listed = "; ".join(f"{key}: {' '.join(msgs)}" for key, msgs in problems.items())
        super().__init__(f"invalid config: {listed}")
