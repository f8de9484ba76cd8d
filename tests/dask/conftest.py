from __future__ import annotations

from collections.abc import Iterator

import pytest

from streamkit.testing import BrokerThread
from tests.analytics.util import broker_fixture


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerThread]:
    yield from broker_fixture(tmp_path_factory, "dask-broker")
