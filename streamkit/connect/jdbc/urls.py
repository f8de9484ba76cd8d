"""``connection.url`` as Kafka Connect users write it (JDBC URLs) or as SQLAlchemy users do.

JDBC URLs map onto the drivers streamkit ships with: ``jdbc:postgresql:`` to psycopg 3,
``jdbc:mysql:``/``jdbc:mariadb:`` to PyMySQL and ``jdbc:sqlite:`` to the standard library's
sqlite3. Of a JDBC URL's query parameters only ``user`` and ``password`` carry over: the others
are options of the Java drivers (``useSSL``, ``serverTimezone``...) that mean nothing here.
``connection.user``/``connection.password`` win over credentials in the URL.
"""

from __future__ import annotations

from urllib.parse import parse_qsl, urlsplit

from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError

from streamkit.connect.errors import ConfigError

__all__ = ["to_sqlalchemy_url"]

# SQLAlchemy's default drivers for these backends (psycopg2, mysqlclient) are not ours.
_DEFAULT_DRIVERS = {
    "postgresql": "postgresql+psycopg",
    "postgres": "postgresql+psycopg",
    "mysql": "mysql+pymysql",
    "mariadb": "mysql+pymysql",
}
_JDBC_NETWORK = {"postgresql": "postgresql+psycopg", "mysql": "mysql+pymysql",
                 "mariadb": "mysql+pymysql"}


def _bad(message: str) -> ConfigError:
    return ConfigError({"connection.url": [message]})


def _from_jdbc(url: str) -> URL:
    rest = url[len("jdbc:"):]
    subprotocol, _, tail = rest.partition(":")
    if subprotocol == "sqlite":
        # jdbc:sqlite:/abs/path.db, jdbc:sqlite:relative.db, jdbc:sqlite::memory:
        path, _, _ = tail.partition("?")
        if path in ("", ":memory:"):
            return URL.create("sqlite")
        return URL.create("sqlite", database=path)
    driver = _JDBC_NETWORK.get(subprotocol)
    if driver is None:
        raise _bad(f"unsupported JDBC subprotocol {subprotocol!r} in {url!r}; "
                   "use jdbc:postgresql:, jdbc:mysql:, jdbc:mariadb:, jdbc:sqlite: "
                   "or a SQLAlchemy URL")
    parts = urlsplit(tail)
    if not parts.hostname:
        raise _bad(f"no host in {url!r}; expected jdbc:{subprotocol}://host:port/database")
    params = dict(parse_qsl(parts.query))
    try:
        port = parts.port
    except ValueError as exc:
        raise _bad(f"bad port in {url!r}") from exc
    return URL.create(
        driver,
        username=parts.username or params.get("user"),
        password=parts.password or params.get("password"),
        host=parts.hostname,
        port=port,
        database=parts.path.lstrip("/") or None,
    )


def to_sqlalchemy_url(url: str, user: str | None = None, password: str | None = None) -> URL:
    """The SQLAlchemy URL for ``url`` with ``user``/``password`` applied; ConfigError if bad."""
    url = url.strip()
    if not url:
        raise _bad("must not be empty")
    if url.startswith("jdbc:"):
        parsed = _from_jdbc(url)
    else:
        try:
            parsed = make_url(url)
        except ArgumentError as exc:
            raise _bad(f"not a JDBC or SQLAlchemy URL: {url!r}") from exc
        driver = _DEFAULT_DRIVERS.get(parsed.drivername)
        if driver is not None:
            parsed = parsed.set(drivername=driver)
    if user:
        parsed = parsed.set(username=user)
    if password:
        parsed = parsed.set(password=password)
    return parsed
