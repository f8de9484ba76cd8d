"""The Connect runtime: connectors, tasks, workers and a Kafka-Connect-compatible REST API.

Connector authors implement the SPI in ``streamkit.connect.connector`` with the records and
schemas of ``streamkit.connect.data``.
"""

from streamkit.connect.connector import (
    Connector,
    ConnectorConfig,
    SinkConnector,
    SinkTask,
    SourceConnector,
    SourceTask,
)
from streamkit.connect.data import Schema, SinkRecord, SourceRecord
from streamkit.connect.errors import ConfigError, ConnectError, DataError, RetriableError

__all__ = [
    "ConfigError",
    "ConnectError",
    "Connector",
    "ConnectorConfig",
    "DataError",
    "RetriableError",
    "Schema",
    "SinkConnector",
    "SinkRecord",
    "SinkTask",
    "SourceConnector",
    "SourceRecord",
    "SourceTask",
]
