"""One local SparkSession for every Spark test (it takes seconds to start), stopped with
its JVM at the end; each test module has its own broker."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

from streamkit.spark import local_session
from streamkit.testing import BrokerThread
from tests.analytics.util import broker_fixture


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    with local_session("streamkit-tests") as session:
        yield session


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerThread]:
    yield from broker_fixture(tmp_path_factory, "spark-broker")
