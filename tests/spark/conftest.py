"""The test session's one SparkSession (tests/sparkutil.py, shared with the Connect and demo
tests; it takes seconds to start); each test module has its own broker."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from streamkit.testing import BrokerThread
from tests.analytics.util import broker_fixture
from tests.sparkutil import spark_session


@pytest.fixture(scope="session")
def spark() -> SparkSession:
    return spark_session()


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerThread]:
    yield from broker_fixture(tmp_path_factory, "spark-broker")
