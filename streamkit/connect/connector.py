"""The connector and task SPI: what a connector implements and what the runtime gives it.

Modelled on Kafka Connect's ``SourceConnector``/``SourceTask``/``SinkConnector``/``SinkTask``
so its contracts carry over, with Python's shape:

- A connector declares ``config_model``, a pydantic model whose fields use Kafka Connect's key
  names as aliases (``connection.url``, ``mode``...). The runtime validates a connector's
  config against it before anything starts, and lists every problem per key.
- ``Connector.start(config)`` gets the validated model; ``task_configs(max_tasks)`` splits
  the work into at most ``max_tasks`` string maps, each handed to one task's ``start``.
- Tasks are plain synchronous objects: the runtime runs each on its own thread, so a JDBC
  driver or a file read may block. ``poll``/``put`` should return within about a second so
  that pause and stop take effect promptly.
- Sources return ``SourceRecord``s carrying a source partition and offset; the runtime
  commits those offsets only after Kafka acknowledged the records (and, with
  ``exactly.once.source.support``, in the same transaction). Sinks get batches in ``put``;
  the runtime commits a partition's consumer offset only after ``flush`` succeeded for it,
  and only up to what ``pre_commit`` returns.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Protocol

from pydantic import BaseModel, ConfigDict

from streamkit.connect.data import SinkRecord, SourceRecord

__all__ = [
    "Connector",
    "ConnectorConfig",
    "ConnectorContext",
    "SinkConnector",
    "SinkTask",
    "SinkTaskContext",
    "SourceConnector",
    "SourceTask",
    "SourceTaskContext",
    "Task",
    "TopicPartition",
]

TopicPartition = tuple[str, int]


class ConnectorConfig(BaseModel):
    """Base of every connector's ``config_model``.

    Keys the runtime owns (``name``, ``connector.class``, ``tasks.max``, converters,
    ``transforms.*``, ``errors.*``, ``topics``...) are validated by the runtime and ignored
    here, so a connector's model lists only its own keys, under Kafka Connect's names.
    """

    model_config = ConfigDict(populate_by_name=True, extra="ignore", frozen=True)


class ConnectorContext(Protocol):
    """What the runtime offers a running connector."""

    def request_task_reconfiguration(self) -> None:
        """Ask the runtime to call ``task_configs`` again (e.g. a new table appeared)."""

    def raise_error(self, error: BaseException) -> None:
        """Fail the connector with ``error`` (its status becomes FAILED with the trace)."""


class SourceTaskContext(Protocol):
    """What the runtime offers a running source task: its committed offsets."""

    def offset(self, source_partition: Mapping[str, Any]) -> Mapping[str, Any] | None:
        """The last committed source offset of ``source_partition``, or None."""


class SinkTaskContext(Protocol):
    """What the runtime offers a running sink task: its partitions, and control over
    where they are read and when offsets are committed."""

    def assignment(self) -> frozenset[TopicPartition]:
        """The topic partitions assigned to this task now."""

    def offset(self, offsets: Mapping[TopicPartition, int]) -> None:
        """Rewind or skip: consume these partitions from these offsets next."""

    def pause(self, *partitions: TopicPartition) -> None:
        """Stop fetching these partitions (e.g. while the destination is unavailable)."""

    def resume(self, *partitions: TopicPartition) -> None:
        """Fetch these paused partitions again."""

    def request_commit(self) -> None:
        """Ask for a flush and offset commit soon, rather than at the next interval."""


class Connector(abc.ABC):
    """Common part of source and sink connectors."""

    config_model: ClassVar[type[ConnectorConfig]] = ConnectorConfig
    # Short names users may write in ``connector.class`` besides the class's full name,
    # e.g. Kafka Connect's and Confluent's Java class names for the same connector.
    aliases: ClassVar[tuple[str, ...]] = ()

    def __init__(self) -> None:
        self.context: ConnectorContext | None = None

    def initialize(self, context: ConnectorContext) -> None:
        """Called by the runtime before ``start``, with what it offers the connector."""
        self.context = context

    def version(self) -> str:
        """The connector's version, shown by the REST API (default: streamkit's)."""
        from streamkit import __version__

        return __version__

    @abc.abstractmethod
    def start(self, config: ConnectorConfig) -> None:
        """Begin with a validated config (an instance of ``config_model``)."""

    @abc.abstractmethod
    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        """At most ``max_tasks`` configs, one per task to run."""

    def stop(self) -> None:  # noqa: B027 - an optional hook, not abstract
        """Release what ``start`` took. Called once, also after a failure."""

    @classmethod
    @abc.abstractmethod
    def task_class(cls) -> type[Task]:
        """The class of this connector's tasks."""


class Task(abc.ABC):
    """Common part of source and sink tasks: one unit of a connector's work, run by a
    worker in its own thread."""

    @abc.abstractmethod
    def start(self, config: Mapping[str, str]) -> None:
        """Begin with one of the configs the connector's ``task_configs`` returned."""

    def stop(self) -> None:  # noqa: B027 - an optional hook, not abstract
        """Called once from the runtime's thread; may interrupt a blocked ``poll``/``put``."""

    def version(self) -> str:
        """The task's version (default: streamkit's)."""
        from streamkit import __version__

        return __version__


class SourceConnector(Connector):
    """A connector whose tasks read an external system into topics.

    Example::

        class CounterSource(SourceConnector):
            def start(self, config): self.config = config
            def task_configs(self, max_tasks): return [{"topic": self.config.topic}]
            @classmethod
            def task_class(cls): return CounterTask
    """

    @classmethod
    @abc.abstractmethod
    def task_class(cls) -> type[SourceTask]:
        """The class of this connector's tasks."""

    def exactly_once_support(self, config: ConnectorConfig) -> bool:
        """Whether this connector's tasks can write records and offsets in one transaction
        (Kafka's ``exactlyOnceSupport``): a config with ``exactly.once.support=required`` is
        refused when this is False. Tasks whose offsets say exactly where they are (files,
        JDBC queries) can; one that acknowledges its source outside Connect's offsets (e.g.
        deletes what ``commit`` reports) cannot."""
        return True


class SinkConnector(Connector):
    """A connector whose tasks write topics into an external system."""

    @classmethod
    @abc.abstractmethod
    def task_class(cls) -> type[SinkTask]:
        """The class of this connector's tasks."""


class SourceTask(Task):
    """Reads records from an external system: the runtime calls ``poll`` in a loop and
    writes what it returns, with each record's source partition and offset."""

    def __init__(self) -> None:
        self.context: SourceTaskContext | None = None

    def initialize(self, context: SourceTaskContext) -> None:
        """Called by the runtime before ``start``, with access to committed offsets."""
        self.context = context

    @abc.abstractmethod
    def poll(self) -> Sequence[SourceRecord]:
        """New records, or an empty sequence after waiting up to about a second."""

    def commit(self) -> None:
        """Offsets up to the last acknowledged records were committed (e.g. delete a file)."""

    def commit_record(self, record: SourceRecord, partition: int, offset: int) -> None:
        """``record`` was written to Kafka at ``partition``/``offset``."""


class SinkTask(Task):
    """Writes records to an external system: the runtime hands it batches through ``put``
    and calls ``flush`` before it commits their offsets."""

    def __init__(self) -> None:
        self.context: SinkTaskContext | None = None

    def initialize(self, context: SinkTaskContext) -> None:
        """Called by the runtime before ``start``, with its partitions and controls."""
        self.context = context

    def open(self, partitions: frozenset[TopicPartition]) -> None:
        """These partitions were assigned to this task (writers may be opened here)."""

    def close(self, partitions: frozenset[TopicPartition]) -> None:
        """These partitions were revoked; flush has already run for them."""

    @abc.abstractmethod
    def put(self, records: Sequence[SinkRecord]) -> None:
        """Write or buffer a batch. Raise ``RetriableError`` to have it redelivered."""

    def flush(self, offsets: Mapping[TopicPartition, int]) -> None:
        """Make everything ``put`` so far durable; ``offsets`` are the next offsets to read."""

    def pre_commit(self, offsets: Mapping[TopicPartition, int]) -> Mapping[TopicPartition, int]:
        """Offsets safe to commit (next offset per partition). Default: flush, then all."""
        self.flush(offsets)
        return offsets
