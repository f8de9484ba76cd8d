"""Shared fixtures. Tests that need a service (PostgreSQL, MariaDB, a Kafka client CLI) use
``require_service``: they skip on a developer laptop without it, and fail in CI, where
STREAMKIT_REQUIRE_SERVICES=1 is set, so a missing service is never silently skipped there."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

REQUIRE_SERVICES = os.environ.get("STREAMKIT_REQUIRE_SERVICES") == "1"


def require_service(available: bool, what: str) -> None:
    if available:
        return
    if REQUIRE_SERVICES:
        pytest.fail(f"{what} is required (STREAMKIT_REQUIRE_SERVICES=1) but not available")
    pytest.skip(f"{what} is not available")


@pytest.fixture(scope="session", autouse=True)
def _stop_shared_spark_session() -> Iterator[None]:
    """The shared SparkSession (tests/sparkutil.py), when some test started it, stops with
    its JVM at the end of the test session."""
    yield
    from tests.sparkutil import stop_spark_session

    stop_spark_session()
