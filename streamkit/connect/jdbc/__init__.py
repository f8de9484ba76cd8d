"""JDBC source and sink connectors over SQLAlchemy, configured as Confluent's.

``connection.url`` takes JDBC URLs (``jdbc:postgresql://``, ``jdbc:mysql://``,
``jdbc:mariadb://``, ``jdbc:sqlite:``) or SQLAlchemy URLs. Tested on PostgreSQL (psycopg 3),
MariaDB (PyMySQL) and SQLite.
"""

from streamkit.connect.jdbc.config import JdbcSinkConfig, JdbcSourceConfig
from streamkit.connect.jdbc.sink import JdbcSinkConnector, JdbcSinkTask
from streamkit.connect.jdbc.source import JdbcSourceConnector, JdbcSourceTask

__all__ = [
    "JdbcSinkConfig",
    "JdbcSinkConnector",
    "JdbcSinkTask",
    "JdbcSourceConfig",
    "JdbcSourceConnector",
    "JdbcSourceTask",
]
