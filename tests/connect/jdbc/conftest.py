"""Fixtures: ``db`` runs a test on PostgreSQL, MariaDB and SQLite in turn (see databases.py)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import require_service
from tests.connect.jdbc.databases import (
    MYSQL_DEFAULT,
    POSTGRES_DEFAULT,
    Database,
    docker_available,
    reachable,
    started,
)


@pytest.fixture(scope="session")
def _servers() -> Iterator[dict[str, str | None]]:
    """SQLAlchemy URLs of PostgreSQL and MariaDB (None where neither Docker nor a server is)."""
    with contextlib.ExitStack() as stack:
        urls: dict[str, str | None] = {}
        use_docker = docker_available()
        for kind, env, default in (("postgresql", "STREAMKIT_TEST_POSTGRES_URL", POSTGRES_DEFAULT),
                                   ("mariadb", "STREAMKIT_TEST_MYSQL_URL", MYSQL_DEFAULT)):
            url = os.environ.get(env)
            if url is None and use_docker:
                # A container that cannot start (no image offline...) leaves the local server.
                with contextlib.suppress(Exception):
                    url = stack.enter_context(started(kind))
            url = url or default
            urls[kind] = url if reachable(url) else None
        yield urls


def _open(kind: str, tmp_path: Path, servers: dict[str, str | None]) -> Database:
    if kind == "sqlite":
        return Database.open(kind, f"sqlite:///{tmp_path / 'test.db'}")
    found = servers[kind]
    require_service(found is not None, f"{kind} (set STREAMKIT_TEST_"
                    f"{'POSTGRES' if kind == 'postgresql' else 'MYSQL'}_URL or start Docker)")
    assert found is not None
    return Database.open(kind, found)


@pytest.fixture(params=["postgresql", "mariadb", "sqlite"])
def db(request: pytest.FixtureRequest, tmp_path: Path,
       _servers: dict[str, str | None]) -> Iterator[Database]:
    """Each database in turn."""
    database = _open(request.param, tmp_path, _servers)
    try:
        yield database
    finally:
        database.drop_created()
        database.engine.dispose()


@pytest.fixture(params=["postgresql", "mariadb"])
def server_db(request: pytest.FixtureRequest, tmp_path: Path,
              _servers: dict[str, str | None]) -> Iterator[Database]:
    """The databases behind a server connection (that a test can cut)."""
    database = _open(request.param, tmp_path, _servers)
    try:
        yield database
    finally:
        database.drop_created()
        database.engine.dispose()
